"""The recall sources prepare calls per family (``POWERCONTEXT_RECALL_SOURCES``).

Each takes the scopes in order and the query and returns, per scope, its candidates in retrieval order
with their exact citations and the body prepare may show.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from django.db.models import F

from artifacts.models import (
    ArtifactRevision,
    Family,
    Scope,
)
from artifacts.recall.documents import RankedDocument, captured_at_text
from artifacts.recall.fusion import Fused
from artifacts.recall.hybrid import HybridRecall, hybrid_ranked_documents
from artifacts.recall.projection import topic_memory_projection
from artifacts.recall.tokenize import SCORE_SCALE
from vocabulary.citation import Candidate, Citation
from vocabulary.families import POOL_CAP, PROFILE_ARTIFACT_ID

Noted = RankedDocument | tuple[None, object]
"""What a source notes beside a candidate: the ranked document it came from (its score and row), or for a profile,
``(None, when it was written)``."""


def _evidence(noted: Noted) -> tuple[float | None, object]:
    if type(noted) is RankedDocument:
        return noted.score / SCORE_SCALE, noted.row.captured
    return noted


class Evidence:
    """What the built-in sources returned in one block, beside each candidate: its score (BM25: ``document.score /
    SCORE_SCALE``; None for profiles) and when its row was written, as the engine returned it
    (``documents.captured_at_text`` makes it a candidate's ``captured_at``).

    Noted per source call as it is (the ranked documents themselves), mapped to the candidates once, when first read,
    and read only for the candidates asked about, looked up by the candidate object (``of``): hashing dozens of
    citations per prepare cost more than the policy itself, and mapping each source call's candidates as it came
    (eight calls for two families over four scopes) cost as much as the gates.
    """

    __slots__ = ("_notes", "_by_candidate", "_by_citation")

    def __init__(self) -> None:
        self._notes: list[tuple[Sequence[Candidate], Sequence[Noted]]] = []
        self._by_candidate: dict[int, Noted] | None = None
        self._by_citation: dict[Citation, Noted] | None = None

    def note(self, candidates: Sequence[Candidate], noted: Sequence[Noted]) -> None:
        if len(candidates) != len(noted):
            raise ValueError("a source noted evidence for another number of candidates than it returned")
        # Copies: the source hands its list on, and a reranker or wrapper may reorder or extend it in place before
        # the evidence is first read. A copy also keeps the candidates, so no id is reused while this lives.
        self._notes.append((tuple(candidates), tuple(noted)))
        self._by_candidate = self._by_citation = None

    def _noted(self):
        return ((c, noted) for candidates, notes in self._notes for c, noted in zip(candidates, notes, strict=True))

    def _candidates(self) -> dict[int, Noted]:
        if (by_candidate := self._by_candidate) is None:
            by_candidate = self._by_candidate = {
                id(c): noted for candidates, notes in self._notes for c, noted in zip(candidates, notes, strict=True)
            }
        return by_candidate

    def of(self, candidate: Candidate) -> tuple[float | None, object] | None:
        """The evidence noted of this candidate, ``(score, when written)`` (None: no built-in source returned it).

        By the object first, then by its citation, for a reranker or wrapper that returned a copy.
        """
        if (noted := self._candidates().get(id(candidate))) is None:
            if self._by_citation is None:
                self._by_citation = {c.citation: noted for c, noted in self._noted()}
            if (noted := self._by_citation.get(candidate.citation)) is None:
                return None
        return _evidence(noted)

    def scores_of(self, candidates: Sequence[Candidate]) -> list[float | None]:
        """Each candidate's own score where it has one (a custom source's or wrapper's), else the one noted of it
        (``of``), else none: what the policy orders a pool by (capture times only break ties of source rank, which
        never tie within a pool)."""
        by_candidate = self._candidates()
        scores: list[float | None] = []
        for candidate in candidates:
            if (score := candidate.score) is None:
                if type(noted := by_candidate.get(id(candidate))) is RankedDocument:  # the common case
                    score = noted.score / SCORE_SCALE
                elif (evidence := self.of(candidate)) is not None:
                    score = evidence[0]
            scores.append(score)
        return scores

    def completed(self, candidates: Sequence[Candidate]) -> tuple[list[float | None], list[str | None]]:
        """A policy prepare's ``Selection.evidence`` (its ``noted``), for a whole pool at once, as two columns: the
        scores of ``scores_of``, and each candidate's own capture time where it has one, else the one noted of it
        (the time as a candidate carries it, ``captured_at_text``), else none."""
        by_candidate = self._candidates()
        times: list[str | None] = []
        for candidate in candidates:
            if (captured_at := candidate.captured_at) is None:
                if type(noted := by_candidate.get(id(candidate))) is RankedDocument:  # the common case
                    captured_at = captured_at_text(noted.row.captured)
                elif (evidence := self.of(candidate)) is not None:
                    captured_at = captured_at_text(evidence[1])
            times.append(captured_at)
        return self.scores_of(candidates), times

    def scores(self) -> dict[Citation, float]:
        """Each scored candidate's score by citation (the inspector's view of a prepare without the policy)."""
        scored = ((c.citation, _evidence(noted)[0]) for c, noted in self._noted())
        return {citation: score for citation, score in scored if score is not None}


_EVIDENCE: ContextVar[Evidence | None] = ContextVar("recall_evidence", default=None)


@contextmanager
def recall_evidence_noted() -> Iterator[Evidence]:
    """Within the block, the built-in sources note each candidate's evidence: what the selection policy ranks by.

    Noted beside the candidates, not in them: a source keeps its candidates with their rows across prepares, and a
    score is the query's. The caller gives the candidates it uses their evidence (``Candidate.score``,
    ``captured_at``). Same candidates, same order, either way.
    """
    if (outer := _EVIDENCE.get()) is not None:  # the inspector notes a whole prepare, the policy's part included
        yield outer
        return
    evidence = Evidence()
    token = _EVIDENCE.set(evidence)
    try:
        yield evidence
    finally:
        _EVIDENCE.reset(token)


_HYBRID: ContextVar[list | None] = ContextVar("recall_hybrid", default=None)


@contextmanager
def recall_hybrid_noted() -> Iterator[list[tuple[HybridRecall, dict[Citation, Fused]]]]:
    """Within the block, the BM25 sources note what ranked each of their calls (``hybrid.HybridRecall``) and each
    fused candidate's ranks by its citation: what the prepare log and the inspector show of hybrid recall."""
    noted: list[tuple[HybridRecall, dict[Citation, Fused]]] = []
    token = _HYBRID.set(noted)
    try:
        yield noted
    finally:
        _HYBRID.reset(token)


def _candidates(family: str, scope: Scope, documents: Sequence[RankedDocument], query: str) -> list[Candidate]:
    """One scope's ranked documents of a family as candidates, in order (a prepare builds dozens of them).

    A memory or experience candidate depends on its row alone: it is kept in the row, so a row kept with a copy of
    its pair (``resident``) is made a candidate once per generation.
    """
    scope_id = scope.scope_id
    if family == Family.TOPIC_MEMORY:  # its body depends on the query
        candidates = [
            Candidate(
                Citation(scope_id, family, d.row.artifact_id, d.row.revision),
                topic_memory_projection(
                    title=d.row.title or "", summary=d.row.summary or "", detail=d.row.body, query=query
                ),
            )
            for d in documents
        ]
    else:
        candidates = []
        for document in documents:
            row = document.row
            if (candidate := row.candidate) is None:
                citation = Citation(
                    scope_id, family, row.artifact_id, row.revision, entry_id=row.entry_id, entry_version=row.version_id
                )
                candidate = row.candidate = Candidate(citation, row.body, conflict_key=row.conflict_key)
            candidates.append(candidate)
    if (evidence := _EVIDENCE.get()) is not None:
        evidence.note(candidates, documents)
    return candidates


def recall_bm25(*, scopes_by_family: Mapping[str, Sequence[Scope]], query: str) -> dict[str, list[list[Candidate]]]:
    """Per family and scope (in the given order), its candidates ranked by BM25: the families recalled together.

    Prepare calls this once for every selected family whose configured source is one of the sources below
    (their ``recall_batch``), so that statistics, rankings and reads cost a few statements in all.
    """
    ranked, hybrid = hybrid_ranked_documents(
        scope_pks_by_family={family: [scope.pk for scope in scopes] for family, scopes in scopes_by_family.items()},
        query=query,
        limits={family: POOL_CAP[family] for family in scopes_by_family},
    )
    recalled = {
        family: [_candidates(family, s, ranked[family][s.pk], query) for s in scopes]
        for family, scopes in scopes_by_family.items()
    }
    if (noted := _HYBRID.get()) is not None:
        if hybrid.abstained:
            scope_ids = {(family, s.pk): s.scope_id for family, scopes in scopes_by_family.items() for s in scopes}
            by_family: dict[str, tuple[str, ...]] = {}
            for family, pk in sorted(hybrid.abstained, key=lambda pair: (pair[0], scope_ids[pair])):
                by_family[family] = (*by_family.get(family, ()), scope_ids[(family, pk)])
            hybrid = dataclasses.replace(hybrid, abstained_scopes=by_family)
        ranks = {
            candidate.citation: fused
            for family, scopes in scopes_by_family.items()
            for scope, candidates in zip(scopes, recalled[family], strict=True)
            if (pair_ranks := hybrid.ranks.get((family, scope.pk)))
            for candidate, document in zip(candidates, ranked[family][scope.pk], strict=True)
            if (fused := pair_ranks.get(document.document_id)) is not None
        }
        noted.append((hybrid, ranks))
    return recalled


def _recalled_with(batch):
    """Marks a source whose family prepare may recall together with other families through ``batch``."""

    def mark(source):
        source.recall_batch = batch
        return source

    return mark


@_recalled_with(recall_bm25)
def recall_memory(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), up to 16 live memory entries ranked by BM25."""
    return recall_bm25(scopes_by_family={Family.MEMORY: scopes}, query=query)[Family.MEMORY]


@_recalled_with(recall_bm25)
def recall_experience(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), up to 8 experience heads ranked by BM25."""
    return recall_bm25(scopes_by_family={Family.EXPERIENCE: scopes}, query=query)[Family.EXPERIENCE]


@_recalled_with(recall_bm25)
def recall_topic_memory(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Up to 8 topic memories of the current scope (the first given) ranked by BM25."""
    return recall_bm25(scopes_by_family={Family.TOPIC_MEMORY: scopes[:1]}, query=query)[Family.TOPIC_MEMORY]


def recall_profile(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), the latest committed ``profile/profile`` snapshot, if any.

    Independent of the query; pending and rejected candidates are not revisions, so they never
    appear, and a pending replacement leaves the committed head in place.
    """
    heads = ArtifactRevision.objects.filter(
        artifact__scope__in=scopes,
        artifact__family=Family.PROFILE,
        artifact__artifact_id=PROFILE_ARTIFACT_ID,
        revision=F("artifact__head_revision"),
    ).values_list("artifact__scope_id", "revision", "body", "created_at")
    by_scope = {scope_pk: (revision, body, created) for scope_pk, revision, body, created in heads}
    recalled = [
        [
            Candidate(
                Citation(scope.scope_id, Family.PROFILE, PROFILE_ARTIFACT_ID, by_scope[scope.pk][0]),
                by_scope[scope.pk][1],
            )
        ]
        if scope.pk in by_scope
        else []
        for scope in scopes
    ]
    if (evidence := _EVIDENCE.get()) is not None:
        for scope, hits in zip(scopes, recalled, strict=True):
            if hits:  # a scope without a profile has no row to date
                evidence.note(hits, [(None, by_scope[scope.pk][2])])
    return recalled
