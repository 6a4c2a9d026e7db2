"""The recall sources prepare calls per family (``POWERCONTEXT_RECALL_SOURCES``).

Each takes the scopes in order and the query and returns, per scope, its candidates in retrieval order
with their exact citations, the body prepare may show, and their evidence (score, capture time) in their own fields.
Each built-in source also names its ``recall_batch``, which the runtime calls instead: several families in one call,
returning one ``RecallResult`` (the candidates, their evidence beside them as columns, and what ranked them). Results
travel back as return values only: no source writes a context variable or fills in a caller's dict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

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

RankedBy = tuple[HybridRecall, Mapping[Citation, Fused]]
"""What ranked one BM25 recall call (``hybrid.HybridRecall``) and each fused candidate's ranks by its citation: what
the prepare log and the inspector show of hybrid recall."""


@dataclass(frozen=True, slots=True)
class RecallResult:
    """What recall returned for some families: per family and scope (in the order asked), the candidates in
    retrieval order, beside each the evidence the selection policy ranks by, and what ranked them.

    ``scores`` and ``captured`` are columns parallel to ``candidates``: each candidate's recall score (BM25:
    ``document.score / SCORE_SCALE``, 0 for a document found by meaning alone; None for a profile or a custom
    source's candidate without one) and when its row was written, as the engine returned it
    (``documents.captured_at_text`` makes it a candidate's ``captured_at``). Beside the candidates rather than in
    them: a source keeps its candidates with their rows across prepares, and a score is the query's.
    ``ranked_by``: each BM25 call's ``RankedBy`` (none for other sources).
    """

    candidates: dict[str, list[list[Candidate]]] = field(default_factory=dict)
    scores: dict[str, list[list[float | None]]] = field(default_factory=dict)
    captured: dict[str, list[list[object]]] = field(default_factory=dict)
    ranked_by: tuple[RankedBy, ...] = ()

    @classmethod
    def of_candidates(cls, family: str, per_scope: Sequence[Sequence[Candidate]]) -> RecallResult:
        """A custom source's candidates: their evidence is their own fields."""
        lists = [list(hits) for hits in per_scope]
        return cls(
            {family: lists},
            {family: [[c.score for c in hits] for hits in lists]},
            {family: [[c.captured_at for c in hits] for hits in lists]},
        )

    def merged(self, other: RecallResult) -> RecallResult:
        """Both results' families (``other``'s win) and rankings."""
        return RecallResult(
            self.candidates | other.candidates,
            self.scores | other.scores,
            self.captured | other.captured,
            self.ranked_by + other.ranked_by,
        )

    def evidence(self, family: str, at: int, index: int) -> tuple[float | None, str | None]:
        """A candidate's score and capture time (``captured_at``): its own where it has them (a custom source's or
        wrapper's), else its source's."""
        candidate = self.candidates[family][at][index]
        score = candidate.score if candidate.score is not None else self.scores[family][at][index]
        captured_at = candidate.captured_at
        if captured_at is None:
            captured_at = captured_at_text(self.captured[family][at][index])
        return score, captured_at

    def with_evidence(self, family: str, positions: Iterable[tuple[int, int]] | None = None) -> list[list[Candidate]]:
        """The family's candidates, those at ``positions`` (``(scope index, index)``; all when None) carrying their
        ``evidence`` in their own fields: what the pure core and a custom source's caller read."""
        per_scope = [list(hits) for hits in self.candidates.get(family, [])]
        if positions is None:
            positions = ((at, index) for at, hits in enumerate(per_scope) for index in range(len(hits)))
        for at, index in positions:
            score, captured_at = self.evidence(family, at, index)
            candidate = per_scope[at][index]
            if score != candidate.score or captured_at != candidate.captured_at:
                per_scope[at][index] = dataclasses.replace(candidate, score=score, captured_at=captured_at)
        return per_scope

    def reordered(self, family: str, per_scope: Sequence[Sequence[Candidate]]) -> RecallResult:
        """The family's candidates as a reranker returned them, each with the evidence of the candidate of its citation
        it came from (its own fields for one it made)."""
        scores, captured = [], []
        for at, hits in enumerate(per_scope):
            known = {
                c.citation: (score, time)
                for c, score, time in zip(
                    self.candidates[family][at], self.scores[family][at], self.captured[family][at], strict=True
                )
            }
            scores.append([known.get(c.citation, (c.score, None))[0] for c in hits])
            captured.append([known.get(c.citation, (None, c.captured_at))[1] for c in hits])
        lists = [list(hits) for hits in per_scope]
        return RecallResult(
            {**self.candidates, family: lists},
            {**self.scores, family: scores},
            {**self.captured, family: captured},
            self.ranked_by,
        )

    def lexical_scores(self) -> dict[Citation, float]:
        """Each scored candidate's score by citation (the inspector's view of a prepare without the policy)."""
        return {
            candidate.citation: score
            for family, per_scope in self.candidates.items()
            for at, hits in enumerate(per_scope)
            for index, candidate in enumerate(hits)
            if (score := self.evidence(family, at, index)[0]) is not None
        }


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
    return candidates


def recall_bm25(*, scopes_by_family: Mapping[str, Sequence[Scope]], query: str) -> RecallResult:
    """Per family and scope (in the given order), its candidates ranked by BM25 (fused with the dense ranking under
    hybrid recall): the families recalled together.

    Prepare calls this once for every selected family whose configured source is one of the sources below
    (their ``recall_batch``), so that statistics, rankings and reads cost a few statements in all.
    """
    ranked, hybrid = hybrid_ranked_documents(
        scope_pks_by_family={family: [scope.pk for scope in scopes] for family, scopes in scopes_by_family.items()},
        query=query,
        # Typed as the capped pools of BM25's families; a configuration routing profile here passes its None on.
        limits=cast(dict[str, int], {family: POOL_CAP[family] for family in scopes_by_family}),
    )
    candidates: dict[str, list[list[Candidate]]] = {}
    scores: dict[str, list[list[float | None]]] = {}
    captured: dict[str, list[list[object]]] = {}
    for family, scopes in scopes_by_family.items():
        documents = [ranked[family][s.pk] for s in scopes]
        candidates[family] = [_candidates(family, s, docs, query) for s, docs in zip(scopes, documents, strict=True)]
        scores[family] = [[d.score / SCORE_SCALE for d in docs] for docs in documents]
        captured[family] = [[d.row.captured for d in docs] for docs in documents]
    if hybrid.abstained:
        scope_ids = {(family, s.pk): s.scope_id for family, scopes in scopes_by_family.items() for s in scopes}
        by_family: dict[str, tuple[str, ...]] = {}
        for family, pk in sorted(hybrid.abstained, key=lambda pair: (pair[0], scope_ids[pair])):
            by_family[family] = (*by_family.get(family, ()), scope_ids[(family, pk)])
        hybrid = dataclasses.replace(hybrid, abstained_scopes=by_family)
    ranks = {
        candidate.citation: fused
        for family, scopes in scopes_by_family.items()
        for scope, hits in zip(scopes, candidates[family], strict=True)
        if (pair_ranks := hybrid.ranks.get((family, scope.pk)))
        for candidate, document in zip(hits, ranked[family][scope.pk], strict=True)
        if (fused := pair_ranks.get(document.document_id)) is not None
    }
    return RecallResult(candidates, scores, captured, ((hybrid, ranks),))


def _recalled_with(batch):
    """Marks a source whose family prepare may recall together with other families through ``batch``."""

    def mark(source):
        source.recall_batch = batch
        return source

    return mark


@_recalled_with(recall_bm25)
def recall_memory(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), up to 16 live memory entries ranked by BM25."""
    return recall_bm25(scopes_by_family={Family.MEMORY: scopes}, query=query).with_evidence(Family.MEMORY)


@_recalled_with(recall_bm25)
def recall_experience(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), up to 8 experience heads ranked by BM25."""
    return recall_bm25(scopes_by_family={Family.EXPERIENCE: scopes}, query=query).with_evidence(Family.EXPERIENCE)


@_recalled_with(recall_bm25)
def recall_topic_memory(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Up to 8 topic memories of the current scope (the first given) ranked by BM25."""
    recalled = recall_bm25(scopes_by_family={Family.TOPIC_MEMORY: scopes[:1]}, query=query)
    return recalled.with_evidence(Family.TOPIC_MEMORY)


def recall_profiles(*, scopes_by_family: Mapping[str, Sequence[Scope]], query: str) -> RecallResult:
    """Per scope (in the given order), the latest committed ``profile/profile`` snapshot, if any, with when it was
    written (a profile has no recall score).

    Independent of the query; pending and rejected candidates are not revisions, so they never
    appear, and a pending replacement leaves the committed head in place.
    """
    scopes = scopes_by_family.get(Family.PROFILE, ())
    heads = ArtifactRevision.objects.filter(
        artifact__scope__in=scopes,
        artifact__family=Family.PROFILE,
        artifact__artifact_id=PROFILE_ARTIFACT_ID,
        revision=F("artifact__head_revision"),
    ).values_list("artifact__scope_id", "revision", "body", "created_at")
    by_scope = {scope_pk: (revision, body, created) for scope_pk, revision, body, created in heads}
    candidates = [
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
    captured: list[list[object]] = [[by_scope[scope.pk][2]] if scope.pk in by_scope else [] for scope in scopes]
    return RecallResult(
        {Family.PROFILE: candidates},
        {Family.PROFILE: [[None] * len(hits) for hits in candidates]},
        {Family.PROFILE: captured},
    )


@_recalled_with(recall_profiles)
def recall_profile(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), the latest committed ``profile/profile`` snapshot, if any."""
    return recall_profiles(scopes_by_family={Family.PROFILE: scopes}, query=query).with_evidence(Family.PROFILE)
