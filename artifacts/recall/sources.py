"""The recall sources prepare calls per family (``POWERCONTEXT_RECALL_SOURCES``).

Each takes the scopes in order and the query and returns, per scope, its candidates in retrieval order
with their exact citations and the body prepare may show.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from django.db.models import F

from artifacts.models import (
    ArtifactRevision,
    Family,
    Scope,
)
from artifacts.recall.projection import topic_memory_projection
from artifacts.recall.ranking import bm25_top_scored_by_scope, fetch, marks
from artifacts.recall.tokenize import SCORE_SCALE
from vocabulary.citation import Candidate, Citation
from vocabulary.families import POOL_CAP, PROFILE_ARTIFACT_ID

_SCORES: ContextVar[dict[Citation, float] | None] = ContextVar("recall_scores", default=None)


@contextmanager
def recall_scores_collected() -> Iterator[dict[Citation, float]]:
    """Within the block, the BM25 sources note each candidate's score by citation (the inspector's view).

    Prepare's candidates and their order are the same with or without it.
    """
    scores: dict[Citation, float] = {}
    token = _SCORES.set(scores)
    try:
        yield scores
    finally:
        _SCORES.reset(token)


def _scored(candidate: Candidate, score: int) -> Candidate:
    if (sink := _SCORES.get()) is not None:
        sink[candidate.citation] = score / SCORE_SCALE
    return candidate


def _memory_rows(document_ids: list[int]) -> dict[int, tuple]:
    if not document_ids:
        return {}
    # One statement reads version, liveness and head together: a consistent citation even while
    # writers retire versions between the search and this read.
    rows = fetch(
        "SELECT d.id, a.artifact_id, a.head_revision, v.entry_id, v.version_id, v.body "
        "FROM artifacts_recalldocument d JOIN artifacts_artifact a ON a.id = d.artifact_id "
        "JOIN artifacts_memoryentryversion v ON v.id = d.entry_version_id "
        f"WHERE d.id IN ({marks(document_ids)}) AND v.retired_in_revision IS NULL",
        document_ids,
    )
    return {row[0]: row for row in rows}


def _memory_hits(scope: Scope, scored: list[tuple[int, int]], rows: dict[int, tuple]) -> list[Candidate]:
    return [
        _scored(
            Candidate(
                Citation(scope.scope_id, Family.MEMORY, row[1], row[2], entry_id=row[3], entry_version=row[4]), row[5]
            ),
            score,
        )
        for row, score in ((rows.get(i), score) for i, score in scored)
        if row is not None
    ]


def recall_memory(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), up to 16 live memory entries ranked by BM25."""
    ids = bm25_top_scored_by_scope(
        scope_pks=[scope.pk for scope in scopes], family=Family.MEMORY, query=query, limit=POOL_CAP[Family.MEMORY]
    )
    rows = _memory_rows([document for documents in ids.values() for document, _ in documents])
    return [_memory_hits(scope, ids[scope.pk], rows) for scope in scopes]


def _revision_documents(document_ids: list[int]) -> list[tuple]:
    if not document_ids:
        return []
    rows = fetch(
        "SELECT d.id, a.artifact_id, r.revision, r.body, r.title, r.summary "
        "FROM artifacts_recalldocument d JOIN artifacts_artifact a ON a.id = d.artifact_id "
        f"JOIN artifacts_artifactrevision r ON r.id = d.revision_id WHERE d.id IN ({marks(document_ids)})",
        document_ids,
    )
    by_id = {row[0]: row for row in rows}
    return [by_id[i] for i in document_ids if i in by_id]


def recall_experience(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), up to 8 experience heads ranked by BM25."""
    ids = bm25_top_scored_by_scope(
        scope_pks=[scope.pk for scope in scopes],
        family=Family.EXPERIENCE,
        query=query,
        limit=POOL_CAP[Family.EXPERIENCE],
    )
    rows = {row[0]: row for row in _revision_documents([d for documents in ids.values() for d, _ in documents])}
    return [
        [
            _scored(Candidate(Citation(scope.scope_id, Family.EXPERIENCE, rows[i][1], rows[i][2]), rows[i][3]), score)
            for i, score in ids[scope.pk]
            if i in rows
        ]
        for scope in scopes
    ]


def recall_topic_memory(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Up to 8 topic memories of the current scope (the first given) ranked by BM25."""
    scope = scopes[0]
    scored = bm25_top_scored_by_scope(
        scope_pks=[scope.pk], family=Family.TOPIC_MEMORY, query=query, limit=POOL_CAP[Family.TOPIC_MEMORY]
    )[scope.pk]
    score_of = dict(scored)
    return [
        [
            _scored(
                Candidate(
                    Citation(scope.scope_id, Family.TOPIC_MEMORY, a, r),
                    topic_memory_projection(title=title or "", summary=summary or "", detail=body, query=query),
                ),
                score_of[document],
            )
            for document, a, r, body, title, summary in _revision_documents([d for d, _ in scored])
        ]
    ]


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
    ).values_list("artifact__scope_id", "revision", "body")
    by_scope = {scope_pk: (revision, body) for scope_pk, revision, body in heads}
    return [
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
