"""Reads of the prepare log: one entry, its decoded record, and the candidates rebuilt from revisions.

The rebuilt candidates are what the recall sources returned at the time, body for body: a memory entry's
body is its (immutable) entry version, a topic memory's is the projection of its revision's title,
summary and detail with the logged query, every other family's is the revision body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce
from operator import or_

from django.db.models import F, Q, Sum, Window

from artifacts.models import ArtifactRevision, Family, MemoryEntryVersion, PrepareLog
from artifacts.recall.projection import topic_memory_projection, topic_memory_projection_by_digest
from vocabulary.citation import Candidate, Citation
from vocabulary.errors import NotFound

RECORD_TOPIC_SHOWN = "topic_shown"
"""The record's key, in a row without the query's text, for the body each topic memory showed."""


@dataclass(frozen=True)
class PrepareRecord:
    """A logged prepare's decoded record: scopes read, effective options (None: legacy), citations."""

    scopes: tuple[str, ...]
    options: dict | None
    recalled: dict[str, list[list[Citation]]]
    topic_shown: list[list[str]] | None = None
    """Without the query's text: the ``projection_digest`` of each topic memory's shown body, per scope."""


@dataclass(frozen=True)
class RebuiltCandidates:
    """The candidates as the core got them, the admin page of each cited row, and what was missing."""

    recalled: dict[str, list[list[Candidate]]]
    revision_pks: dict[Citation, int]
    entry_version_pks: dict[Citation, int]
    missing: tuple[Citation, ...]


def prepare_log_get(*, log_id: int) -> PrepareLog:
    """One log entry with its key and scope, or NotFound."""
    found = PrepareLog.objects.select_related("api_key", "scope").filter(pk=log_id).first()
    if found is None:
        raise NotFound(f"no prepare log entry {log_id}")
    return found


def _citation(family: str, scopes: tuple[str, ...], item: list) -> Citation:
    where, artifact_id, revision, *entry = item
    scope_id = scopes[where] if isinstance(where, int) else where
    if entry:
        return Citation(scope_id, family, artifact_id, revision, entry_id=entry[0], entry_version=entry[1])
    return Citation(scope_id, family, artifact_id, revision)


def prepare_record_read(*, log: PrepareLog) -> PrepareRecord | None:
    """The decoded record of a logged prepare, or None when it has none (an error, or logged without)."""
    if not log.record:
        return None
    raw = json.loads(log.record)
    scopes = tuple(raw["scopes"])
    recalled = {
        family: [[_citation(family, scopes, item) for item in hits] for hits in per_scope]
        for family, per_scope in raw["recalled"].items()
    }
    return PrepareRecord(
        scopes=scopes, options=raw["options"], recalled=recalled, topic_shown=raw.get(RECORD_TOPIC_SHOWN)
    )


def prepare_log_query_kept(*, log: PrepareLog) -> bool:
    """Whether the log keeps the query's text (a longer one, or any in hash-only mode, keeps its SHA-256 only)."""
    return bool(log.query) or not log.query_bytes


def prepare_log_newest_over_cap(*, cap_bytes: int) -> int | None:
    """The id of the newest row that, counting ``stored_bytes`` from the newest back, exceeds ``cap_bytes``."""
    running = Window(Sum("stored_bytes"), order_by=F("pk").desc())
    over = PrepareLog.objects.annotate(running=running).filter(running__gt=cap_bytes).order_by("-pk")
    return over.values_list("pk", flat=True).first()


def _revision_key(citation: Citation) -> tuple:
    return (citation.scope_id, citation.family, citation.artifact_id, citation.revision)


def _revisions(citations: set[Citation]) -> dict[tuple, ArtifactRevision]:
    keys = {_revision_key(c) for c in citations}
    if not keys:
        return {}
    match = reduce(
        or_,
        (
            Q(artifact__scope__scope_id=s, artifact__family=f, artifact__artifact_id=a, revision=r)
            for s, f, a, r in keys
        ),
    )
    rows = ArtifactRevision.objects.filter(match).select_related("artifact__scope")
    return {(r.artifact.scope.scope_id, r.artifact.family, r.artifact.artifact_id, r.revision): r for r in rows}


def _entry_versions(citations: set[Citation]) -> dict[Citation, MemoryEntryVersion]:
    entries = [c for c in citations if c.has_entry]
    if not entries:
        return {}
    match = reduce(
        or_,
        (
            Q(artifact__scope__scope_id=c.scope_id, artifact__artifact_id=c.artifact_id, version_id=c.entry_version)
            for c in entries
        ),
    )
    rows = MemoryEntryVersion.objects.filter(match, artifact__family=Family.MEMORY).select_related("artifact__scope")
    by_key: dict[tuple[str, str, str | None], MemoryEntryVersion] = {
        (v.artifact.scope.scope_id, v.artifact.artifact_id, v.version_id): v for v in rows
    }
    found = {}
    for c in entries:
        version = by_key.get((c.scope_id, c.artifact_id, c.entry_version))
        if version is not None and version.entry_id == c.entry_id and version.is_live_at(c.revision):
            found[c] = version
    return found


def prepare_candidates_rebuild(*, record: PrepareRecord, query: str | None) -> RebuiltCandidates:
    """Every recorded candidate rebuilt from the exact rows its citation names, in recorded order.

    ``query`` None: the log did not keep it, and a topic memory's body is the one its recorded digest names.
    """
    citations = {c for per_scope in record.recalled.values() for hits in per_scope for c in hits}
    revisions = _revisions(citations)
    versions = _entry_versions(citations)
    missing: list[Citation] = []

    def body(citation: Citation, shown: str | None) -> str | None:
        revision = revisions.get(_revision_key(citation))
        if revision is None or (citation.has_entry and citation not in versions):
            missing.append(citation)
            return None
        if citation.has_entry:
            return versions[citation].body
        if citation.family != Family.TOPIC_MEMORY:
            return revision.body
        title, summary = revision.title or "", revision.summary or ""
        if query is not None:
            return topic_memory_projection(title=title, summary=summary, detail=revision.body, query=query)
        found = topic_memory_projection_by_digest(title=title, summary=summary, detail=revision.body, digest=shown)
        if found is None:
            missing.append(citation)
        return found

    def shown(family: str, scope_at: int, position: int) -> str | None:
        if family != Family.TOPIC_MEMORY or record.topic_shown is None:
            return None
        return record.topic_shown[scope_at][position]

    recalled = {
        family: [
            [Candidate(c, body(c, shown(family, at, position))) for position, c in enumerate(hits)]
            for at, hits in enumerate(per_scope)
        ]
        for family, per_scope in record.recalled.items()
    }
    return RebuiltCandidates(
        recalled=recalled,
        revision_pks={c: revisions[_revision_key(c)].pk for c in citations if _revision_key(c) in revisions},
        entry_version_pks={c: v.pk for c, v in versions.items()},
        missing=tuple(dict.fromkeys(missing)),
    )
