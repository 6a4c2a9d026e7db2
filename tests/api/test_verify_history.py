"""``manage.py verify_history`` and the admin's revision page catch a superuser's silent edit of history.

A superuser can lift the triggers (PostgreSQL: ``session_replication_role = replica``; SQLite: drop them) and change
rows; each kind of edit is reported with the artifact, the revision and what differs, and the command exits 1. One
who recomputes a whole chain consistently passes the row checks but not an anchor written before. Each case runs on
the current engine (CI runs SQLite and PostgreSQL).
"""

from __future__ import annotations

import datetime
import errno
import importlib
import json
import os
import stat
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.urls import reverse

from artifacts import services
from artifacts.immutability import install_triggers, uninstall_triggers
from artifacts.management.commands import verify_history
from artifacts.models import Artifact, ArtifactRevision, MemoryEntryVersion
from tests.api.factories import add_memory, add_topic, make_scope, remove_memory, update_memory
from vocabulary import history as hashes
from vocabulary.text import sha256_text


@contextmanager
def triggers_lifted():
    """One transaction as a superuser with the history guards out of the way."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = replica")
        else:
            uninstall_triggers(connection)
        yield cursor
        if connection.vendor == "sqlite":
            install_triggers(connection)


@pytest.fixture
def scope(db):
    scope = make_scope("project:verified")
    add_memory(scope, {"e1": "first", "e2": "second"})
    update_memory(scope, "e1", "first, revised")
    remove_memory(scope, "e2")
    services.experience_revision_create(scope=scope, artifact_id="x", body="lesson one", author="test")
    services.experience_revision_create(scope=scope, artifact_id="x", body="lesson two", author="test")
    add_topic(scope, "t", title="Topic", summary="summary", body="detail")
    services.artifact_body_revision_create(scope=scope, family="skill", artifact_id="s", body="how", author="test")
    return scope


def verify(*args) -> tuple[bool, str, str]:
    """(exit status 0?, stdout, stderr) of verify_history."""
    out, err = [], []

    class Sink:
        def __init__(self, into):
            self.into = into

        def write(self, text):
            self.into.append(text)

        def flush(self):
            pass

    try:
        call_command("verify_history", *args, stdout=Sink(out), stderr=Sink(err))
    except CommandError as exc:
        assert exc.returncode == 1
        return False, "".join(out), "".join(err) + str(exc)
    return True, "".join(out), "".join(err)


def revision(family: str, artifact_id: str, number: int) -> ArtifactRevision:
    return ArtifactRevision.objects.get(artifact__family=family, artifact__artifact_id=artifact_id, revision=number)


def test_a_history_written_by_the_services_verifies(scope):
    ok, out, err = verify()
    assert ok, out
    assert "checked 4 artifacts, 7 revisions, 3 entry versions: 0 problems in 0 artifacts" in out
    assert "verify_history: 4 of 4 artifacts" in err


def test_a_body_changed_with_the_triggers_lifted_is_reported(scope):
    with triggers_lifted() as cursor:
        cursor.execute(
            "UPDATE artifacts_artifactrevision SET body = 'forged' WHERE id = %s", [revision("experience", "x", 1).pk]
        )
    ok, out, err = verify()
    assert not ok
    assert 'scope "project:verified" experience:x revision 1: content_sha256 (stored ' in out
    assert 'scope "project:verified" experience:x revision 1: texts_sha256 (stored ' in out
    assert "2 problems in 1 artifacts" in out and "history does not verify" in err


def test_a_body_changed_with_its_content_hash_breaks_the_chain(scope):
    forged = revision("experience", "x", 1)
    with triggers_lifted() as cursor:
        cursor.execute(
            "UPDATE artifacts_artifactrevision SET body = 'forged', content_sha256 = %s WHERE id = %s",
            [sha256_text("forged"), forged.pk],
        )
    ok, out, _ = verify()
    assert not ok
    assert "experience:x revision 1: chain_sha256 (stored " in out
    assert "content_sha256" not in out


def test_an_entry_body_changed_with_or_without_its_hash_is_reported(scope):
    version = MemoryEntryVersion.objects.get(version_id="e1-v2")
    with triggers_lifted() as cursor:
        cursor.execute("UPDATE artifacts_memoryentryversion SET body = 'forged' WHERE id = %s", [version.pk])
    ok, out, _ = verify()
    assert not ok and 'memory:memory revision 2: entry "e1"@"e1-v2" content_sha256' in out
    with triggers_lifted() as cursor:
        cursor.execute(
            "UPDATE artifacts_memoryentryversion SET content_sha256 = %s WHERE id = %s",
            [sha256_text("forged"), version.pk],
        )
    ok, out, _ = verify()
    assert not ok and "memory:memory revision 2: content_sha256 (stored " in out


def test_a_retirement_made_with_the_triggers_lifted_is_reported(scope):
    with triggers_lifted() as cursor:
        cursor.execute("UPDATE artifacts_memoryentryversion SET retired_in_revision = 3 WHERE version_id = 'e1-v2'")
    ok, out, _ = verify()
    assert not ok
    assert "memory:memory revision 3: content_sha256" in out
    assert "memory:memory revision 3: entries retired (stored 1, recomputed 2)" in out


def recompute_chain(artifact: Artifact, body: str) -> None:
    """What a careful superuser does: change revision 1's body and make every hash after it agree."""
    with triggers_lifted() as cursor:
        chain = ""
        for row in ArtifactRevision.objects.filter(artifact=artifact).order_by("revision"):
            text = body if row.revision == 1 else row.body
            content = sha256_text(text)
            texts = hashes.revision_texts_sha256(title=row.title, summary=row.summary, body=text)
            chain = hashes.revision_chain_sha256(
                previous_chain=chain,
                scope_id=artifact.scope.scope_id,
                family=artifact.family,
                artifact_id=artifact.artifact_id,
                revision=row.revision,
                content_sha256=content,
                texts_sha256=texts,
                author=row.author,
                created_at=row.created_at,
            )
            cursor.execute(
                "UPDATE artifacts_artifactrevision SET body = %s, content_sha256 = %s, texts_sha256 = %s, "
                "chain_sha256 = %s WHERE id = %s",
                [text, content, texts, chain, row.pk],
            )


def test_a_whole_chain_recomputed_is_caught_by_an_anchor_written_before(scope, tmp_path):
    anchor = tmp_path / "anchor.json"
    ok, _, err = verify("--write-anchor", str(anchor))
    assert ok and "anchor of 4 heads written" in err
    recompute_chain(Artifact.objects.get(scope=scope, family="experience"), "forged")
    assert verify()[0]  # every row agrees with every other
    ok, out, _ = verify("--anchor", str(anchor))
    assert not ok
    assert "experience:x revision 2: chain_sha256 at the anchored head (stored " in out
    assert "1 problems in 1 artifacts" in out


def test_an_anchor_edited_by_hand_is_refused(scope, tmp_path):
    anchor = tmp_path / "anchor.json"
    verify("--write-anchor", str(anchor))
    document = json.loads(anchor.read_text())
    document["heads"][0][4] = "0" * 64
    anchor.write_text(json.dumps(document))
    with pytest.raises(CommandError, match="cannot use anchor"):
        call_command("verify_history", "--anchor", str(anchor))


@pytest.mark.parametrize("where", ["missing/anchor.json", "a-file/anchor.json", "."])
def test_an_anchor_that_cannot_be_written_is_refused_before_verifying(scope, tmp_path, monkeypatch, where):
    (tmp_path / "a-file").write_text("not a directory")

    def verification(**kwargs):
        raise AssertionError("the verification started")

    monkeypatch.setattr(verify_history, "history_artifact_count", verification)
    monkeypatch.setattr(verify_history, "history_artifact_batches", verification)
    with pytest.raises(CommandError, match="cannot write anchor"):
        call_command("verify_history", "--write-anchor", str(tmp_path / where))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file"]


def test_an_anchor_write_cut_short_leaves_the_previous_anchor_whole(scope, tmp_path, monkeypatch):
    anchor = tmp_path / "anchor.json"
    assert verify("--write-anchor", str(anchor))[0]
    previous = anchor.read_bytes()
    opened = Path.open

    def disk_full_half_way(path, mode="r", *args, **kwargs):
        file = opened(path, mode, *args, **kwargs)
        if "w" in mode:
            write = file.write

            def half(text):
                write(text[: len(text) // 2])
                raise OSError(errno.ENOSPC, "No space left on device")

            file.write = half
        return file

    monkeypatch.setattr(Path, "open", disk_full_half_way)
    with pytest.raises(CommandError, match="cannot write anchor .*No space left on device"):
        call_command("verify_history", "--write-anchor", str(anchor))
    monkeypatch.undo()
    assert anchor.read_bytes() == previous
    assert [path.name for path in tmp_path.iterdir()] == ["anchor.json"]  # no temporary file left behind
    assert verify("--anchor", str(anchor))[0]


def test_an_anchor_is_replaced_whole_and_readable_as_before(scope, tmp_path):
    anchor = tmp_path / "anchor.json"
    anchor.write_text("an older anchor")
    anchor.chmod(0o644)
    assert verify("--write-anchor", str(anchor))[0]
    assert json.loads(anchor.read_text())["format"] == verify_history.ANCHOR_FORMAT
    assert stat.S_IMODE(anchor.stat().st_mode) == 0o666 & ~current_umask()  # the mode a plain write gives
    assert [path.name for path in tmp_path.iterdir()] == ["anchor.json"]


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


@pytest.mark.parametrize(
    "heads, problem",
    [
        ({"a": 1}, "heads must be a list, not dict"),
        ([[1, 2, 3]], r"head 0 must be \[scope_id, family, artifact_id, revision, chain_sha256\]"),
        ([["project:verified", "memory", "memory", 3, "c"], "x"], "head 1 must be"),
        ([[["a"], "memory", "x", 1, "c"]], "head 0: scope_id, family and artifact_id must be strings"),
        ([["project:verified", "memory", "memory", "3", "c"]], "head 0: revision must be a whole number from 1"),
        ([["project:verified", "memory", "memory", True, "c"]], "head 0: revision must be a whole number from 1"),
        ([["project:verified", "memory", "memory", 0, "c"]], "head 0: revision must be a whole number from 1"),
        ([["project:verified", "memory", "memory", 3, ["c"]]], "head 0: chain_sha256 must be a string or null"),
        ([["s", "memory", "m", 1, "c"], ["s", "memory", "m", 2, "d"]], "head 1: the artifact is anchored twice"),
    ],
)
def test_an_anchor_with_a_correct_digest_but_malformed_heads_is_refused(scope, tmp_path, heads, problem):
    anchor = tmp_path / "anchor.json"
    document = {"format": verify_history.ANCHOR_FORMAT, "heads": heads, "digest": verify_history.anchor_digest(heads)}
    anchor.write_text(json.dumps(document))
    with pytest.raises(CommandError, match=f"cannot use anchor .*: {problem}"):
        call_command("verify_history", "--anchor", str(anchor))


def test_the_json_report_and_the_scope_option(scope):
    other = make_scope("project:other")
    add_memory(other, {"o": "other"})
    with triggers_lifted() as cursor:
        cursor.execute(
            "UPDATE artifacts_artifactrevision SET author = 'someone else' WHERE id = %s",
            [revision("skill", "s", 1).pk],
        )
    ok, out, _ = verify("--json")
    report = json.loads(out)
    assert not ok and report["ok"] is False and report["artifacts"] == 5
    assert [(p["family"], p["artifact_id"], p["revision"], p["problem"]) for p in report["report"]] == [
        ("skill", "s", 1, "chain_sha256")
    ]
    ok, out, _ = verify("--json", "--scope", "project:other")
    assert ok and json.loads(out)["artifacts"] == 1


def test_the_admin_revision_page_shows_verified_then_mismatch(scope, staff_client):
    target = revision("memory", "memory", 2)
    url = reverse("admin:artifacts_artifactrevision_change", args=[target.pk])
    page = staff_client.get(url).content.decode()
    assert "verified</strong>" in page and "MISMATCH" not in page
    with triggers_lifted() as cursor:
        cursor.execute("UPDATE artifacts_memoryentryversion SET body = 'forged' WHERE version_id = 'e1-v2'")
    page = staff_client.get(url).content.decode()
    assert "MISMATCH</strong>" in page
    assert "entry &quot;e1&quot;@&quot;e1-v2&quot; content_sha256" in page
    other = staff_client.get(
        reverse("admin:artifacts_artifactrevision_change", args=[revision("memory", "memory", 1).pk])
    )
    assert "verified</strong>" in other.content.decode()


def test_the_migrations_backfill_computes_what_the_services_store(scope):
    # Migration 0011 filled these for revisions written before it (chain encoding 1), which 0022 verified and wrote
    # again under encoding 2 with the texts' hash: the same values, so those verify too.
    columns = ("entries_born", "entries_retired", "chain_sha256", "texts_sha256")
    written = list(ArtifactRevision.objects.order_by("pk").values_list("pk", *columns))
    ordinals = list(MemoryEntryVersion.objects.order_by("pk").values_list("pk", "born_ordinal", "retired_ordinal"))
    migration = importlib.import_module("artifacts.migrations.0011_history_chain")
    upgrade = importlib.import_module("artifacts.migrations.0022_history_chain_covers_reads")
    with triggers_lifted() as cursor:
        cursor.execute(
            "UPDATE artifacts_artifactrevision SET entries_born = NULL, entries_retired = NULL, chain_sha256 = NULL, "
            "texts_sha256 = NULL"
        )
        cursor.execute("UPDATE artifacts_memoryentryversion SET born_ordinal = NULL, retired_ordinal = NULL")
        migration._backfill(connection)
        upgrade._verify_encoding_1(django_apps)
        upgrade._write(django_apps, connection, encoding=2)
    assert list(ArtifactRevision.objects.order_by("pk").values_list("pk", *columns)) == written
    heads = {a.pk: a.head_revision for a in Artifact.objects.all()}
    backfilled = list(MemoryEntryVersion.objects.order_by("pk").values_list("pk", "born_ordinal", "retired_ordinal"))
    version_rows = {v.pk: v for v in MemoryEntryVersion.objects.all()}
    expected = [
        (
            pk,
            born if version_rows[pk].born_in_revision == heads[version_rows[pk].artifact_id] else None,
            retired if version_rows[pk].retired_in_revision == heads[version_rows[pk].artifact_id] else None,
        )
        for pk, born, retired in ordinals
    ]
    assert backfilled == expected
    assert verify()[0]


# --- every column a read serves or the selection policy uses (issue 51, item 2: chain encoding 2) ------------------

FORGED_TIME = datetime.datetime(2020, 2, 2, 2, 2, 2, tzinfo=datetime.UTC)


def _stored_time(value: datetime.datetime):
    """A time as a raw statement writes it on this engine."""
    return connection.ops.adapt_datetimefield_value(value)


TAMPERINGS = [
    # What an exact read, a history page or the selection policy serves or uses, changed as the database's owner:
    # (row: family, artifact, revision, entry born there or None), column, value, what verify_history reports.
    (("experience", "x", 1, None), "created_at", FORGED_TIME, "chain_sha256"),
    (("memory", "memory", 2, None), "created_at", FORGED_TIME, "chain_sha256"),
    (("memory", "memory", 2, "e1"), "created_at", FORGED_TIME, "chain_sha256"),
    (("experience", "x", 2, None), "title", "injected title", "texts_sha256"),
    (("experience", "x", 2, None), "summary", "injected summary", "texts_sha256"),
    (("skill", "s", 1, None), "title", "injected", "texts_sha256"),
    (("memory", "memory", 1, None), "body", "injected", "texts_sha256"),
    (("topic_memory", "t", 1, None), "title", "Forged", "texts_sha256"),
    (("experience", "x", 1, None), "author", "someone-else", "chain_sha256"),
    (("memory", "memory", 1, "e2"), "conflict_key", "preference:forged", "chain_sha256"),
]


@pytest.mark.parametrize("anchored", [False, True], ids=["plain", "anchor"])
@pytest.mark.parametrize(
    ("row", "column", "value", "reported"),
    TAMPERINGS,
    ids=[f"{row[0]}-{'entry-' if row[3] else ''}{column}" for row, column, *_ in TAMPERINGS],
)
def test_a_served_column_changed_by_the_owner_is_reported_with_and_without_an_anchor(
    scope, tmp_path, row, column, value, reported, anchored
):
    anchor = tmp_path / "anchor.json"
    assert verify("--write-anchor", str(anchor))[0]
    family, artifact_id, number, entry_id = row
    target = revision(family, artifact_id, number)
    table, pk = ("artifactrevision", target.pk) if entry_id is None else ("memoryentryversion", None)
    if entry_id is not None:
        pk = MemoryEntryVersion.objects.get(entry_id=entry_id, born_in_revision=number).pk
    if isinstance(value, datetime.datetime):
        value = _stored_time(value)
    with triggers_lifted() as cursor:
        cursor.execute(f"UPDATE artifacts_{table} SET {column} = %s WHERE id = %s", [value, pk])  # noqa: S608
    ok, out, err = verify(*(("--anchor", str(anchor)) if anchored else ()))
    assert not ok and "history does not verify" in err
    assert f'scope "project:verified" {family}:{artifact_id} revision {number}: {reported} (stored ' in out


def test_a_title_injected_with_its_texts_hash_recomputed_breaks_the_chain(scope):
    target = revision("experience", "x", 2)
    texts = hashes.revision_texts_sha256(title="injected", summary="injected", body=target.body)
    with triggers_lifted() as cursor:
        cursor.execute(
            "UPDATE artifacts_artifactrevision SET title = 'injected', summary = 'injected', texts_sha256 = %s "
            "WHERE id = %s",
            [texts, target.pk],
        )
    ok, out, _ = verify()
    assert not ok
    assert "experience:x revision 2: chain_sha256 (stored " in out and "texts_sha256" not in out


def test_a_time_moved_with_the_whole_chain_recomputed_is_caught_by_an_anchor(scope, tmp_path):
    anchor = tmp_path / "anchor.json"
    assert verify("--write-anchor", str(anchor))[0]
    artifact = Artifact.objects.get(scope=scope, family="experience")
    with triggers_lifted() as cursor:
        chain = ""
        for row in ArtifactRevision.objects.filter(artifact=artifact).order_by("revision"):
            chain = hashes.revision_chain_sha256(
                previous_chain=chain,
                scope_id=scope.scope_id,
                family=artifact.family,
                artifact_id=artifact.artifact_id,
                revision=row.revision,
                content_sha256=row.content_sha256,
                texts_sha256=row.texts_sha256,
                author=row.author,
                created_at=FORGED_TIME if row.revision == 1 else row.created_at,
            )
            cursor.execute(
                "UPDATE artifacts_artifactrevision SET created_at = %s, chain_sha256 = %s WHERE id = %s",
                [_stored_time(FORGED_TIME) if row.revision == 1 else _stored_time(row.created_at), chain, row.pk],
            )
    assert verify()[0]  # every row agrees with every other
    ok, out, _ = verify("--anchor", str(anchor))
    assert not ok and "experience:x revision 2: chain_sha256 at the anchored head (stored " in out


# --- conflict slots (seeds/003) -----------------------------------------------------------------------------

SLOT = "preference:automation-language"


@pytest.fixture
def slotted(scope):
    """The scope's history plus a memory revision 4 writing "lang" in SLOT and "plain" without a slot."""
    W = services.EntryVersionWrite
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        writes=[W("lang", "lang-v1", "Use Python.", conflict_key=SLOT), W("plain", "plain-v1", "A note.")],
        author="test",
    )
    return scope


def test_a_history_with_slots_verifies(slotted):
    ok, out, _ = verify()
    assert ok, out
    assert "5 entry versions: 0 problems" in out


@pytest.mark.parametrize(("version", "slot"), [("lang-v1", "preference:other"), ("lang-v1", None), ("plain-v1", SLOT)])
def test_a_slot_changed_with_the_triggers_lifted_is_reported(slotted, staff_client, version, slot):
    with triggers_lifted() as cursor:
        cursor.execute(
            "UPDATE artifacts_memoryentryversion SET conflict_key = %s WHERE version_id = %s", [slot, version]
        )
    ok, out, _ = verify()
    assert not ok
    assert "memory:memory revision 4: content_sha256 (stored " in out
    assert "memory:memory revision 4: chain_sha256 (stored " in out
    assert "2 problems in 1 artifacts" in out
    page = staff_client.get(
        reverse("admin:artifacts_artifactrevision_change", args=[revision("memory", "memory", 4).pk])
    )
    assert "MISMATCH</strong>" in page.content.decode()


def test_a_slot_changed_with_the_content_hash_recomputed_breaks_the_chain(slotted):
    target = revision("memory", "memory", 4)
    previous = revision("memory", "memory", 3).content_sha256
    born = list(MemoryEntryVersion.objects.filter(born_in_revision=4).order_by("pk"))
    for version in born:
        if version.version_id == "lang-v1":
            version.conflict_key = "preference:other"
    with triggers_lifted() as cursor:
        cursor.execute(
            "UPDATE artifacts_memoryentryversion SET conflict_key = 'preference:other' WHERE version_id = 'lang-v1'"
        )
        cursor.execute(
            "UPDATE artifacts_artifactrevision SET content_sha256 = %s WHERE id = %s",
            [hashes.memory_revision_sha256(previous, born, []), target.pk],
        )
    ok, out, _ = verify()
    assert not ok
    assert "memory:memory revision 4: chain_sha256 (stored " in out
    assert "revision 4: content_sha256" not in out
