"""The chain covers every byte a read serves (issue 51, item 2): chain encoding 2, and ``texts_sha256``.

Encoding 1 left out what the reads serve besides the content hash: a revision's time, its title and summary where its
content hash covers its body only (experience, profile, body-only families), and an entry version's time (a tie-break
of the selection policy). Encoding 2 (``vocabulary.history.revision_chain_sha256``) covers them, the texts through
``ArtifactRevision.texts_sha256`` (kept when an erasure blanks them, as ``content_sha256`` is).

The forward step first verifies every stored chain under encoding 1 (``revision_chain_v1_sha256``): each revision
chained to its stored predecessor, numbered 1..n without a gap. A history that does not verify is not upgraded: the
migration stops with ``HistoryDoesNotVerify`` naming the first bad row, and nothing is written (the migration is one
transaction). Then, with the history guards lifted (0021's frozen set dropped and installed again, as 0011 did for its
backfill), it writes every revision's ``texts_sha256`` (from its stored texts: an erased revision's are its blanks,
which verify_history excuses as erased) and its encoding 2 chain. Both passes read a bounded page of revisions at a
time (``_PAGE``) with the entry versions born and retired in it, so memory stays bounded whatever the history's size.

Anchors written before this migration name encoding 1 chain hashes, which no longer exist: they are superseded (take a
new anchor right after migrating; docs/deployment.md). Reverse: the encoding 1 chains are written back, then the column
goes.
"""

import importlib

from django.db import migrations, models
from django.db.models import Q

from vocabulary.history import revision_chain_sha256, revision_chain_v1_sha256, revision_texts_sha256

_GUARDS = importlib.import_module("artifacts.migrations.0021_erasure_scope_bound")
"""The history guards installed now (frozen there): dropped while the chains are rewritten, then installed again."""

_PAGE = 1000
"""Revisions read (and written) per round of statements."""


class HistoryDoesNotVerify(RuntimeError):
    """The stored history does not verify under chain encoding 1: the migration refuses to write encoding 2 over it."""


class _Version:
    """An entry version as the hashes read it."""

    __slots__ = ("entry_id", "version_id", "content_sha256", "conflict_key", "created_at")

    def __init__(self, entry_id, version_id, content_sha256, conflict_key, created_at):
        self.entry_id, self.version_id, self.content_sha256 = entry_id, version_id, content_sha256
        self.conflict_key, self.created_at = conflict_key, created_at


_REVISION_FIELDS = (
    "id",
    "artifact_id",
    "revision",
    "body",
    "title",
    "summary",
    "content_sha256",
    "author",
    "created_at",
    "chain_sha256",
)


def _after(artifact, revision):
    """Rows of revisions after (artifact, revision) in (artifact, revision) order."""
    return Q(artifact_id__gt=artifact) | Q(artifact_id=artifact, revision__gt=revision)


def _changes(apps, page, column):
    """The entry versions born (``column`` born_in_revision) or retired in the page's revisions, by (artifact,
    revision): one statement over the page's span, filtered to its rows."""
    version_model = apps.get_model("artifacts", "MemoryEntryVersion")
    (first_artifact, first), (last_artifact, last) = (page[0][1:3], page[-1][1:3])
    span = (
        Q(artifact_id=first_artifact, **{f"{column}__gte": first, f"{column}__lte": last})
        if first_artifact == last_artifact
        else Q(artifact_id=first_artifact, **{f"{column}__gte": first})
        | Q(artifact_id__gt=first_artifact, artifact_id__lt=last_artifact)
        | Q(artifact_id=last_artifact, **{f"{column}__lte": last})
    )
    keys = {(row[1], row[2]) for row in page}
    found = {}
    rows = (
        version_model.objects.filter(span, **{f"{column}__isnull": False})
        .order_by("id")
        .values_list("artifact_id", column, "entry_id", "version_id", "content_sha256", "conflict_key", "created_at")
    )
    for artifact, revision, *fields in rows:
        if (artifact, revision) in keys:
            found.setdefault((artifact, revision), []).append(_Version(*fields))
    return found


def _pages(apps):
    """Every revision in (artifact, revision) order, a page at a time, each row with the artifact's identity and the
    entry versions born and retired in it: (row, identity, born, retired)."""
    revision_model = apps.get_model("artifacts", "ArtifactRevision")
    artifact_model = apps.get_model("artifacts", "Artifact")
    where = Q()
    while True:
        page = list(
            revision_model.objects.filter(where)
            .order_by("artifact_id", "revision")
            .values_list(*_REVISION_FIELDS)[:_PAGE]
        )
        if not page:
            return
        identities = {
            pk: (scope_id, family, artifact_id)
            for pk, scope_id, family, artifact_id in artifact_model.objects.filter(
                pk__in={row[1] for row in page}
            ).values_list("pk", "scope__scope_id", "family", "artifact_id")
        }
        born, retired = _changes(apps, page, "born_in_revision"), _changes(apps, page, "retired_in_revision")
        yield [
            (row, identities[row[1]], born.get((row[1], row[2]), []), retired.get((row[1], row[2]), [])) for row in page
        ]
        where = _after(page[-1][1], page[-1][2])


def _verify_encoding_1(apps) -> None:
    """Every stored chain hash recomputed under encoding 1 from its stored predecessor; HistoryDoesNotVerify names the
    first revision that differs (or that follows a gap)."""
    last_artifact, last_number, last_chain = None, 0, ""
    for page in _pages(apps):
        for (pk, artifact, number, _b, _t, _s, content, author, _c, chain), identity, born, retired in page:
            if artifact != last_artifact:
                last_artifact, last_number, last_chain = artifact, 0, ""
            scope_id, family, artifact_id = identity
            where = f"scope {scope_id!r} {family}:{artifact_id!r} revision {number} (row id {pk})"
            if number != last_number + 1:
                raise HistoryDoesNotVerify(
                    f"migration 0022 refuses to upgrade the history chain: {where} follows revision {last_number}. "
                    "Run manage.py verify_history, repair the history, then migrate again."
                )
            computed = revision_chain_v1_sha256(
                previous_chain=last_chain,
                scope_id=scope_id,
                family=family,
                artifact_id=artifact_id,
                revision=number,
                content_sha256=content,
                author=author,
                born=born,
                retired=retired,
            )
            if computed != chain:
                raise HistoryDoesNotVerify(
                    f"migration 0022 refuses to upgrade the history chain: {where} does not verify under encoding 1 "
                    f"(chain_sha256 stored {chain}, recomputed {computed}). Run manage.py verify_history, repair the "
                    "history, then migrate again."
                )
            last_number, last_chain = number, chain


def _write(apps, connection, *, encoding: int) -> None:
    """Every revision's chain written again under ``encoding`` (2: with its ``texts_sha256``; 1: as before 0022)."""
    last_artifact, last_chain = None, ""
    with connection.cursor() as cursor:
        for page in _pages(apps):
            updates = []
            for (
                pk,
                artifact,
                number,
                body,
                title,
                summary,
                content,
                author,
                created_at,
                _,
            ), identity, born, retired in page:
                if artifact != last_artifact:
                    last_artifact, last_chain = artifact, ""
                scope_id, family, artifact_id = identity
                common = {
                    "previous_chain": last_chain,
                    "scope_id": scope_id,
                    "family": family,
                    "artifact_id": artifact_id,
                    "revision": number,
                    "content_sha256": content,
                    "author": author,
                    "born": born,
                    "retired": retired,
                }
                if encoding == 2:
                    texts = revision_texts_sha256(title=title, summary=summary, body=body)
                    last_chain = revision_chain_sha256(**common, texts_sha256=texts, created_at=created_at)
                    updates.append((texts, last_chain, pk))
                else:
                    last_chain = revision_chain_v1_sha256(**common)
                    updates.append((last_chain, pk))
            cursor.executemany(
                "UPDATE artifacts_artifactrevision SET texts_sha256 = %s, chain_sha256 = %s WHERE id = %s"
                if encoding == 2
                else "UPDATE artifacts_artifactrevision SET chain_sha256 = %s WHERE id = %s",
                updates,
            )


def _forward(apps, schema_editor):
    _verify_encoding_1(apps)
    _GUARDS._run(schema_editor, _GUARDS.UNINSTALL)
    _write(apps, schema_editor.connection, encoding=2)
    _GUARDS._run(schema_editor, _GUARDS.INSTALL)


def _reverse(apps, schema_editor):
    _GUARDS._run(schema_editor, _GUARDS.UNINSTALL)
    _write(apps, schema_editor.connection, encoding=1)
    _GUARDS._run(schema_editor, _GUARDS.INSTALL)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0021_erasure_scope_bound")]

    operations = [
        migrations.AddField(
            model_name="artifactrevision",
            name="texts_sha256",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.RunPython(_forward, _reverse),
    ]
