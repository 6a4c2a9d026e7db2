"""Exact reads of immutable revisions and entry versions, and revision history.

Never the head instead: a revision or entry version that was not stored as cited is NotFound.

These are the reads a read replica may serve (docs/scaling.md §8): a revision and the entry versions live in
it never change once committed, so a copy found on a replica is the primary's. Each public read below runs
through ``powercontext.replicas.replica_read``, which reads again on the primary whatever the replica has not
replayed yet. The scope and the grant check stay on the primary (a revoked grant must take effect at once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from django.db.models import Q

from artifacts.models import (
    Artifact,
    ArtifactRevision,
    Family,
    MemoryEntryVersion,
    Scope,
)
from artifacts.selectors.scopes import Reader, scope_get_readable
from powercontext.replicas import ReplicaBehind, reading_from_replica, replica_read
from vocabulary.errors import NotFound

T = TypeVar("T")


def artifact_get(*, scope: Scope, family: str, artifact_id: str) -> Artifact:
    """The artifact with this identity in the scope, or NotFound."""
    try:
        return Artifact.objects.select_related("scope").get(scope=scope, family=family, artifact_id=artifact_id)
    except Artifact.DoesNotExist as exc:
        raise NotFound("artifact not found") from exc


def artifact_revision_get(*, artifact: Artifact, revision: int) -> ArtifactRevision:
    """That exact revision, never the head instead, or NotFound."""
    try:
        return ArtifactRevision.objects.select_related("artifact__scope").get(artifact=artifact, revision=revision)
    except ArtifactRevision.DoesNotExist as exc:
        raise NotFound("revision not found") from exc


def _live_at(revision: int) -> Q:
    return Q(born_in_revision__lte=revision) & (
        Q(retired_in_revision__isnull=True) | Q(retired_in_revision__gt=revision)
    )


def memory_entries_live_at(*, artifact: Artifact, revision: int) -> list[MemoryEntryVersion]:
    """The entry versions live in that revision, ordered by entry id."""
    return list(
        MemoryEntryVersion.objects.filter(_live_at(revision), artifact=artifact).order_by("entry_id", "version_id")
    )


def memory_entry_version_get_at(
    *, artifact: Artifact, revision: int, entry_id: str, version_id: str
) -> MemoryEntryVersion:
    """That entry version if it was live in that revision, else NotFound."""
    version = (
        MemoryEntryVersion.objects.filter(
            _live_at(revision), artifact=artifact, entry_id=entry_id, version_id=version_id
        )
        .select_related("artifact__scope")
        .first()
    )
    if version is None:
        raise NotFound("entry version not live at that revision")
    return version


def memory_entry_versions_changed_in(
    *, artifact: Artifact, revisions: Sequence[int]
) -> dict[int, tuple[list[MemoryEntryVersion], list[MemoryEntryVersion]]]:
    """Per revision number: (versions born in it, versions retired in it), each by entry id.

    One query for all the revisions (a history page), whatever their number.
    """
    changes = {number: ([], []) for number in revisions}
    if not changes:
        return changes
    low, high = min(changes), max(changes)
    in_range = Q(born_in_revision__gte=low, born_in_revision__lte=high) | Q(
        retired_in_revision__gte=low, retired_in_revision__lte=high
    )
    for version in MemoryEntryVersion.objects.filter(in_range, artifact=artifact).order_by("entry_id", "id"):
        if version.born_in_revision in changes:
            changes[version.born_in_revision][0].append(version)
        if version.retired_in_revision in changes:
            changes[version.retired_in_revision][1].append(version)
    return changes


def artifact_revision_list_all(*, artifact: Artifact) -> list[ArtifactRevision]:
    """Every stored revision of an artifact, oldest first (revision 1, 2, …)."""
    return list(ArtifactRevision.objects.filter(artifact=artifact).order_by("revision"))


def memory_entry_version_list_all(*, artifact: Artifact) -> list[MemoryEntryVersion]:
    """Every entry version a memory artifact ever had, live or retired, in order of birth."""
    return list(MemoryEntryVersion.objects.filter(artifact=artifact).order_by("born_in_revision", "entry_id", "id"))


def artifact_history_page(
    *, artifact: Artifact, before: int | None, limit: int
) -> tuple[list[ArtifactRevision], int | None]:
    """Up to ``limit`` revisions older than ``before`` (all when None), newest first, and the next cursor."""
    revisions = ArtifactRevision.objects.filter(artifact=artifact).select_related("artifact__scope")
    if before is not None:
        revisions = revisions.filter(revision__lt=before)
    page = list(revisions.order_by("-revision")[: limit + 1])
    next_before = page[limit - 1].revision if len(page) > limit else None
    return page[:limit], next_before


def memory_entry_version_find(*, artifact: Artifact, version_id: str) -> MemoryEntryVersion | None:
    """The entry version with this id in a memory artifact, live or retired, or None.

    Only for explaining why a citation does not resolve; an exact read uses
    ``memory_entry_version_get_at``.
    """
    return MemoryEntryVersion.objects.filter(artifact=artifact, version_id=version_id).first()


# --- what a principal may read ------------------------------------------------------------------


@dataclass(frozen=True)
class EntryVersionAt:
    """A memory entry version as live in the cited revision (an exact entry read)."""

    revision: ArtifactRevision
    entry: MemoryEntryVersion


def artifact_revision_read(
    *,
    principal: Reader,
    scope_id: str,
    family: str,
    artifact_id: str,
    revision: int,
    entry_id: str | None = None,
    entry_version: str | None = None,
) -> ArtifactRevision | EntryVersionAt:
    """Exactly what a citation names, never the head instead; NotFound also for an unreadable scope.

    With ``entry_id`` and ``entry_version`` (memory only) that entry version as live in the revision;
    otherwise the revision, a memory revision carrying its live versions as ``entries``.
    """
    scope = scope_get_readable(principal=principal, scope_id=scope_id)
    exact = partial(
        _exact_read,
        scope=scope,
        family=family,
        artifact_id=artifact_id,
        revision=revision,
        entry_id=entry_id,
        entry_version=entry_version,
    )
    # Found on a replica: the primary's bytes. Not found there: maybe not replayed yet, so the primary decides.
    return replica_read(exact, misses=(NotFound,))


def _exact_read(
    *, scope: Scope, family: str, artifact_id: str, revision: int, entry_id: str | None, entry_version: str | None
) -> ArtifactRevision | EntryVersionAt:
    artifact = artifact_get(scope=scope, family=family, artifact_id=artifact_id)
    found = artifact_revision_get(artifact=artifact, revision=revision)
    if entry_id is not None:
        # The versions live at a revision are fixed once it is committed: the ones it retired were retired in
        # it or before, which the replica has replayed since it has the revision.
        entry = memory_entry_version_get_at(
            artifact=artifact, revision=found.revision, entry_id=entry_id, version_id=entry_version
        )
        return EntryVersionAt(revision=found, entry=entry)
    if artifact.family == Family.MEMORY:
        found.entries = memory_entries_live_at(artifact=artifact, revision=found.revision)
    return found


@dataclass(frozen=True)
class HistoryPage:
    """Revisions newest first; a memory revision carries ``added`` and ``retired`` (what it changed)."""

    revisions: list[ArtifactRevision]
    next_before: int | None


def artifact_history_read(
    *, principal: Reader, scope_id: str, family: str, artifact_id: str, limit: int, before: int | None = None
) -> HistoryPage:
    """One page of an artifact's history in a constant number of queries; NotFound also for an unreadable scope."""
    scope = scope_get_readable(principal=principal, scope_id=scope_id)
    # The primary's head: the newest page must show it, so a replica serves the page only once it has it.
    artifact = artifact_get(scope=scope, family=family, artifact_id=artifact_id)
    return replica_read(partial(_history_read, artifact=artifact, limit=limit, before=before))


def _history_read(*, artifact: Artifact, limit: int, before: int | None) -> HistoryPage:
    if reading_from_replica() and not _has_head(artifact):
        raise ReplicaBehind
    revisions, next_before = artifact_history_page(artifact=artifact, before=before, limit=limit)
    if artifact.family == Family.MEMORY:
        changes = memory_entry_versions_changed_in(artifact=artifact, revisions=[r.revision for r in revisions])
        for revision in revisions:
            revision.added, revision.retired = changes[revision.revision]
    return HistoryPage(revisions=revisions, next_before=next_before)


def _has_head(artifact: Artifact) -> bool:
    """Whether the database read holds the artifact at the head read from the primary (or later)."""
    return Artifact.objects.filter(pk=artifact.pk, head_revision__gte=artifact.head_revision).exists()


def immutable_row_get(get: Callable[[], T | None]) -> T | None:
    """One immutable row (a revision, an entry version) by ``get()``, from a replica when it has it.

    ``get`` returns None for a row it does not find: read again on the primary, which decides.
    """

    def found_or_miss() -> T:
        row = get()
        if row is None:
            raise ReplicaBehind
        return row

    try:
        return replica_read(found_or_miss)
    except ReplicaBehind:  # not on the primary either
        return None
