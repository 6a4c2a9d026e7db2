"""Reading the erasure records (issue 51, item 3): which record erased a row, and the chain of records to verify.

A row is erased when a record names it: an entry version by its own record, the record of the revision bearing it, or
its scope's; a revision by its own record or its scope's. The exact reads ask only for a row whose texts are blank
(stored text is never empty otherwise), so a read of text that was never erased costs no statement more.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.db.models import Q

from artifacts.models import Erasure
from vocabulary.history import Mismatch, erasure_chain_sha256


def erasure_time_text(erased_at) -> str:
    """An erasure's time as its chain hash covers it: UTC, ISO 8601 with microseconds."""
    return erased_at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def erasure_naming(
    *,
    artifact_pk: int,
    scope_pk: int,
    revision: int | None = None,
    revision_pk: int | None = None,
    version_id: str | None = None,
    version_pk: int | None = None,
    born_in_revision: int | None = None,
) -> Erasure | None:
    """The first erasure record naming a revision (``revision``, its id ``revision_pk``) or an entry version
    (``version_id``, its id ``version_pk``, the revision it was born in), or None. One statement."""
    names = Q()
    if revision is not None:
        names |= Q(kind=Erasure.Kind.REVISION, artifact_id=artifact_pk, revision=revision)
        names |= Q(kind=Erasure.Kind.SCOPE, scope_id=scope_pk, revisions_through__gte=revision_pk)
    if version_id is not None:
        names |= Q(kind=Erasure.Kind.SCOPE, scope_id=scope_pk, versions_through__gte=version_pk)
        names |= Q(kind=Erasure.Kind.ENTRY_VERSION, artifact_id=artifact_pk, version_id=version_id)
        names |= Q(kind=Erasure.Kind.REVISION, artifact_id=artifact_pk, revision=born_in_revision)
    return Erasure.objects.filter(names).select_related("scope", "artifact").order_by("sequence").first()


def erasure_public(record: Erasure) -> dict[str, object]:
    """What an exact read of erased text shows of the record that erased it (who erased it stays with operators)."""
    return {
        "sequence": record.sequence,
        "kind": record.kind,
        "erased_at": erasure_time_text(record.erased_at),
        "reason": record.reason,
        "erased_sha256": record.erased_sha256,
        "chain_sha256": record.chain_sha256,
    }


@dataclass
class ErasureIndex:
    """Every erasure record's targets, to tell an erasure from tampering while verifying history."""

    scopes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per erased scope, the largest revision and entry version ids any of its records names."""
    revisions: set[tuple[int, int]] = field(default_factory=set)
    versions: set[tuple[int, str]] = field(default_factory=set)

    def names_revision(self, *, scope_id: str, artifact_pk: int, revision: int, revision_pk: int) -> bool:
        return revision_pk <= self.scopes.get(scope_id, (0, 0))[0] or (artifact_pk, revision) in self.revisions

    def names_version(
        self, *, scope_id: str, artifact_pk: int, version_id: str, version_pk: int, born_in_revision: int
    ) -> bool:
        return (
            version_pk <= self.scopes.get(scope_id, (0, 0))[1]
            or (artifact_pk, version_id) in self.versions
            or (artifact_pk, born_in_revision) in self.revisions
        )


_RECORD_COLUMNS = (
    "kind",
    "revision",
    "entry_id",
    "version_id",
    "rows_erased",
    "erased_sha256",
    "revisions_through",
    "versions_through",
    "reason",
    "erased_by",
)
"""The record's own columns its chain hash covers, besides its identities, time and links."""


@dataclass(frozen=True)
class ErasureChecked:
    """One erasure record as stored, and what of it does not verify."""

    record: dict[str, object]
    mismatches: list[Mismatch]


def erasure_chain_walk(index: ErasureIndex) -> Iterator[ErasureChecked]:
    """Every erasure record in sequence order, each recomputed and linked to its predecessor; fills ``index``."""
    previous, expected = "", 1
    for row in Erasure.objects.select_related("scope", "artifact").order_by("sequence").iterator(chunk_size=500):
        if row.kind == Erasure.Kind.SCOPE:
            revisions, versions = index.scopes.get(row.scope.scope_id, (0, 0))
            index.scopes[row.scope.scope_id] = (
                max(revisions, row.revisions_through or 0),
                max(versions, row.versions_through or 0),
            )
        # A revision's or a version's record always names its row; one that did not could match no lookup.
        elif row.kind == Erasure.Kind.REVISION:
            if row.artifact_id is not None and row.revision is not None:
                index.revisions.add((row.artifact_id, row.revision))
        elif row.artifact_id is not None and row.version_id is not None:
            index.versions.add((row.artifact_id, row.version_id))
        sequence, stored_previous, chain = row.sequence, row.previous_sha256, row.chain_sha256
        fields = {
            **{name: getattr(row, name) for name in _RECORD_COLUMNS},
            "scope_id": row.scope.scope_id,
            "family": row.artifact.family if row.artifact is not None else None,
            "artifact_id": row.artifact.artifact_id if row.artifact is not None else None,
            "erased_at": erasure_time_text(row.erased_at),
        }
        computed = erasure_chain_sha256(previous=stored_previous, sequence=sequence, **fields)
        found = [
            Mismatch("erasure sequence", sequence, expected),
            Mismatch("erasure previous_sha256", stored_previous, previous),
            Mismatch("erasure chain_sha256", chain, computed),
        ]
        record = {"sequence": sequence, **fields, "chain_sha256": chain}
        yield ErasureChecked(record, [m for m in found if m.stored != m.computed])
        previous, expected = chain, sequence + 1
