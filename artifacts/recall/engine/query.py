"""Ranking a large scope with the engine: candidates from the index, the unindexed tail, exact rescoring.

The engine's own BM25 differs slightly from ours (it quantizes document lengths to a byte and uses the
statistics of its last update), so it only proposes candidates: CANDIDATE_FACTOR × the limit, plus as
many as the index holds deleted documents (they may occupy slots). Those candidates and every live
document written since the index's watermark (the tail, exact in SQL) are rescored in SQL with the
current statistics (``Bm25Query``'s weights, the same expression as ``ranking``), and ordered by
(score desc, document id): the same integer scores and tie-break as the SQL path.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping

from django.conf import settings
from django.db import DatabaseError

from artifacts.recall.engine import store
from artifacts.recall.ranking import POSTINGS_TABLE, Bm25Query, fetch, postgresql
from powercontext import metrics

CANDIDATE_FACTOR = 4
PAIRS_PER_STATEMENT = 100
"""(family, scope) pairs per tail or rescoring statement (one UNION ALL part each; SQLite allows 500 parts)."""
_DOCUMENTS = "artifacts_recalldocument"
logger = logging.getLogger(__name__)

Pair = tuple[str, int]
"""(family, scope pk): one ranking."""


def ranked_by_index(
    queries: Mapping[Pair, Bm25Query], *, limits: Mapping[str, int]
) -> dict[Pair, list[tuple[int, int]]]:
    """Per (family, scope) at or above the size threshold whose index is usable, its exact top ``limits[family]``.

    All the pairs the engine answers cost two statements together: their unindexed tails, then the exact
    rescoring of every pair's candidates. A pair the engine cannot answer is counted and left to SQL.
    """
    threshold = settings.POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS
    # Each query carries its scope's live document count, read with the statistics: no second read.
    readers = {}
    for pair, query in queries.items():
        if query.documents >= threshold and (found := _guarded([pair], store.reader, pair[1], pair[0])):
            readers[pair] = found
    pairs = list(readers)
    answered: dict[Pair, list[tuple[int, int]]] = {}
    for start in range(0, len(pairs), PAIRS_PER_STATEMENT):
        group = {pair: readers[pair] for pair in pairs[start : start + PAIRS_PER_STATEMENT]}
        answered |= _answered(group, queries, limits)
    return answered


def _answered(readers: Mapping[Pair, tuple], queries: Mapping[Pair, Bm25Query], limits: Mapping[str, int]):
    tails = _guarded(readers, _tails, {pair: meta.watermark for pair, (_, meta) in readers.items()})
    if tails is None:
        return {}
    candidates = {}
    for pair, (searcher, meta) in readers.items():
        proposed = _guarded([pair], _candidates, queries[pair], searcher, meta, tails[pair], limits[pair[0]])
        if proposed is not None:
            candidates[pair] = proposed
    rescored = _guarded(candidates, _rescored, {pair: queries[pair] for pair in candidates}, candidates)
    if rescored is None:
        return {}
    answered: dict[Pair, list[tuple[int, int]]] = {pair: [] for pair in candidates}
    for pair, document, score in rescored:
        answered[pair].append((document, score))
    for pair, rows in answered.items():
        rows.sort(key=lambda row: (-row[1], row[0]))
        del rows[limits[pair[0]] :]
        metrics.RECALL_INDEX_ANSWERS.inc()
    return answered


def _guarded(pairs: Iterable[Pair], work, *arguments):
    """``work(*arguments)``, or None when the engine cannot answer these pairs (each counted and logged; SQL
    answers them instead). Database errors propagate: the SQL path would fail the same way (and a PostgreSQL
    transaction is aborted)."""
    try:
        return work(*arguments)
    except store.IndexUnusable as exc:
        reason, level, detail = exc.reason, logging.INFO, str(exc)
    except DatabaseError:
        raise
    except Exception:  # an engine failure (or a value the database cannot take) must never fail or empty a prepare
        reason, level, detail = "error", logging.WARNING, "failed"
    for family, scope_pk in pairs:
        metrics.RECALL_INDEX_FALLBACKS.labels(reason).inc()
        logger.log(
            level, "recall index for scope %s %s not used: %s", scope_pk, family, detail, exc_info=reason == "error"
        )
    return None


def _tails(watermarks: Mapping[Pair, int]) -> dict[Pair, list[int]]:
    """Per pair, up to MAX_LAG + 1 ids of the documents written since its index's watermark, in one statement."""
    max_lag = settings.POWERCONTEXT_SEARCH_INDEX_MAX_LAG
    pairs = list(watermarks)
    # Each part ordered by id from the watermark up, so the database walks only the documents written since.
    parts = [
        f"SELECT {branch} AS branch, id FROM (SELECT id FROM {_DOCUMENTS} WHERE id > %s AND scope_id = %s "
        f"AND family = %s ORDER BY id LIMIT %s) AS tail{branch}"
        for branch in range(len(pairs))
    ]
    params = [
        value
        for (family, scope_pk) in pairs
        for value in (watermarks[(family, scope_pk)], scope_pk, family, max_lag + 1)
    ]
    tails: dict[Pair, list[int]] = {pair: [] for pair in pairs}
    for branch, document in fetch(" UNION ALL ".join(parts), params):
        tails[pairs[branch]].append(document)
    return tails


def _candidates(query: Bm25Query, searcher, meta: store.IndexMeta, tail: list[int], limit: int) -> list[int]:
    """The engine's proposals for one pair plus its unindexed tail; raises IndexUnusable when stale."""
    max_lag = settings.POWERCONTEXT_SEARCH_INDEX_MAX_LAG
    if len(tail) > max_lag:
        raise store.IndexUnusable("stale", f"{len(tail)}+ documents written since the last update")
    # Documents are never edited (a change is a new document), so the index holds exactly `deleted` documents
    # that are no longer live. Negative: the index does not describe this database (restored, or another one).
    deleted = meta.documents - (query.documents - len(tail))
    if deleted < 0:
        raise store.IndexUnusable("stale", "the index holds fewer documents than the database below its watermark")
    if deleted > max_lag:
        raise store.IndexUnusable("stale", f"{deleted} documents removed since the last update")
    proposed = set(store.search(searcher, sorted(query.weights), CANDIDATE_FACTOR * limit + deleted))
    proposed.update(tail)
    return sorted(proposed)


def _rescored(queries: Mapping[Pair, Bm25Query], candidates: Mapping[Pair, list[int]]) -> list[tuple[Pair, int, int]]:
    """(pair, document, exact score) of every candidate that is live in its pair's scope and holds a query term.

    One statement, a part per pair: the same score expression and weights as the SQL ranking, so the same
    integers. Postings are read by document (a few hundred rows), never by term (a common term has most of the
    scope's documents). The scope and family are checked too: an index copied from another database cannot leak
    documents. (One relation of all pairs' weights was tried: both engines then scanned it per posting.)
    """
    pairs = [pair for pair in candidates if candidates[pair]]
    parts, params = [], []
    for branch, pair in enumerate(pairs):
        part, part_params = _rescored_part(branch, queries[pair], candidates[pair], family=pair[0], scope_pk=pair[1])
        parts.append(part)
        params += part_params
    if not parts:
        return []
    return [(pairs[branch], document, score) for branch, document, score in fetch(" UNION ALL ".join(parts), params)]


def _rescored_part(branch: int, query: Bm25Query, documents: list[int], *, family: str, scope_pk: int):
    score, score_params = query.score_sql_and_params()
    weights, weight_params = query.weights_sql_and_params()
    if postgresql():
        # The candidates' postings alone, in a subquery that OFFSET 0 keeps whole: given the terms too, the planner
        # read every posting of each query term in the scope (the covering term index) and filtered them by
        # document, as slow as ranking without the engine at 1M documents.
        postings = (
            f"(SELECT document_id, scope_id, family, term, term_frequency, document_length FROM {POSTINGS_TABLE} "
            "WHERE document_id = ANY(%s::bigint[]) OFFSET 0) AS p"
        )
        postings_params, in_documents, in_params = [documents], "", []
    else:
        # CROSS JOIN fixes SQLite's order the same way: the candidates' postings first, then their weight.
        postings, postings_params = f"{POSTINGS_TABLE} p", []
        in_documents, in_params = "p.document_id IN (SELECT value FROM json_each(%s)) AND ", [json.dumps(documents)]
    return (
        f"SELECT * FROM (SELECT {branch} AS branch, p.document_id, {score} AS score FROM {postings} "
        f"CROSS JOIN {weights} WHERE {in_documents}w.term = p.term AND p.scope_id = %s AND p.family = %s "
        f"GROUP BY p.document_id) AS rescored{branch}",
        [*score_params, *postings_params, *weight_params, *in_params, scope_pk, family],
    )
