"""Bare BM25 rankings for the benchmarks and the engine's tests: the top documents of one family per scope, ranked by
the search engine (large scopes, when enabled) or by SQL, nothing read but the ranking. Not what prepare runs (the
planner, ``artifacts.recall.planner.bm25_ranked_documents``, also ranks in memory and reads the rows): it isolates
the two rankers for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence

from artifacts.recall import bm25, engine, ranking, tokenize


def bm25_top_documents_by_scope(
    *, scope_pks: Sequence[int], family: str, query: str, limit: int
) -> dict[int, list[int]]:
    """Per scope, the ids of its top ``limit`` live documents of the family for the query (maybe none)."""
    scored = bm25_top_scored_by_scope(scope_pks=scope_pks, family=family, query=query, limit=limit)
    return {scope_pk: [document for document, _ in rows] for scope_pk, rows in scored.items()}


def bm25_top_scored_by_scope(
    *, scope_pks: Sequence[int], family: str, query: str, limit: int
) -> dict[int, list[tuple[int, int]]]:
    """Like ``bm25_top_documents_by_scope``, each id with its BM25 score in micro-units (``SCORE_SCALE``): ranked by
    the search engine (large scopes, when enabled) or by SQL, nothing read but the ranking."""
    terms = tokenize.recall_terms(query)
    queries = bm25.bm25_queries(scope_pks_by_family={family: scope_pks}, terms=terms) if terms and scope_pks else {}
    by_index = engine.ranked_by_index(queries, limits={family: limit})
    # The others by SQL, in the scopes' order (a pair absent from ``queries`` has no document holding a term).
    rest = [(family, scope_pk) for scope_pk in scope_pks if (family, scope_pk) in queries]
    by_sql = ranking.ranked_by_sql(
        {pair: queries[pair] for pair in rest if pair not in by_index}, limits={family: limit}
    )
    return {scope_pk: by_index.get((family, scope_pk)) or by_sql.get((family, scope_pk), []) for scope_pk in scope_pks}


def bm25_top_documents(*, scope_pk: int, family: str, query: str, limit: int) -> list[int]:
    return bm25_top_documents_by_scope(scope_pks=[scope_pk], family=family, query=query, limit=limit)[scope_pk]
