"""Erasure that keeps the proof (issue 51, item 3): blank stored text, keep every hash, record who erased what and why.

``content_erase`` is one transaction: it appends the erasure record to its chain (``Erasure``, append-only in the
database), blanks the erased texts (entry version bodies; revision bodies, titles and summaries), which the history
guards allow only while that record names the rows (``artifacts/immutability.py``), takes the texts out of recall
(documents, postings, statistics and vectors, through ``recall_index_remove``, which also renews the corpus generation
so no worker keeps a copy), and scrubs the prepare log: every logged prepare that showed an erased text loses its
query and points at the record, so its replay says the content was erased. The search engine's index files are per
machine, outside the transaction: ``manage.py erase`` rebuilds this machine's after the commit (docs/erasure.md).
"""

from __future__ import annotations

import io
import json
import shutil
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import Case, Q, Value, When
from django.utils import timezone

from artifacts.models import (
    Artifact,
    ArtifactRevision,
    Erasure,
    Family,
    MemoryEntryVersion,
    PrepareLog,
    ProfileCandidate,
    RecallDocument,
    Scope,
)
from artifacts.recall.conf import recall_settings
from artifacts.recall.index import recall_index_remove
from artifacts.selectors.erasures import erasure_time_text
from artifacts.selectors.prepare_logs import prepare_record_read
from vocabulary.errors import Conflict, InvalidInput, NotFound
from vocabulary.history import erased_digest, erasure_chain_sha256
from vocabulary.limits import MAX_ERASURE_REASON_CHARACTERS
from vocabulary.text import text_problem

ERASURE_LOCK = 0x45524153
"""PostgreSQL: the advisory lock that makes erasures take their chain's next sequence one at a time."""

_LOG_BATCH = 500
"""Prepare-log rows read per round trip while looking for the ones that showed erased text."""


@dataclass(frozen=True)
class _Erased:
    """The rows one erasure blanks, and the citations a prepare showed them by."""

    revisions: list[ArtifactRevision]
    versions: list[MemoryEntryVersion]
    whole_scope: Scope | None = None


def content_erase(
    *,
    scope_id: str,
    reason: str,
    erased_by: str,
    family: str | None = None,
    artifact_id: str | None = None,
    revision: int | None = None,
    version_id: str | None = None,
) -> Erasure:
    """Erase one entry version (``version_id``), one revision's texts (``revision``; a memory revision: the entry
    versions born in it), or, with only ``scope_id``, everything the scope holds; return the erasure record.

    NotFound for an unknown target, InvalidInput for a missing reason or an incomplete target, Conflict when every
    text it names is erased already.
    """
    if problem := text_problem(reason, max_length=MAX_ERASURE_REASON_CHARACTERS):
        raise InvalidInput(f"reason: {problem}", path="reason")
    if (revision is not None or version_id is not None) and (family is None or artifact_id is None):
        raise InvalidInput("a revision or an entry version is named with its family and artifact id", path="family")
    if revision is not None and version_id is not None:
        raise InvalidInput("name a revision or an entry version, not both", path="version_id")
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ERASURE_LOCK])
        scope = Scope.objects.filter(scope_id=scope_id).first()
        if scope is None:
            raise NotFound("scope not found")
        artifact = None
        if family is not None and artifact_id is not None:
            artifact = Artifact.objects.filter(scope=scope, family=family, artifact_id=artifact_id).first()
            if artifact is None:
                raise NotFound("artifact not found")
        kind, erased = _targets(scope, artifact, revision, version_id)
        hashes = [r.content_sha256 for r in erased.revisions if _has_text(r)]
        hashes += [v.content_sha256 for v in erased.versions if v.body]
        if not hashes:
            raise Conflict("nothing left to erase: every text it names is erased already")
        record = _record_append(
            kind=kind,
            scope=scope,
            artifact=artifact if kind != Erasure.Kind.SCOPE else None,
            revision=revision,
            version=erased.versions[0] if kind == Erasure.Kind.ENTRY_VERSION else None,
            rows_erased=len(hashes),
            erased_sha256=erased_digest(hashes),
            revisions_through=max((r.pk for r in erased.revisions), default=0) if erased.whole_scope else None,
            versions_through=max((v.pk for v in erased.versions), default=0) if erased.whole_scope else None,
            reason=reason,
            erased_by=erased_by,
        )
        _texts_blank(erased)
        _recall_remove(erased)
        _prepare_logs_scrub(scope, erased, record)
    return record


def erasure_index_rebuild(*, scope_id: str) -> None:
    """After an erasure commits: rebuild this machine's search-engine index of the scope, when it keeps one, and remove
    the index of each family left too small to be indexed, so that no index file holds the erased words (other
    machines rebuild theirs: docs/erasure.md)."""
    if not recall_settings().search_index_dir:
        return
    call_command("recall_index_build", rebuild=True, scope=[scope_id], stdout=io.StringIO(), stderr=io.StringIO())
    from artifacts.recall.engine import build, store  # loads tantivy: only where an index is kept

    scope_pk = Scope.objects.get(scope_id=scope_id).pk
    minimum = recall_settings().search_index_min_documents
    kept = {family for _, family, _ in build.large_scopes(minimum, scope_pks=[scope_pk])}
    with store.writer_lock():
        for family in build.INDEXED_FAMILIES:
            path = store.index_path(scope_pk, family)
            if family not in kept and path.exists():
                shutil.rmtree(path)
                store.reader_forget(scope_pk, family)


def _targets(scope: Scope, artifact: Artifact | None, revision: int | None, version_id: str | None):
    if artifact is not None:
        if version_id is not None:
            if artifact.family != Family.MEMORY:
                raise InvalidInput("only memory has entry versions", path="family")
            version = MemoryEntryVersion.objects.filter(artifact=artifact, version_id=version_id).first()
            if version is None or version.born_in_revision > artifact.head_revision:
                raise NotFound("entry version not found")
            return Erasure.Kind.ENTRY_VERSION, _Erased([], [version])
        if revision is not None:
            found = (
                ArtifactRevision.objects.filter(artifact=artifact, revision=revision).select_related("artifact").first()
            )
            if found is None or revision > artifact.head_revision:
                raise NotFound("revision not found")
            versions = list(
                MemoryEntryVersion.objects.filter(artifact=artifact, born_in_revision=revision).order_by("pk")
            )
            return Erasure.Kind.REVISION, _Erased([found], versions)
        raise InvalidInput("name a revision or an entry version of the artifact, or only the scope", path="revision")
    if revision is not None or version_id is not None:  # content_erase refuses this first
        raise InvalidInput("a revision or an entry version is named with its family and artifact id", path="family")
    # The scope's artifacts locked first: a write locks its artifact before it inserts, so every write in flight has
    # committed (and is read below) and none adds a row until this erasure commits. The record then names exactly the
    # rows read here (``revisions_through``, ``versions_through``).
    list(Artifact.objects.select_for_update().filter(scope=scope).values_list("pk", flat=True))
    revisions = list(ArtifactRevision.objects.filter(artifact__scope=scope).select_related("artifact").order_by("pk"))
    versions = list(MemoryEntryVersion.objects.filter(artifact__scope=scope).order_by("pk"))
    return Erasure.Kind.SCOPE, _Erased(revisions, versions, whole_scope=scope)


def _has_text(revision: ArtifactRevision) -> bool:
    return any(getattr(revision, column) for column in ("body", "title", "summary"))


def _record_append(
    *,
    kind,
    scope,
    artifact,
    revision,
    version,
    rows_erased,
    erased_sha256,
    revisions_through,
    versions_through,
    reason,
    erased_by,
):
    """The next record of the erasure chain (the caller holds the chain's lock)."""
    last = Erasure.objects.order_by("-sequence").values_list("sequence", "chain_sha256").first()
    sequence, previous = (last[0] + 1, last[1]) if last else (1, "")
    values = {
        "kind": kind,
        "revision": revision if kind == Erasure.Kind.REVISION else None,
        "entry_id": version.entry_id if version is not None else None,
        "version_id": version.version_id if version is not None else None,
        "rows_erased": rows_erased,
        "revisions_through": revisions_through,
        "versions_through": versions_through,
        "erased_sha256": erased_sha256,
        "reason": reason,
        "erased_by": erased_by,
    }
    erased_at = timezone.now()  # microseconds, as both engines store it: the hash is what verification recomputes
    chain = erasure_chain_sha256(
        previous=previous,
        sequence=sequence,
        scope_id=scope.scope_id,
        family=artifact.family if artifact is not None else None,
        artifact_id=artifact.artifact_id if artifact is not None else None,
        erased_at=erasure_time_text(erased_at),
        **values,
    )
    return Erasure.objects.create(
        sequence=sequence,
        scope=scope,
        artifact=artifact,
        erased_at=erased_at,
        previous_sha256=previous,
        chain_sha256=chain,
        **values,
    )


def _texts_blank(erased: _Erased) -> None:
    blank = {
        column: Case(When(**{f"{column}__isnull": True}, then=Value(None)), default=Value(""))
        for column in ("body", "title", "summary")
    }
    if erased.revisions:
        ArtifactRevision.objects.filter(pk__in=[r.pk for r in erased.revisions]).update(**blank)
    if erased.versions:
        MemoryEntryVersion.objects.filter(pk__in=[v.pk for v in erased.versions]).update(body="")
    # A profile revision's text also sits in the candidate committed as it (and, for a scope, in every candidate).
    profiles = [(r.artifact_id, r.revision) for r in erased.revisions if r.artifact.family == Family.PROFILE]
    if erased.whole_scope is not None:
        ProfileCandidate.objects.filter(artifact__scope=erased.whole_scope).exclude(body="").update(body="")
    elif profiles:
        committed = Q()
        for artifact_pk, number in profiles:
            committed |= Q(artifact_id=artifact_pk, committed_revision=number)
        ProfileCandidate.objects.filter(committed).update(body="")


def _recall_remove(erased: _Erased) -> None:
    """The erased texts' recall documents out, with their postings, statistics and vectors, per artifact."""
    documents = RecallDocument.objects.filter(
        Q(entry_version__in=[v.pk for v in erased.versions]) | Q(revision__in=[r.pk for r in erased.revisions])
    )
    by_artifact: dict[int, list[RecallDocument]] = defaultdict(list)
    for document in documents:
        by_artifact[document.artifact_id].append(document)
    for artifact in Artifact.objects.filter(pk__in=list(by_artifact)).order_by("pk"):
        recall_index_remove(artifact=artifact, documents=by_artifact[artifact.pk])


def _shown(scope: Scope, erased: _Erased) -> set[tuple]:
    """The citations a prepare showed the erased texts by: (scope id, family, artifact id, revision) of a revision,
    (scope id, family, artifact id, entry id, version id) of an entry version."""
    artifacts = dict(
        Artifact.objects.filter(
            pk__in={r.artifact_id for r in erased.revisions} | {v.artifact_id for v in erased.versions}
        ).values_list("pk", "family")
    )
    ids = dict(Artifact.objects.filter(pk__in=list(artifacts)).values_list("pk", "artifact_id"))
    shown: set[tuple] = {
        (scope.scope_id, artifacts[r.artifact_id], ids[r.artifact_id], r.revision) for r in erased.revisions
    }
    shown |= {
        (scope.scope_id, artifacts[v.artifact_id], ids[v.artifact_id], v.entry_id, v.version_id)
        for v in erased.versions
    }
    return shown


def _citation_keys(citation) -> Iterable[tuple]:
    if citation.has_entry:
        yield (citation.scope_id, citation.family, citation.artifact_id, citation.entry_id, citation.entry_version)
    else:
        yield (citation.scope_id, citation.family, citation.artifact_id, citation.revision)


def _prepare_logs_scrub(scope: Scope, erased: _Erased, record: Erasure) -> int:
    """Every logged prepare that showed an erased text: its query blanked, and linked to the record. Only rows whose
    record names the scope are parsed (a text filter first); returns how many were scrubbed."""
    shown = _shown(scope, erased)
    needle = json.dumps(scope.scope_id, ensure_ascii=False)
    scrubbed: list[int] = []
    last = 0
    while True:
        logs = list(
            PrepareLog.objects.filter(pk__gt=last, http_status=200, record__contains=needle).order_by("pk")[:_LOG_BATCH]
        )
        if not logs:
            break
        last = logs[-1].pk
        for log in logs:
            parsed = prepare_record_read(log=log)
            if parsed is None:
                continue
            citations = (c for per_scope in parsed.recalled.values() for hits in per_scope for c in hits)
            if any(key in shown for citation in citations for key in _citation_keys(citation)):
                scrubbed.append(log.pk)
    for start in range(0, len(scrubbed), _LOG_BATCH):
        PrepareLog.objects.filter(pk__in=scrubbed[start : start + _LOG_BATCH]).update(query="", erasure=record)
    return len(scrubbed)
