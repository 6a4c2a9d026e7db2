"""Memory search: the ranked candidates prepare would pool, as hits with their citations and scores, unrendered.

A host of mem0, Zep or Letta asks "search my memories for X" and expects ranked hits with ids and scores. This is
prepare's own recall (``runtime.families_recall``: the same sources, the same lexical or hybrid ranking, abstention
included) over the same scopes, authorized the same way before anything is read (``runtime.scopes_authorized``); it
renders nothing and has no byte budget. Each family's hits are its pool per scope, in the scopes' order (the current
one first, then its references), each scope's in recall's order, the first ``limit`` of each (a limit bounded like
the pools, ``POOL_CAP``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from artifacts.recall.fusion import Fused
from artifacts.recall.hybrid import (
    fused_by_citation,
    recall_abstained,
    recall_answered,
    recall_ranker,
)
from artifacts.recall.vectors.query import query_cache_owner
from assembly.runtime import ReadPrincipal, families_recall, scopes_authorized
from vocabulary.citation import Candidate
from vocabulary.families import POOL_CAP
from vocabulary.recall_modes import RECALL_MODE_HYBRID, RECALL_MODE_LEXICAL

SEARCHED_FAMILIES = ("memory", "experience")
"""The families a search ranks (a topic memory's body depends on the query, a profile is not ranked)."""
SEARCH_LIMIT_MAX = max(POOL_CAP[family] or 0 for family in SEARCHED_FAMILIES)
SEARCH_LIMIT_DEFAULT = 8
"""Hits per family and scope: at most the family's pool (``POOL_CAP``: what prepare ranks, never more)."""


@dataclass(frozen=True)
class SearchHit:
    """One ranked candidate: its family, its scope's 1-based rank, the candidate (citation, body) and the scores
    recall ranked it by: the BM25 score (None: not a lexical match), and under hybrid recall its ranks, cosine and
    fused or learned score (``Fused``; None when recall was lexical)."""

    family: str
    rank: int
    candidate: Candidate
    lexical_score: float | None
    fused: Fused | None


@dataclass(frozen=True)
class SearchResult:
    """A search's hits (families in the order asked), the recall that ranked them and the scopes that abstained."""

    hits: tuple[SearchHit, ...]
    mode: str
    ranker: str | None
    abstained: dict[str, list[str]]


def memory_search(
    *, principal: ReadPrincipal, scope_id: str, query: str, families: Sequence[str], limit: int
) -> SearchResult:
    """Search ``families`` of the scope and its references for ``query`` (module docstring). Raises what
    ``scopes_authorized`` raises and ``RecallSourceFailed``."""
    scopes = scopes_authorized(principal=principal, scope_id=scope_id, families=families)
    with query_cache_owner(getattr(principal, "api_key_id", None)):
        recalled = families_recall(families, scopes, query)
    recall = recalled.ranked_by
    fused = fused_by_citation(recall)
    hits = []
    for family in families:
        for at, candidates in enumerate(recalled.candidates.get(family, [])):
            for index, candidate in enumerate(candidates[:limit]):
                score, _ = recalled.evidence(family, at, index)
                lexical = score if score else None  # a document found by meaning alone has no BM25 score
                hits.append(SearchHit(family, index + 1, candidate, lexical, fused.get(candidate.citation)))
    answered = recall_answered(recall)
    mode = answered.mode if answered is not None else RECALL_MODE_LEXICAL
    return SearchResult(
        tuple(hits),
        mode,
        recall_ranker(recall) if mode == RECALL_MODE_HYBRID else None,
        recall_abstained(recall),
    )
