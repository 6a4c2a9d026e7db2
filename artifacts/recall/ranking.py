"""BM25 ranking in SQL over the inverted index, with exact pruning.

Scores are computed by the database from per-term weights that Python derives from the index
statistics, summed as whole micro-units, and ordered by (score desc, document id): the same arithmetic
on SQLite and PostgreSQL, so both return the same ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection

from artifacts.recall import tokenize

# Ranking with pruning (exact): above PRUNE_MIN_POSTINGS postings for a query's terms, the documents holding
# one of the rarest terms are scored in full first; when the remaining, more common terms cannot lift any
# other document up to the k-th score found, that is the exact top k. Scoring a candidate reads all of its
# postings (about the average document length), so candidates are used only while that costs well under
# reading every posting of the query's terms.
PRUNE_MIN_POSTINGS = 20_000
ESSENTIAL_POSTINGS = 4_000
_POSTING = "artifacts_recallposting"


def _score_sql(term_count: int) -> str:
    # Double precision on both engines, evaluated in the same order: the same IEEE arithmetic everywhere
    # (PostgreSQL would otherwise read the float parameters as numeric, which is exact but many times slower).
    real = "%s::float8" if connection.vendor == "postgresql" else "%s"
    weights = " ".join(f"WHEN %s THEN {real}" for _ in range(term_count))
    contribution = f"(CASE term {weights} END) * term_frequency / (term_frequency + {real} + {real} * document_length)"
    # Whole micro-units: exact, order-independent sums, so ties break on the document id alone.
    if connection.vendor == "postgresql":
        return f"SUM(FLOOR({real} * {contribution}))"
    return f"SUM(CAST({real} * {contribution} AS INTEGER))"


def marks(values: Sequence) -> str:
    return ", ".join(["%s"] * len(values))


def fetch(sql: str, params: Sequence) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@dataclass(frozen=True)
class _Bm25Query:
    """One scope's query: BM25 weight and document frequency per present term, length normalization."""

    weights: dict[str, float]
    frequencies: dict[str, int]
    length_constant: float
    length_factor: float
    average_length: float

    def score_sql_and_params(self) -> tuple[str, list]:
        present = sorted(self.weights)
        params: list = [float(tokenize.SCORE_SCALE)]
        for term in present:
            params += [term, self.weights[term]]
        return _score_sql(len(present)), [*params, self.length_constant, self.length_factor]

    def bound(self, term: str) -> int:
        """More than any document's contribution for the term (each is below SCALE × weight)."""
        return int(tokenize.SCORE_SCALE * self.weights[term]) + 1


def _bm25_queries(*, scope_pks: Sequence[int], family: str, terms: list[str]) -> dict[int, _Bm25Query]:
    """Per scope with live documents of the family and at least one query term, its BM25 query."""
    corpus = {
        scope_pk: (documents, total_length)
        for scope_pk, documents, total_length in fetch(
            "SELECT scope_id, documents, total_length FROM artifacts_recallcorpusstat "
            f"WHERE family = %s AND scope_id IN ({marks(scope_pks)}) AND documents > 0",
            [family, *scope_pks],
        )
    }
    if not corpus:
        return {}
    frequencies: dict[int, dict[str, int]] = {}
    for scope_pk, term, documents in fetch(
        "SELECT scope_id, term, documents FROM artifacts_recalltermstat "
        f"WHERE family = %s AND scope_id IN ({marks(list(corpus))}) AND term IN ({marks(terms)}) AND documents > 0",
        [family, *corpus, *terms],
    ):
        frequencies.setdefault(scope_pk, {})[term] = documents
    k1, b = tokenize.BM25_K1, tokenize.BM25_B
    queries = {}
    for scope_pk, present in frequencies.items():
        documents, total_length = corpus[scope_pk]
        average_length = total_length / documents or 1.0
        queries[scope_pk] = _Bm25Query(
            weights={term: tokenize.idf(documents, df) * (k1 + 1) for term, df in present.items()},
            frequencies=present,
            length_constant=k1 * (1 - b),
            length_factor=k1 * b / average_length,
            average_length=average_length,
        )
    return queries


def _ranked_all(query: _Bm25Query, *, scope_pk: int, family: str, limit: int) -> list[tuple[int, int]]:
    score, params = query.score_sql_and_params()
    terms = sorted(query.weights)
    return fetch(
        f"SELECT document_id, {score} AS score FROM {_POSTING} "
        f"WHERE scope_id = %s AND family = %s AND term IN ({marks(terms)}) "
        "GROUP BY document_id ORDER BY score DESC, document_id ASC LIMIT %s",
        [*params, scope_pk, family, *terms, limit],
    )


def _ranked_candidates(
    query: _Bm25Query, essential: list[str], *, scope_pk: int, family: str, limit: int
) -> list[tuple[int, int]]:
    """The top documents among those holding an essential term, scored over every query term."""
    score, params = query.score_sql_and_params()
    terms = sorted(query.weights)
    return fetch(
        f"SELECT document_id, {score} AS score FROM {_POSTING} "
        f"WHERE document_id IN (SELECT document_id FROM {_POSTING} WHERE scope_id = %s AND family = %s "
        f"AND term IN ({marks(essential)})) AND term IN ({marks(terms)}) "
        "GROUP BY document_id ORDER BY score DESC, document_id ASC LIMIT %s",
        [*params, scope_pk, family, *essential, *terms, limit],
    )


def _ranked(query: _Bm25Query, *, scope_pk: int, family: str, limit: int) -> list[int]:
    """Document ids by (score desc, id): exactly the full BM25 ranking's first ``limit``."""
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
    if total > PRUNE_MIN_POSTINGS and 0 < essential_count < len(ordered):
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
                return [document for document, _ in rows]
            if sum(query.frequencies[term] for term in ordered[:needed]) > 2 * affordable:
                break  # the candidates would cost about as much as ranking everything
            essential_count = needed
    return [document for document, _ in _ranked_all(query, scope_pk=scope_pk, family=family, limit=limit)]


def bm25_top_documents_by_scope(
    *, scope_pks: Sequence[int], family: str, query: str, limit: int
) -> dict[int, list[int]]:
    """Per scope, the ids of its top ``limit`` live documents of the family for the query (maybe none)."""
    terms = tokenize.query_terms(query)
    queries = _bm25_queries(scope_pks=scope_pks, family=family, terms=terms) if terms and scope_pks else {}
    return {
        scope_pk: _ranked(queries[scope_pk], scope_pk=scope_pk, family=family, limit=limit)
        if scope_pk in queries
        else []
        for scope_pk in scope_pks
    }


def bm25_top_documents(*, scope_pk: int, family: str, query: str, limit: int) -> list[int]:
    return bm25_top_documents_by_scope(scope_pks=[scope_pk], family=family, query=query, limit=limit)[scope_pk]
