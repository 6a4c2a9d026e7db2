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
from collections.abc import Mapping

from django.conf import settings
from django.db import DatabaseError, connection

from artifacts.recall.engine import store
from artifacts.recall.ranking import Bm25Query, fetch
from powercontext import metrics

CANDIDATE_FACTOR = 4
_DOCUMENTS = "artifacts_recalldocument"
_POSTING = "artifacts_recallposting"
logger = logging.getLogger(__name__)


def ranked_by_index(queries: Mapping[int, Bm25Query], *, family: str, limit: int) -> dict[int, list[tuple[int, int]]]:
    """Per scope at or above the size threshold whose index is usable, its exact top ``limit``."""
    threshold = settings.POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS
    answered = {}
    # Each query carries its scope's live document count, read with the statistics: no second read.
    for scope_pk, query in queries.items():
        if query.documents < threshold:
            continue
        try:
            answered[scope_pk] = _ranked(query, scope_pk=scope_pk, family=family, limit=limit, live=query.documents)
        except store.IndexUnusable as exc:
            metrics.RECALL_INDEX_FALLBACKS.labels(exc.reason).inc()
            logger.info("recall index for scope %s %s not used: %s", scope_pk, family, exc)
        except DatabaseError:
            raise  # the SQL path would fail the same way (and a PostgreSQL transaction is aborted)
        except Exception:  # an engine failure must never fail or empty a prepare: SQL answers instead
            metrics.RECALL_INDEX_FALLBACKS.labels("error").inc()
            logger.warning("recall index for scope %s %s failed", scope_pk, family, exc_info=True)
        else:
            metrics.RECALL_INDEX_ANSWERS.inc()
    return answered


def _ranked(query: Bm25Query, *, scope_pk: int, family: str, limit: int, live: int) -> list[tuple[int, int]]:
    searcher, meta = store.reader(scope_pk, family)
    max_lag = settings.POWERCONTEXT_SEARCH_INDEX_MAX_LAG
    # Ordered by id from the watermark up, so the database walks only the documents written since.
    tail = [
        row[0]
        for row in fetch(
            f"SELECT id FROM {_DOCUMENTS} WHERE id > %s AND scope_id = %s AND family = %s ORDER BY id LIMIT %s",
            [meta.watermark, scope_pk, family, max_lag + 1],
        )
    ]
    if len(tail) > max_lag:
        raise store.IndexUnusable("stale", f"{len(tail)}+ documents written since the last update")
    # Documents are never edited (a change is a new document), so the index holds exactly `deleted` documents
    # that are no longer live. Negative: the index does not describe this database (restored, or another one).
    deleted = meta.documents - (live - len(tail))
    if deleted < 0:
        raise store.IndexUnusable("stale", "the index holds fewer documents than the database below its watermark")
    if deleted > max_lag:
        raise store.IndexUnusable("stale", f"{deleted} documents removed since the last update")
    candidates = set(store.search(searcher, sorted(query.weights), CANDIDATE_FACTOR * limit + deleted))
    candidates.update(tail)
    if not candidates:
        return []
    rows = _rescored(query, sorted(candidates), scope_pk=scope_pk, family=family)
    rows.sort(key=lambda row: (-row[1], row[0]))
    return rows[:limit]


def _rescored(query: Bm25Query, documents: list[int], *, scope_pk: int, family: str) -> list[tuple[int, int]]:
    """(document, exact score) of those of ``documents`` that are live in the scope and hold a query term.

    The same score expression and weights as ``ranking._ranked_all``, so the same integers. Postings are
    read by document (a few hundred rows), never by term (a common term has most of the scope's documents).
    The scope and family are checked too: an index copied from another database cannot leak documents.
    """
    score, score_params = query.score_sql_and_params()
    weights, weight_params = query.weights_sql_and_params()
    if connection.vendor == "postgresql":
        # The candidates' postings alone, in a subquery that OFFSET 0 keeps whole: given the terms too, the planner
        # read every posting of each query term in the scope (the covering term index) and filtered them by
        # document, as slow as ranking without the engine at 1M documents.
        postings = (
            f"(SELECT document_id, scope_id, family, term, term_frequency, document_length FROM {_POSTING} "
            "WHERE document_id = ANY(%s::bigint[]) OFFSET 0) AS p"
        )
        postings_params, in_documents, in_params = [documents], "", []
    else:
        # CROSS JOIN fixes SQLite's order the same way: the candidates' postings first, then their weight.
        postings, postings_params = f"{_POSTING} p", []
        in_documents, in_params = "p.document_id IN (SELECT value FROM json_each(%s)) AND ", [json.dumps(documents)]
    return [
        (document, score_value)
        for document, score_value in fetch(
            f"SELECT p.document_id, {score} AS score FROM {postings} CROSS JOIN {weights} "
            f"WHERE {in_documents}w.term = p.term AND p.scope_id = %s AND p.family = %s GROUP BY p.document_id",
            [*score_params, *postings_params, *weight_params, *in_params, scope_pk, family],
        )
    ]
