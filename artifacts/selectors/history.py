"""Reading stored history back to verify it (``manage.py verify_history``, the admin's revision page).

The whole-database walk streams: artifacts in batches by primary key, and for each batch three ordered row streams
(revisions, entry versions by birth, entry versions by retirement) merged revision by revision, so memory holds one
batch's identities and one revision's changes, never a whole history. Rows are verified up to each artifact's head as
the batch found it: a write committed meanwhile only appends past it, so a running server never causes a false
report. A row past that head (a revision, or an entry version born or retired there) is reported only if it is still
above the head read again after it: a write commits its rows with the head moved onto them, so only a row no write
made (left by a superuser with the guards lifted) stays there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain

from artifacts.models import Artifact, ArtifactRevision, MemoryEntryVersion
from artifacts.selectors.erasures import erasure_naming
from vocabulary.history import (
    ERASED_HASHES,
    Mismatch,
    StoredRevision,
    entry_version_mismatch,
    revision_mismatches,
)
from vocabulary.text import sha256_text

_STREAM_CHUNK = 500
"""Rows fetched per round trip of each stream (entry versions carry their bodies, at most 64K characters each)."""

_REVISION_COLUMNS = (
    "revision",
    "body",
    "title",
    "summary",
    "content_sha256",
    "author",
    "entries_born",
    "entries_retired",
    "chain_sha256",
    "created_at",
    "texts_sha256",
)


@dataclass(frozen=True)
class ArtifactIdentity:
    pk: int
    scope_id: str
    family: str
    artifact_id: str
    head_revision: int


@dataclass(frozen=True)
class VersionRow:
    entry_id: str
    version_id: str
    content_sha256: str
    conflict_key: str | None = None
    created_at: datetime | None = None
    """Read for a born version only: the chain covers it where the version is born."""


@dataclass
class RevisionHistory:
    """One stored revision with the entry versions born and retired in it, and what their bodies hash to."""

    artifact: ArtifactIdentity
    stored: StoredRevision
    born: list[VersionRow] = field(default_factory=list)
    retired: list[VersionRow] = field(default_factory=list)
    version_mismatches: list[Mismatch] = field(default_factory=list)
    blank_versions: list[tuple[VersionRow, int]] = field(default_factory=list)
    """Born here (with their ids), their body blank and so not their hash: erased, if an erasure record names them
    (else tampering)."""
    pk: int | None = None
    """The revision's row id (a scope's erasure names the rows up to an id)."""


@dataclass(frozen=True)
class StrayVersion:
    """An entry version born or retired in a revision its artifact does not have."""

    artifact: ArtifactIdentity
    revision: int
    version: VersionRow
    event: str


@dataclass(frozen=True)
class AboveHead:
    """A revision (``version`` None) or an entry version born or retired in a revision above its artifact's head."""

    artifact: ArtifactIdentity
    revision: int
    head: int
    version: VersionRow | None = None
    event: str | None = None


def history_artifact_count(*, scope_id: str | None = None) -> int:
    """How many artifacts a walk of the history (of one scope, or all) visits."""
    return _artifacts(scope_id).count()


def _artifacts(scope_id: str | None):
    artifacts = Artifact.objects.all()
    return artifacts.filter(scope__scope_id=scope_id) if scope_id is not None else artifacts


def history_artifact_batches(*, scope_id: str | None = None, batch: int) -> Iterator[list[ArtifactIdentity]]:
    """Every artifact (of one scope, or all) with its head as it is now, ``batch`` at a time by primary key."""
    last = 0
    while True:
        rows = list(
            _artifacts(scope_id)
            .filter(pk__gt=last)
            .order_by("pk")
            .values_list("pk", "scope__scope_id", "family", "artifact_id", "head_revision")[:batch]
        )
        if not rows:
            return
        last = rows[-1][0]
        yield [ArtifactIdentity(*row) for row in rows]


class _Stream:
    """An ordered row iterator keyed by (artifact pk, revision) that can be looked ahead by one row."""

    def __init__(self, rows):
        self.rows = iter(rows)
        self.next = next(self.rows, None)

    def take(self):
        row, self.next = self.next, next(self.rows, None)
        return row


def history_revisions(artifacts: list[ArtifactIdentity]) -> Iterator[RevisionHistory | StrayVersion | AboveHead]:
    """The batch's revisions in (artifact, revision) order, each with its changes, and the stray entry versions; then
    the rows above their artifact's head (``AboveHead``), once the heads are read again."""
    by_pk = {artifact.pk: artifact for artifact in artifacts}
    pks = list(by_pk)
    revisions = (
        ArtifactRevision.objects.filter(artifact_id__in=pks)
        .order_by("artifact_id", "revision")
        .values_list("artifact_id", *_REVISION_COLUMNS, "id")
        .iterator(chunk_size=_STREAM_CHUNK)
    )
    versions = MemoryEntryVersion.objects.filter(artifact_id__in=pks)
    born = _Stream(
        versions.order_by("artifact_id", "born_in_revision", "id")
        .values_list(
            "artifact_id",
            "born_in_revision",
            "entry_id",
            "version_id",
            "content_sha256",
            "conflict_key",
            "created_at",
            "body",
            "id",
        )
        .iterator(chunk_size=_STREAM_CHUNK)
    )
    retired = _Stream(
        versions.filter(retired_in_revision__isnull=False)
        .order_by("artifact_id", "retired_in_revision", "id")
        .values_list("artifact_id", "retired_in_revision", "entry_id", "version_id", "content_sha256")
        .iterator(chunk_size=_STREAM_CHUNK)
    )
    above: list[AboveHead] = []  # past the batch's head: written since, or above the head for good (checked last)
    for row in chain(revisions, [None]):
        key = (row[0], row[1]) if row is not None else None
        for stream, event in ((born, "born"), (retired, "retired")):
            while stream.next is not None and (key is None or stream.next[:2] < key):
                stray = stream.take()
                artifact = by_pk[stray[0]]
                if stray[1] <= artifact.head_revision:
                    yield StrayVersion(artifact, stray[1], VersionRow(*stray[2:5]), event)
                else:
                    above.append(AboveHead(artifact, stray[1], artifact.head_revision, VersionRow(*stray[2:5]), event))
        if row is None:
            break
        artifact = by_pk[row[0]]
        if row[1] > artifact.head_revision:
            above.append(AboveHead(artifact, row[1], artifact.head_revision))
            continue
        item = RevisionHistory(artifact, StoredRevision(*row[1:-1]), pk=row[-1])
        while born.next is not None and born.next[:2] == key:
            *_, entry_id, version_id, sha, slot, created_at, body, pk = born.take()
            version = VersionRow(entry_id, version_id, sha, slot, created_at)
            item.born.append(version)
            if body == "" and sha256_text(body) != sha:
                item.blank_versions.append((version, pk))
            elif (mismatch := entry_version_mismatch(version, body)) is not None:
                item.version_mismatches.append(mismatch)
        while retired.next is not None and retired.next[:2] == key:
            item.retired.append(VersionRow(*retired.take()[2:5]))
        yield item
    yield from _still_above_head(above)


def _still_above_head(candidates: list[AboveHead]) -> Iterator[AboveHead]:
    """The candidates still above their artifact's head read now, after them (one statement, only when there are any):
    a write that committed one of them moved the head onto it in the same commit."""
    if not candidates:
        return
    heads = dict(Artifact.objects.filter(pk__in={c.artifact.pk for c in candidates}).values_list("pk", "head_revision"))
    for candidate in candidates:
        head = heads.get(candidate.artifact.pk, candidate.head)
        if candidate.revision > head:
            yield AboveHead(candidate.artifact, candidate.revision, head, candidate.version, candidate.event)


def revision_verification(*, revision: ArtifactRevision) -> list[Mismatch]:
    """What of this one revision differs from its recomputation from the rows: its content hash, each entry version
    born in it, its declared counts and its link to the previous revision's chain hash. O(that revision)."""
    artifact = revision.artifact
    previous = (
        ArtifactRevision.objects.filter(artifact=artifact, revision=revision.revision - 1)
        .values_list("content_sha256", "chain_sha256")
        .first()
    )
    previous_content, previous_chain = (previous[0], previous[1] or "") if previous else ("", "")
    born = list(MemoryEntryVersion.objects.filter(artifact=artifact, born_in_revision=revision.revision).order_by("id"))
    retired = list(
        MemoryEntryVersion.objects.filter(artifact=artifact, retired_in_revision=revision.revision).order_by("id")
    )
    stored = StoredRevision(*(getattr(revision, column) for column in _REVISION_COLUMNS))
    erased = [v for v in born if v.body == "" and _erased(artifact, version=v)]
    found = [m for v in born if v not in erased and (m := entry_version_mismatch(v, v.body)) is not None]
    found += revision_mismatches(
        scope_id=artifact.scope.scope_id,
        family=artifact.family,
        artifact_id=artifact.artifact_id,
        stored=stored,
        previous_content=previous_content,
        previous_chain=previous_chain,
        born=born,
        retired=retired,
    )
    texts = (revision.body, revision.title, revision.summary)
    if "" in texts and set(texts) <= {"", None} and _erased(artifact, revision=revision):
        # Erased (manage.py erase): its texts no longer hash to its kept hashes, which its chain still covers.
        found = [m for m in found if m.what not in ERASED_HASHES]
    return found


def _erased(
    artifact: Artifact, *, revision: ArtifactRevision | None = None, version: MemoryEntryVersion | None = None
) -> bool:
    """Whether an erasure record names the revision or entry version (one statement, asked only for blank texts)."""
    return (
        erasure_naming(
            artifact_pk=artifact.pk,
            scope_pk=artifact.scope_id,
            revision=revision.revision if revision is not None else None,
            revision_pk=revision.pk if revision is not None else None,
            version_id=version.version_id if version is not None else None,
            version_pk=version.pk if version is not None else None,
            born_in_revision=version.born_in_revision if version is not None else None,
        )
        is not None
    )
