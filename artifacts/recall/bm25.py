"""The BM25 query every lexical ranker answers: a pair's weights from the index statistics, and its exact score.

Scores are computed from per-term weights that Python derives from the index statistics (``bm25_queries``, one
statement for every pair), summed as whole micro-units, and ordered by (score desc, document id): the same arithmetic
in SQL on SQLite and PostgreSQL (``score_sql``, ``ranked_all_sql``) and in Python (``contribution``), so every ranker
(``ranking``, ``resident``, ``engine``) returns the same ranking. No ranker lives here: this is what they share.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from artifacts.recall import tokenize
from artifacts.recall.sql import fetch, literal_relation, marks, one_of, postgresql
from artifacts.recall.tables import CORPUS_TABLE, POSTINGS_TABLE, TERM_STATS_TABLE
from vocabulary.limits import RECALL_MAX_QUERY_TERMS


def score_sql(length_factor: str = "%s") -> str:
    """The BM25 score of a document: the sum over its postings ``p`` of each term's contribution (weight ``w``).

    Parameters: the score scale, the length constant, then the length factor unless ``length_factor`` names
    a column that holds it (``w.length_factor`` when one statement ranks several scopes).
    """
    # Double precision on both engines, evaluated in the same order: the same IEEE arithmetic everywhere, and in
    # ``contribution`` (Python) for the scopes ranked from memory
    # (PostgreSQL would otherwise read the float parameters as numeric, which is exact but many times slower).
    real = "%s::float8" if postgresql() else "%s"
    if length_factor == "%s":
        length_factor = real
    contribution = (
        f"{real} * w.weight * p.term_frequency / (p.term_frequency + {real} + {length_factor} * p.document_length)"
    )
    # Whole micro-units: exact, order-independent sums, so ties break on the document id alone.
    if postgresql():
        # FLOOR of a double is a double: the sum is cast so that every path returns integer scores.
        return f"CAST(SUM(FLOOR({contribution})) AS bigint)"
    return f"SUM(CAST({contribution} AS INTEGER))"


def contribution(weight: float, frequency: int, length: int, *, length_constant: float, length_factor: float) -> int:
    """One posting's share of a score in micro-units, in Python: ``score_sql``'s contribution, in the same order
    of evaluation (the same IEEE doubles), truncated as its cast and FLOOR truncate (every value is >= 0)."""
    return int(
        float(tokenize.SCORE_SCALE) * weight * frequency / (frequency + length_constant + length_factor * length)
    )


SQLITE_WEIGHT_ROWS_MIN = 8
"""Fewest rows of a query's weights relation on SQLite (``Bm25Query.weights_sql_and_params``)."""


@dataclass(frozen=True)
class Bm25Query:
    """One scope's query: BM25 weight and document frequency per present term, length normalization."""

    weights: dict[str, float]
    frequencies: dict[str, int]
    length_constant: float
    length_factor: float
    average_length: float
    documents: int  # the scope's live documents of the family (its corpus statistics)
    generation: int = 0  # the corpus row's generation these statistics were read with
    total_length: int = 0

    def score_sql_and_params(self) -> tuple[str, list]:
        """The score expression over ``p`` (a posting) and ``w`` (its term's weight), and its parameters."""
        return score_sql(), [float(tokenize.SCORE_SCALE), self.length_constant, self.length_factor]

    def weights_sql_and_params(self) -> tuple[str, list]:
        """The query's terms and weights as a relation ``w(term, weight)``: one row per term.

        Postings are joined against it, so scoring costs one lookup per posting whatever the number of
        terms (a CASE with a branch per term cost postings × terms). Weights reach the database as the same
        doubles on both engines: SQLite binds them, PostgreSQL reads the shortest decimal that reads back as
        the same double (``pg_array``).

        On SQLite the rows are padded with NULL terms, which join no posting, to a power of two of at least
        ``SQLITE_WEIGHT_ROWS_MIN``: the statement's text then takes a few forms instead of one per term count, and
        the connection reuses its compiled statement (about 0.2 ms of a 4.6 ms prepare over five indexed pairs at
        100k documents, measured side by side). PostgreSQL's arrays keep its text the same already.
        """
        rows: list[tuple] = [(term, self.weights[term]) for term in sorted(self.weights)]
        if not postgresql():
            rows += [(None, None)] * (max(SQLITE_WEIGHT_ROWS_MIN, 1 << (len(rows) - 1).bit_length()) - len(rows))
        return literal_relation("w", (("term", "text"), ("weight", "float8")), rows)

    def bound(self, term: str) -> int:
        """More than any document's contribution for the term (each is below SCALE × weight)."""
        return int(tokenize.SCORE_SCALE * self.weights[term]) + 1


def most_distinctive_terms(frequencies: dict[str, int], first_seen: dict[str, int]) -> dict[str, int]:
    """At most RECALL_MAX_QUERY_TERMS of a scope's present query terms: the rarest (highest idf) first.

    Ties go to the term that appears first in the query. Document frequencies are the same on every
    engine, so the choice is too; a query of up to 8192 characters is never refused, its cost is bounded.
    """
    if len(frequencies) <= RECALL_MAX_QUERY_TERMS:
        return frequencies
    ranked = sorted(frequencies, key=lambda term: (frequencies[term], first_seen[term]))
    return {term: frequencies[term] for term in ranked[:RECALL_MAX_QUERY_TERMS]}


def _term_stats_sql(family: str, scope_pks: Sequence[int], terms: list[str]) -> tuple[str, list]:
    """The query terms' document frequencies in the family and scopes: ``(family, scope_id, term, documents, 0, 0)``.

    PostgreSQL looks each (scope, term) up by the whole unique key through a LATERAL subquery (OFFSET 0 keeps it
    from being flattened). Given the scopes as a list instead, a table without statistics (a new or freshly loaded
    database, before autovacuum's ANALYZE) was scanned once per term: 264 against 38 ms for 128 terms in 64 scopes
    (EXPLAIN ANALYZE: a sequential scan per term); flattened, the planner filtered every term of the scopes (12 ms
    against 0.6 ms on 10,000 terms). Scopes and terms are JSON arrays, not ``text[]``: PostgreSQL estimates an
    ``unnest`` of a bound array at its length but of a parameter at 10 rows, so the prepared statement's generic
    plan looked dearer than every custom one and the statement was planned again at every prepare (0.3 ms of its
    0.7 ms at 1,000 entries); a JSON array is estimated alike in both plans, and the generic plan is kept.
    """
    if postgresql():
        return (
            "SELECT %s::text, t.scope_id, t.term, t.documents, 0, 0 FROM jsonb_array_elements_text(%s::jsonb) "
            "AS s(scope_id) CROSS JOIN jsonb_array_elements_text(%s::jsonb) AS q(term) CROSS JOIN LATERAL "
            f"(SELECT scope_id, term, documents FROM {TERM_STATS_TABLE} WHERE scope_id = s.scope_id::bigint "
            "AND family = %s AND term = q.term AND documents > 0 OFFSET 0) AS t",
            [family, json.dumps(list(scope_pks)), json.dumps(terms, ensure_ascii=False), family],
        )
    term_filter, term_params = one_of("term", terms, "text")
    return (
        f"SELECT family, scope_id, term, documents, 0, 0 FROM {TERM_STATS_TABLE} "
        f"WHERE family = %s AND scope_id IN ({marks(scope_pks)}) AND {term_filter} AND documents > 0",
        [family, *scope_pks, *term_params],
    )


class HeldPostings(Protocol):
    """A copy of one (family, scope) pair's postings at one generation (``recall.resident``)."""

    generation: int

    def frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """Document frequency of each of ``terms`` present in the copy."""


def _statistics_sql(
    corpus_pks_by_family: Mapping[str, Sequence[int]], term_pks_by_family: Mapping[str, Sequence[int]], terms: list[str]
) -> tuple[str, list]:
    """One statement: the corpus rows of the first pairs, the query terms' statistics of the second; rows
    ``(family, scope_id, term or NULL, documents, total_length, generation)``."""
    branches: list[str] = []
    params: list = []
    for family, scope_pks in corpus_pks_by_family.items():
        if scope_pks:
            branches.append(
                "SELECT family, scope_id, NULL AS term, documents, total_length, generation "
                f"FROM {CORPUS_TABLE} "
                f"WHERE family = %s AND scope_id IN ({marks(scope_pks)}) AND documents > 0"
            )
            params += [family, *scope_pks]
    for family, scope_pks in term_pks_by_family.items():
        if scope_pks:
            branch, branch_params = _term_stats_sql(family, scope_pks, terms)
            branches.append(branch)
            params += branch_params
    return " UNION ALL ".join(branches), params


def bm25_query(
    *, documents: int, total_length: int, generation: int, frequencies: dict[str, int], first_seen: dict[str, int]
) -> Bm25Query:
    """One pair's BM25 query from its corpus row and its present terms' document frequencies (``first_seen``: each
    query term's position, for ``most_distinctive_terms``)."""
    present = most_distinctive_terms(frequencies, first_seen)
    k1, b = tokenize.BM25_K1, tokenize.BM25_B
    average_length = total_length / documents or 1.0
    return Bm25Query(
        weights={term: tokenize.idf(documents, df) * (k1 + 1) for term, df in present.items()},
        frequencies=present,
        length_constant=k1 * (1 - b),
        length_factor=k1 * b / average_length,
        average_length=average_length,
        documents=documents,
        generation=generation,
        total_length=total_length,
    )


def bm25_queries(
    *,
    scope_pks_by_family: Mapping[str, Sequence[int]],
    terms: list[str],
    held: Mapping[tuple[str, int], HeldPostings] | None = None,
    stale_found: Callable[[tuple[str, int]], None] | None = None,
    empty_found: Callable[[tuple[str, int]], None] | None = None,
    generations: dict[tuple[str, int], int] | None = None,
) -> dict[tuple[str, int], Bm25Query]:
    """Per (family, scope) with live documents and at least one query term, its BM25 query.

    The corpus and term statistics of every family and scope are read in one statement. A pair in ``held``
    reads only its corpus row: at the copy's generation the copy's document frequencies are the term
    statistics (the index changes both in one transaction). A copy at another generation is reported to
    ``stale_found`` and one more statement reads that pair's corpus row and term statistics again, together:
    statistics of one snapshot, never a count from before a write with frequencies from after it. A pair found
    without live documents is reported to ``empty_found``. ``generations``, when given, receives the generation of
    every pair with live documents, whether the query has a term in it or not.
    """
    held = held or {}
    if not any(scope_pks_by_family.values()):
        return {}
    cold = {family: [pk for pk in pks if (family, pk) not in held] for family, pks in scope_pks_by_family.items()}
    corpus: dict[tuple[str, int], tuple[int, int, int]] = {}
    frequencies: dict[tuple[str, int], dict[str, int]] = {}

    def read(sql: str, params: list) -> None:
        for family, scope_pk, term, documents, total_length, generation in fetch(sql, params):
            if term is None:
                corpus[(family, scope_pk)] = (documents, total_length, generation)
            else:
                frequencies.setdefault((family, scope_pk), {})[term] = documents

    read(*_statistics_sql(scope_pks_by_family, cold, terms))
    stale: dict[str, list[int]] = {}
    for pair, copy in held.items():
        if pair in corpus and corpus[pair][2] == copy.generation:
            if present := copy.frequencies(terms):
                frequencies[pair] = present
            continue
        if stale_found is not None:
            stale_found(pair)
        if pair in corpus:  # written since the copy was made
            stale.setdefault(pair[0], []).append(pair[1])
            del corpus[pair]
    if stale:
        read(*_statistics_sql(stale, stale, terms))
    if empty_found is not None:
        for family, scope_pks in scope_pks_by_family.items():
            for scope_pk in scope_pks:
                if (family, scope_pk) not in corpus:
                    empty_found((family, scope_pk))
    if generations is not None:
        generations.update((pair, generation) for pair, (_, _, generation) in corpus.items())
    first_seen = {term: position for position, term in enumerate(terms)}
    return {
        key: bm25_query(
            documents=corpus[key][0],
            total_length=corpus[key][1],
            generation=corpus[key][2],
            frequencies=present,
            first_seen=first_seen,
        )
        for key, present in frequencies.items()
        if key in corpus
    }


def postings_of_terms(
    query: Bm25Query, *, scope_pk: int, family: str, after_document: int | None = None
) -> tuple[str, list]:
    """FROM and WHERE of one posting ``p`` per query term's posting in the scope, beside its weight ``w``.

    Each term's postings are looked up by the (scope, family, term) index whatever the planner knows:
    SQLite loops over the few terms (CROSS JOIN fixes the order); PostgreSQL evaluates the LATERAL subquery
    per term (OFFSET 0 keeps it from being flattened), because on a table without statistics it otherwise
    scanned every posting of the scope (measured ~1000x slower). With ``after_document``, only the postings
    of documents with a higher id: the same index range, started there (the covering index ends in the id).
    """
    weights, weight_params = query.weights_sql_and_params()
    after, after_params = ("", []) if after_document is None else (" AND document_id > %s", [after_document])
    if postgresql():
        return (
            f"{weights} CROSS JOIN LATERAL (SELECT document_id, term_frequency, document_length FROM {POSTINGS_TABLE} "
            f"WHERE scope_id = %s AND family = %s AND term = w.term{after} OFFSET 0) AS p WHERE TRUE",
            [*weight_params, scope_pk, family, *after_params],
        )
    return (
        f"{weights} CROSS JOIN {POSTINGS_TABLE} p WHERE p.scope_id = %s AND p.family = %s AND p.term = w.term"
        + after.replace("document_id", "p.document_id"),
        [*weight_params, scope_pk, family, *after_params],
    )


def ranked_all_sql(
    query: Bm25Query, *, scope_pk: int, family: str, limit: int, after_document: int | None = None
) -> tuple[str, list]:
    """``(document_id, score)`` of the first ``limit`` documents by (score desc, id), scoring every posting of the
    query's terms (only those of documents after ``after_document``, when given)."""
    score, score_params = query.score_sql_and_params()
    postings, posting_params = postings_of_terms(query, scope_pk=scope_pk, family=family, after_document=after_document)
    return (
        f"SELECT p.document_id, {score} AS score FROM {postings} "
        "GROUP BY p.document_id ORDER BY score DESC, p.document_id ASC LIMIT %s",
        [*score_params, *posting_params, limit],
    )
