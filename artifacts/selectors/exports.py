"""Everything a scope holds, streamed for ``manage.py export_scope`` (every revision of every artifact).

Bounded memory however long the history: each kind of row (artifacts, revisions, entry versions born, entry
versions retired, profile candidates) is one query read in chunks (``iterator``), every one in the same order
(artifact by family and id in code-point order, then revision), and merged as they stream: what is held at once is
one revision's changes. Code-point order on every engine (PostgreSQL sorts text by its collation otherwise), so an
export of the same rows is the same bytes whichever engine holds them.

A snapshot per artifact without a long transaction (an IMMEDIATE one would hold SQLite's write lock for the whole
export): every row is read up to its artifact's head, and history is append-only, so a revision committed while
the export runs is either wholly in it or wholly not; an artifact created meanwhile may or may not be.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from django.db import connections, router
from django.db.models import F, Sum
from django.db.models.functions import Collate

from artifacts.models import Artifact, ArtifactRevision, Erasure, Family, MemoryEntryVersion, ProfileCandidate, Scope
from artifacts.selectors.scopes import scope_references_list
from vocabulary.errors import NotFound

EXPORT_CHUNK_ROWS = 500
"""Rows fetched per round trip of each stream: what bounds the export's memory (two streams carry texts of at most
64 Ki characters each; retired versions are read without their bodies)."""


@dataclass(frozen=True)
class ScopeExport:
    """A scope as exported: its row, its references' ids in order, how much history it holds, and how many erasure
    records name it (its erased texts are blank: a fixture cannot carry them yet)."""

    scope: Scope
    references: list[str]
    artifacts: int
    revisions: int
    erasures: int = 0


@dataclass
class RevisionExport:
    """One revision and, for memory, the entry versions it bore (in the order written) and retired."""

    revision: ArtifactRevision
    born: list[MemoryEntryVersion] = field(default_factory=list)
    retired: list[MemoryEntryVersion] = field(default_factory=list)


@dataclass
class ArtifactExport:
    """One artifact: its revisions and then its profile candidates, streamed (read them in that order, once)."""

    artifact: Artifact
    revisions: Iterator[RevisionExport]
    candidates: Iterator[ProfileCandidate]


def scope_export_list(*, scope_ids: Sequence[str] | None) -> list[ScopeExport]:
    """The scopes named (None: every scope), in code-point order of their ids, each with its references and sizes;
    NotFound naming every unknown id (nothing is exported then)."""
    scopes = Scope.objects.all() if scope_ids is None else Scope.objects.filter(scope_id__in=set(scope_ids))
    found = {scope.scope_id: scope for scope in scopes}
    wanted = sorted(found if scope_ids is None else set(scope_ids))
    missing = [scope_id for scope_id in wanted if scope_id not in found]
    if missing:
        raise NotFound(f"no such scope: {', '.join(missing)}")
    exports = []
    for scope_id in wanted:
        scope = found[scope_id]
        sizes = Artifact.objects.filter(scope=scope).aggregate(revisions=Sum("head_revision"))
        exports.append(
            ScopeExport(
                scope=scope,
                references=[target.scope_id for target in scope_references_list(scope=scope)],
                artifacts=Artifact.objects.filter(scope=scope).count(),
                revisions=sizes["revisions"] or 0,
                erasures=Erasure.objects.filter(scope=scope).count(),
            )
        )
    return exports


class _Stream:
    """An ordered query read in chunks, with the next row visible (merging streams by their artifact)."""

    _END = object()

    def __init__(self, queryset) -> None:
        self._rows = queryset.iterator(chunk_size=EXPORT_CHUNK_ROWS)
        self._next = next(self._rows, self._END)

    def next_if(self, matches) -> object | None:
        """The next row if ``matches`` accepts it (then consumed), else None."""
        if self._next is self._END or not matches(self._next):
            return None
        row, self._next = self._next, next(self._rows, self._END)
        return row

    def take_while(self, matches) -> Iterator:
        """The rows from here on that ``matches`` accepts, up to the first it does not."""
        while (row := self.next_if(matches)) is not None:
            yield row


def _code_point(name: str, queryset) -> Collate | F:
    """``name`` compared by code point: PostgreSQL's "C" collation (SQLite's default order is already that)."""
    if connections[router.db_for_read(queryset.model)].vendor == "postgresql":
        return Collate(F(name), "C")
    return F(name)


def _artifact_order(queryset, prefix: str = "") -> list:
    return [_code_point(f"{prefix}family", queryset), _code_point(f"{prefix}artifact_id", queryset)]


def scope_export_artifacts(*, scope: Scope) -> Iterator[ArtifactExport]:
    """Every artifact of the scope with every revision up to its head, in code-point order of family and id.

    Read each artifact's ``revisions`` and then its ``candidates`` before the next artifact (what is left unread
    is skipped).
    """
    artifacts = Artifact.objects.filter(scope=scope)
    artifacts = artifacts.order_by(*_artifact_order(artifacts))
    revision_rows = ArtifactRevision.objects.filter(artifact__scope=scope, revision__lte=F("artifact__head_revision"))
    revisions = _Stream(revision_rows.order_by(*_artifact_order(revision_rows, "artifact__"), "revision"))
    memory = {"artifact__scope": scope, "artifact__family": Family.MEMORY}
    born_rows = MemoryEntryVersion.objects.filter(**memory, born_in_revision__lte=F("artifact__head_revision"))
    born = _Stream(
        born_rows.order_by(
            *_artifact_order(born_rows, "artifact__"), "born_in_revision", F("born_ordinal").asc(nulls_last=True), "pk"
        )
    )
    retired_rows = MemoryEntryVersion.objects.filter(**memory, retired_in_revision__lte=F("artifact__head_revision"))
    retired = _Stream(
        retired_rows.only("artifact_id", "entry_id", "retired_in_revision").order_by(
            *_artifact_order(retired_rows, "artifact__"),
            "retired_in_revision",
            F("retired_ordinal").asc(nulls_last=True),
            "pk",
        )
    )
    candidate_rows = ProfileCandidate.objects.filter(artifact__scope=scope, artifact__family=Family.PROFILE)
    candidates = _Stream(candidate_rows.order_by(*_artifact_order(candidate_rows, "artifact__"), "created_at", "pk"))
    for artifact in artifacts.iterator(chunk_size=EXPORT_CHUNK_ROWS):
        artifact.scope = scope

        def its(row, pk=artifact.pk) -> bool:
            return row.artifact_id == pk

        yield ArtifactExport(
            artifact=artifact,
            revisions=_revisions(its, revisions, born, retired),
            candidates=candidates.take_while(its),
        )
        for stream in (revisions, born, retired, candidates):
            for _ in stream.take_while(its):  # what the caller left unread
                pass


def _revisions(its, revisions: _Stream, born: _Stream, retired: _Stream) -> Iterator[RevisionExport]:
    """An artifact's revisions in order, each with the entry versions it bore and retired."""
    for revision in revisions.take_while(its):
        number = revision.revision
        yield RevisionExport(
            revision=revision,
            born=list(born.take_while(lambda row, n=number: its(row) and row.born_in_revision == n)),
            retired=list(retired.take_while(lambda row, n=number: its(row) and row.retired_in_revision == n)),
        )
