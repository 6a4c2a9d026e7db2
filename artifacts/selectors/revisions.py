"""Stored revisions and entry versions by identity, for the services, the admin and the operator tools.

Never the head instead: a revision or entry version that was not stored as cited is NotFound. What a key may read
over HTTP is read by ``exact_reads`` (one revision, or one entry version) and ``history_pages`` (a page of an
artifact's history), which check the key's grant in the same statement. ``immutable_row_get`` reads one immutable
row from a read replica when it has it (docs/scaling.md §8).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from django.db.models import Q

from artifacts.models import (
    Artifact,
    ArtifactRevision,
    MemoryEntryVersion,
    Scope,
)
from infrastructure.replicas import ReplicaBehind, replica_read
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


def memory_entries_live_at(*, artifact: Artifact, revision: int, limit: int) -> tuple[list[MemoryEntryVersion], bool]:
    """The first ``limit`` entry versions live in that revision, ordered by entry id, and whether more are live.

    One statement reading at most ``limit + 1`` rows (a LIMIT in the SQL), however many entries the revision holds.
    """
    versions = list(
        MemoryEntryVersion.objects.filter(_live_at(revision), artifact=artifact).order_by("entry_id", "version_id")[
            : limit + 1
        ]
    )
    return versions[:limit], len(versions) > limit


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
    changes: dict[int, tuple[list[MemoryEntryVersion], list[MemoryEntryVersion]]] = {
        number: ([], []) for number in revisions
    }
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
