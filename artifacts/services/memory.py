"""Memory revisions: entry additions, updates and removals, one revision per write.

A memory entry has at most one live version; the recall index always reflects exactly the live ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from artifacts.models import (
    Artifact,
    ArtifactRevision,
    Family,
    MemoryEntryVersion,
    RecallDocument,
    Scope,
)
from artifacts.recall.index import recall_index_add, recall_index_remove
from artifacts.recall.vectors.write import WriteVectors, vectors_on_write
from artifacts.services.common import (
    artifact_for_write,
    check_identifier,
    check_text,
    next_revision,
    revision_append,
    revision_previous,
)
from vocabulary.errors import Conflict, InvalidInput, NotFound
from vocabulary.history import memory_revision_sha256
from vocabulary.limits import (
    MAX_IDENTIFIER_CHARACTERS,
)
from vocabulary.text import sha256_text

_RETIRE_BATCH = 500
"""Versions retired per UPDATE (each names its position in a CASE)."""


@dataclass(frozen=True)
class EntryVersionWrite:
    """A new version of an entry: creates the entry, or replaces its live version."""

    entry_id: str
    version_id: str | None
    body: str
    conflict_key: str | None = None
    """The fact slot the writer declares for this version (seeds/003); None: no slot."""
    created_at: datetime | None = None
    """When the version was written: now unless given (a fixture restoring an exported history gives it)."""


@dataclass(frozen=True)
class MemoryRevisionResult:
    revision: ArtifactRevision
    added: tuple[MemoryEntryVersion, ...]
    retired: tuple[MemoryEntryVersion, ...]


def _retire(versions: Sequence[MemoryEntryVersion], number: int) -> None:
    """Retire ``versions`` in revision ``number``, each in its declared position 1..len(versions)."""
    for start in range(0, len(versions), _RETIRE_BATCH):
        chunk = versions[start : start + _RETIRE_BATCH]
        MemoryEntryVersion.objects.filter(pk__in=[v.pk for v in chunk]).update(
            retired_in_revision=number,
            retired_ordinal=Case(*(When(pk=v.pk, then=Value(start + k)) for k, v in enumerate(chunk, 1))),
        )


def _new_version_id(artifact: Artifact, entry_id: str, *, reserved: set[str]) -> str:
    """The first free ``<entry>-v<k>`` (``entry-1-v3`` after ``-v1`` and ``-v2``), at most 200 characters.

    Probes the unique (artifact, version_id) index, doubling k and then bisecting: O(log k) lookups.
    Counting the entry's versions instead read every version of the artifact (entry_id has no index
    of its own), so each write cost O(memory size). A long entry id is cut to leave room for the suffix.
    ``reserved`` holds the ids this revision already uses; the one returned is added to it.
    """

    def candidate(k: int) -> str:
        suffix = f"-v{k}"
        return entry_id[: MAX_IDENTIFIER_CHARACTERS - len(suffix)] + suffix

    def taken(k: int) -> bool:
        version_id = candidate(k)
        return version_id in reserved or (
            MemoryEntryVersion.objects.filter(artifact=artifact, version_id=version_id).exists()
        )

    low, high = 0, 1  # low is taken (0 stands for "none"); high is free once the doubling stops
    while taken(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if taken(middle) else (low, middle)
    reserved.add(candidate(high))
    return candidate(high)


def memory_revision_create(
    *,
    scope: Scope,
    artifact_id: str,
    writes: Sequence[EntryVersionWrite] = (),
    removals: Sequence[str] = (),
    author: str,
    expected_head_revision: int | None = None,
    require_new_entries: bool = False,
    require_existing_entries: bool = False,
    created_at: datetime | None = None,
) -> MemoryRevisionResult:
    """Apply entry additions, updates and removals to a memory artifact as one new revision.

    ``require_new_entries`` turns a write to an existing entry into a Conflict;
    ``require_existing_entries`` turns a write or removal of a missing entry into NotFound. The new versions'
    vectors (hybrid recall) are embedded before the transaction opens.
    ``created_at``: the revision's time, now unless given (a fixture restoring an exported history gives it).
    """
    _check_changes(writes, removals)
    vectors = vectors_on_write([w.body for w in writes])
    with transaction.atomic():
        result = _memory_revision_apply(
            scope=scope,
            artifact_id=artifact_id,
            writes=writes,
            removals=removals,
            author=author,
            expected_head_revision=expected_head_revision,
            require_new_entries=require_new_entries,
            require_existing_entries=require_existing_entries,
            vectors=vectors,
            created_at=created_at,
        )
        vectors.store()
    return result


def _check_changes(writes: Sequence[EntryVersionWrite], removals: Sequence[str]) -> None:
    """What a revision's changes must be, whatever is stored."""
    if not writes and not removals:
        raise InvalidInput("a memory revision must change at least one entry", path="entries")
    touched = [w.entry_id for w in writes] + list(removals)
    if len(set(touched)) != len(touched):
        raise InvalidInput("an entry may change only once per revision", path="entries")
    explicit_versions = [w.version_id for w in writes if w.version_id is not None]
    if len(set(explicit_versions)) != len(explicit_versions):
        raise InvalidInput("a version id may be given only once per revision", path="entries")
    for i, write in enumerate(writes):
        check_identifier(write.entry_id, path=f"entries[{i}].id")
        if write.version_id is not None:
            check_identifier(write.version_id, path=f"entries[{i}].version")
        check_text(write.body, path=f"entries[{i}].body")


def _memory_revision_apply(
    *,
    scope: Scope,
    artifact_id: str,
    writes: Sequence[EntryVersionWrite],
    removals: Sequence[str],
    author: str,
    expected_head_revision: int | None,
    require_new_entries: bool,
    require_existing_entries: bool,
    vectors: WriteVectors,
    created_at: datetime | None,
) -> MemoryRevisionResult:
    touched = [w.entry_id for w in writes] + list(removals)
    artifact = artifact_for_write(scope=scope, family=Family.MEMORY, artifact_id=artifact_id)
    live = {
        v.entry_id: v
        for v in MemoryEntryVersion.objects.filter(
            artifact=artifact, entry_id__in=touched, retired_in_revision__isnull=True
        )
    }
    for write in writes:
        if require_new_entries and write.entry_id in live:
            raise Conflict(f"entry {write.entry_id!r} already exists")
        if require_existing_entries and write.entry_id not in live:
            raise NotFound(f"entry {write.entry_id!r} does not exist")
    for entry_id in removals:
        if entry_id not in live:
            raise NotFound(f"entry {entry_id!r} does not exist")
    for write in writes:
        if write.version_id is not None and (
            MemoryEntryVersion.objects.filter(artifact=artifact, version_id=write.version_id).exists()
        ):
            raise Conflict(f"version {write.version_id!r} already exists")

    previous_sha, previous_chain = revision_previous(artifact)
    number = next_revision(artifact, expected_head_revision=expected_head_revision)
    retired = [live[w.entry_id] for w in writes if w.entry_id in live] + [live[e] for e in removals]
    reserved = {w.version_id for w in writes if w.version_id is not None}  # ids of this revision, unsaved yet
    added = [
        MemoryEntryVersion(
            artifact=artifact,
            entry_id=w.entry_id,
            version_id=w.version_id or _new_version_id(artifact, w.entry_id, reserved=reserved),
            body=w.body,
            content_sha256=sha256_text(w.body),
            conflict_key=w.conflict_key,
            born_in_revision=number,
            born_ordinal=position,
            created_at=w.created_at or timezone.now(),
        )
        for position, w in enumerate(writes, 1)
    ]
    revision = revision_append(
        artifact=artifact,
        number=number,
        previous_chain=previous_chain,
        content_sha256=memory_revision_sha256(previous_sha, added, retired),
        author=author,
        born=added,
        retired=retired,
        created_at=created_at,
    )
    if retired:
        _retire(retired, number)
        recall_index_remove(
            artifact=artifact,
            documents=RecallDocument.objects.filter(entry_version__in=[v.pk for v in retired]),
        )
    for version in added:
        version.save()
        vectors.add(recall_index_add(artifact=artifact, text=version.body, entry_version=version), version.body)
    return MemoryRevisionResult(revision=revision, added=tuple(added), retired=tuple(retired))
