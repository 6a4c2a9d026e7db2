"""The exact SQL ranker: a pair's BM25 ranking computed by the database, with exact pruning.

It answers every pair it is asked (``ranked_by_sql``, the ``base.Ranker`` contract; ``ranked`` for one pair), and it
gives the planner the SQL forms of the same ranking to run inside its read statement: ``bm25.ranked_all_sql`` per
pair, or on PostgreSQL every pair's weights in one relation (``weight_rows``, ``ranked_by_weights_sql``). The score
is ``bm25.score_sql``: the arithmetic every ranker shares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from artifacts.recall import tokenize
from artifacts.recall.base import Pair, Ranked, first_of_each_branch
from artifacts.recall.bm25 import Bm25Query, postings_of_terms, ranked_all_sql, score_sql
from artifacts.recall.sql import fetch, literal_relation, one_of
from artifacts.recall.tables import POSTINGS_TABLE

# Ranking with pruning (exact): above PRUNE_MIN_POSTINGS postings for a query's terms, the documents holding
# one of the rarest terms are scored in full first; when the remaining, more common terms cannot lift any
# other document up to the k-th score found, that is the exact top k. Scoring a candidate reads all of its
# postings (about the average document length), so candidates are used only while that costs well under
# reading every posting of the query's terms.
PRUNE_MIN_POSTINGS = 20_000
ESSENTIAL_POSTINGS = 4_000


def _ranked_all(query: Bm25Query, *, scope_pk: int, family: str, limit: int) -> list[tuple[int, int]]:
    return fetch(*ranked_all_sql(query, scope_pk=scope_pk, family=family, limit=limit))


def _ranked_candidates(
    query: Bm25Query, essential: list[str], *, scope_pk: int, family: str, limit: int
) -> list[tuple[int, int]]:
    """The top documents among those holding an essential term, scored over every query term."""
    score, score_params = query.score_sql_and_params()
    postings, posting_params = postings_of_terms(query, scope_pk=scope_pk, family=family)
    essential_filter, essential_params = one_of("term", essential, "text")
    return fetch(
        f"SELECT p.document_id, {score} AS score FROM {postings} AND p.document_id IN "
        f"(SELECT document_id FROM {POSTINGS_TABLE} WHERE scope_id = %s AND family = %s AND {essential_filter}) "
        "GROUP BY p.document_id ORDER BY score DESC, p.document_id ASC LIMIT %s",
        [*score_params, *posting_params, scope_pk, family, *essential_params, limit],
    )


@dataclass(frozen=True)
class _PruningPlan:
    ordered: list[str]  # the query's terms, rarest first
    essential_count: int  # how many of the rarest terms select the first candidates
    affordable: float  # the posting volume candidates may cost
    worthwhile: bool  # whether pruning is tried at all


def _pruning_plan(query: Bm25Query) -> _PruningPlan:
    ordered = sorted(query.frequencies, key=lambda term: (query.frequencies[term], term))
    total = sum(query.frequencies.values())
    # Candidates cost about their postings times the average document length; a full ranking costs ``total``.
    affordable = min(ESSENTIAL_POSTINGS, total / (4 * max(1.0, query.average_length)))
    essential_count, volume = 0, 0
    for term in ordered:
        if volume + query.frequencies[term] > affordable:
            break
        essential_count += 1
        volume += query.frequencies[term]
    worthwhile = total > PRUNE_MIN_POSTINGS and 0 < essential_count < len(ordered)
    return _PruningPlan(ordered, essential_count, affordable, worthwhile)


def ranking_prunes(query: Bm25Query) -> bool:
    """Whether ``ranked`` tries the pruned ranking (several statements) rather than one full ranking."""
    return _pruning_plan(query).worthwhile


def ranked(query: Bm25Query, *, scope_pk: int, family: str, limit: int) -> list[tuple[int, int]]:
    """(document id, score in micro-units) by (score desc, id): exactly the full BM25 ranking's first ``limit``."""
    plan = _pruning_plan(query)
    ordered, essential_count, affordable = plan.ordered, plan.essential_count, plan.affordable
    if plan.worthwhile:
        for _ in range(2):
            rows = _ranked_candidates(query, ordered[:essential_count], scope_pk=scope_pk, family=family, limit=limit)
            if len(rows) < limit:
                break  # too few candidates to prove anything: rank everything
            # A document without an essential term scores at most the sum of the other terms' bounds; the
            # most common terms whose bounds stay below the k-th candidate's score need not be essential.
            threshold, outside, needed = rows[-1][1], 0, len(ordered)
            while needed > essential_count and outside + query.bound(ordered[needed - 1]) < threshold:
                outside += query.bound(ordered[needed - 1])
                needed -= 1
            if needed == essential_count:
                return [(document, score) for document, score in rows]
            if sum(query.frequencies[term] for term in ordered[:needed]) > 2 * affordable:
                break  # the candidates would cost about as much as ranking everything
            essential_count = needed
    return [(document, score) for document, score in _ranked_all(query, scope_pk=scope_pk, family=family, limit=limit)]


def ranked_by_sql(queries: Mapping[Pair, Bm25Query], *, limits: Mapping[str, int]) -> dict[Pair, Ranked]:
    """Per pair of ``queries``, its exact first ``limits[family]`` (document id, score): every pair answered, one
    ranking (or its pruning statements) each, in the order given."""
    return {
        (family, scope_pk): ranked(query, scope_pk=scope_pk, family=family, limit=limits[family])
        for (family, scope_pk), query in queries.items()
    }


_WEIGHT_COLUMNS = (
    ("branch", "int"),
    ("scope_id", "bigint"),
    ("family", "text"),
    ("term", "text"),
    ("weight", "float8"),
    ("length_factor", "float8"),
    ("lim", "int"),
)


def weight_rows(query: Bm25Query, *, branch: int, scope_pk: int, family: str, limit: int) -> list[tuple]:
    """One pair's rows of ``ranked_by_weights_sql``'s relation: one per query term."""
    return [
        (branch, scope_pk, family, term, weight, query.length_factor, limit)
        for term, weight in sorted(query.weights.items())
    ]


def ranked_by_weights_sql(weights: Sequence[tuple]) -> tuple[str, list]:
    """``(branch, document_id, score)``: each branch's first ``lim`` documents by (score desc, id), on PostgreSQL.

    The query terms' weights of every branch (``weight_rows``) are one relation; each weight row looks up its term's
    postings in its scope and family, scores are summed per (branch, document) and a window function keeps each
    branch's first ``lim``: the statement's shape does not grow with the number of branches (PostgreSQL plans it in
    about the time of one ranking).
    """
    relation, relation_params = literal_relation("w", _WEIGHT_COLUMNS, weights)
    # One index lookup per weight row whatever the planner knows (see bm25.postings_of_terms).
    postings = (
        f"{relation} CROSS JOIN LATERAL (SELECT document_id, term_frequency, document_length "
        f"FROM {POSTINGS_TABLE} WHERE scope_id = w.scope_id AND family = w.family AND term = w.term "
        "OFFSET 0) AS p"
    )
    # One length constant for all; the length factor (k1·b / average length) is the branch's own.
    score = score_sql(length_factor="w.length_factor")
    score_params = [float(tokenize.SCORE_SCALE), tokenize.BM25_K1 * (1 - tokenize.BM25_B)]
    return (
        first_of_each_branch(
            f"SELECT w.branch, w.lim, p.document_id, {score} AS score FROM {postings} "
            "GROUP BY w.branch, w.lim, p.document_id"
        ),
        [*score_params, *relation_params],
    )
