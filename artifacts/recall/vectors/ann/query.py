"""Ranking a large pair's vectors with its index: candidates from the HNSW graph, the unindexed tail, exact
rescoring, the fallback to the exact scan.

The graph proposes ``candidates(limit)`` documents (at least ``CANDIDATES``, ``DEPTH`` times the limit). One
statement then reads, from the database, the stored vectors of those still live with the row the index holds (id up
to its watermark), every vector stored since the watermark (the tail, at most POWERCONTEXT_SEARCH_INDEX_MAX_LAG of
them), and the vectors of the documents whose exact cosine the caller wants. All are scored exactly (the unit query
times the stored float16 row, as the exact scan scores it) and ordered as ``ranking.dense_rank`` orders (cosine
desc, document id asc): a document the index holds is found in the database once at most (one vector per document
and model), and one written since the build comes from the tail, so none is lost or counted twice. Approximate only
in which indexed documents are proposed: one the graph ranks far below its exact place may be missed (recall of the
exact top 16 and top 64 in docs/benchmarks.md).

When fewer than half the candidates are still live (documents removed since the build), the graph is asked again
for four times as many, up to all it holds, twice at most: an index whose candidates are still mostly gone then is
too far behind (most of its documents removed since its build) and, like one that is missing, damaged, built for
another model or with a tail over the lag limit, leaves the pair to the exact scan, counted
(``powercontext_recall_dense_index_fallbacks_total``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import DatabaseError

from artifacts.models import RecallVector
from artifacts.recall.conf import recall_settings
from artifacts.recall.sql import fetch, pg_array, postgresql
from artifacts.recall.vectors.ann import store
from artifacts.recall.vectors.ranking import ENCODING, decode_half, nearest, similarities
from infrastructure import metrics

Pair = tuple[str, int]
"""(family, scope pk)."""
VECTOR_TABLE = RecallVector._meta.db_table
CANDIDATES = 64
"""The fewest documents the graph proposes for exact rescoring (as the quantized scan's first pass keeps)."""
DEPTH = 2
"""Candidates per document asked for. The index ranks by the same float16 vectors the database holds, so its order
differs from the exact one only by rounding: twice the limit is margin enough (at 100,000 vectors recall of the
exact top 64 was 0.9987 with 2 and 1.0000 with 4), and each candidate is a stored vector the statement reads back
(on PostgreSQL 4 cost a 100,000-entry hybrid prepare 21 ms p50 against 15 with 2, docs/benchmarks.md)."""
DEEPER = 2
"""Times the graph is asked again, for four times as many, when most candidates were removed since the build."""
_CANDIDATE, _TAIL, _WANTED = 0, 1, 2
logger = logging.getLogger(__name__)


def candidates(limit: int) -> int:
    """How many documents the graph proposes for a ranking of ``limit``."""
    return max(CANDIDATES, DEPTH * limit)


def enabled() -> bool:
    """Whether dense indexes are consulted at all (they live beside the lexical engine's, so its directory setting
    switches both)."""
    return bool(recall_settings().search_index_dir)


@dataclass
class IndexAnswer:
    """The pairs the indexes answered: each one's ranking and the exact cosines of its wanted documents."""

    ranked: dict[Pair, list[tuple[int, float]]] = field(default_factory=dict)
    similarities: dict[Pair, list[tuple[int, float]]] = field(default_factory=dict)
    missing: set[Pair] = field(default_factory=set)
    """Pairs without an index: a fallback only if the pair is large enough to have one (``count_missing``)."""


def ranked_by_index(
    pairs: Sequence[Pair],
    unit_query: np.ndarray,
    *,
    model_id: str,
    limits: Mapping[str, int],
    wanted: Mapping[Pair, Sequence[int]] | None = None,
) -> IndexAnswer:
    """Per pair of ``pairs`` whose index is usable and holds at least POWERCONTEXT_DENSE_INDEX_MIN_VECTORS vectors by
    ``model_id``, its first ``limits[family]`` (document id, cosine) nearest the normalized ``unit_query``, and the
    exact cosine of each of its ``wanted`` documents with a vector, by id. Pairs absent are the exact scan's."""
    answer = IndexAnswer()
    if not enabled():
        return answer
    threshold = recall_settings().dense_index_min_vectors
    dimension = int(unit_query.shape[0])
    for pair in pairs:
        family, scope_pk = pair
        try:
            opened = store.view(scope_pk, family, model_id, dimension)
        except store.IndexUnusable as exc:
            if exc.reason == "missing":  # as a pair below the threshold: counted once its size is known
                answer.missing.add(pair)
            else:
                _fallback(exc.reason)
            continue
        if opened.meta.vectors < threshold:
            continue
        try:
            ranked, scored = _ranked(opened, unit_query, limits[family], (wanted or {}).get(pair, ()))
        except store.IndexUnusable as exc:
            _fallback(exc.reason)
            logger.info("dense index of scope %s %s not used: %s", scope_pk, family, exc)
            continue
        except DatabaseError:
            raise
        except Exception as exc:  # the exact scan answers whatever went wrong with the index
            _fallback("error")
            logger.warning("dense index of scope %s %s failed: %s", scope_pk, family, exc, exc_info=True)
            continue
        metrics.RECALL_DENSE_INDEX_ANSWERS.inc()
        answer.ranked[pair] = ranked
        if scored is not None:
            answer.similarities[pair] = scored
    return answer


def _ranked(
    opened: store.View, unit_query: np.ndarray, limit: int, wanted: Sequence[int]
) -> tuple[list[tuple[int, float]], list[tuple[int, float]] | None]:
    """(ranking, wanted cosines or None) of one pair from its index and the database."""
    meta, held = opened.meta, len(opened.index)
    asked = min(candidates(limit), held)
    lag = recall_settings().search_index_max_lag
    for deeper in range(DEEPER + 1):
        found = opened.search(unit_query, asked) if asked else np.zeros(0, np.uint64)
        rows = _rows(meta, found.astype(np.int64).tolist(), wanted, lag)
        live = sum(1 for kind, _, _ in rows if kind == _CANDIDATE)
        # Documents removed since the build hold slots: ask deeper while they hold over half of them.
        if live * 2 >= asked or asked >= held:
            break
        if deeper == DEEPER:
            raise store.IndexUnusable("stale", f"{asked - live} of its {asked} candidates removed since its build")
        asked = min(asked * 4, held)
    if sum(1 for kind, _, _ in rows if kind == _TAIL) > lag:
        raise store.IndexUnusable("stale", f"over {lag} vectors stored since its build")
    ranked_rows = [(document, vector) for kind, document, vector in rows if kind != _WANTED]
    ranked = _scored_nearest(unit_query, ranked_rows, meta.dimension, limit)
    if not wanted:
        return ranked, None
    wanted_rows = sorted((document, vector) for kind, document, vector in rows if kind == _WANTED)
    ids = np.asarray([document for document, _ in wanted_rows], dtype=np.int64)
    vectors = decode_half([vector for _, vector in wanted_rows], meta.dimension)
    return ranked, similarities(unit_query, vectors, ids, wanted)


def _scored_nearest(
    unit_query: np.ndarray, rows: list[tuple[int, bytes]], dimension: int, limit: int
) -> list[tuple[int, float]]:
    ids = np.asarray([document for document, _ in rows], dtype=np.int64)
    vectors = decode_half([vector for _, vector in rows], dimension).astype(np.float32)
    return nearest(unit_query, vectors, ids, limit)


def _rows(meta: store.IndexMeta, found: list[int], wanted: Sequence[int], lag: int) -> list[tuple[int, int, bytes]]:
    """(kind, document id, stored vector) of the live candidates, the tail (at most ``lag`` + 1 rows: one more tells
    it is over) and the wanted documents, in one statement."""
    where = "v.scope_id = %s AND v.family = %s AND v.encoding = %s AND v.dimension = %s"
    pair = [meta.scope_pk, meta.family, ENCODING, meta.dimension]
    candidates_sql, candidates_params = _by_document(_CANDIDATE, found, meta.model_id)
    wanted_sql, wanted_params = _by_document(_WANTED, wanted, meta.model_id)
    rows = fetch(
        f"{candidates_sql} AND {where} AND v.id <= %s "
        f"UNION ALL SELECT * FROM (SELECT {_TAIL}, v.document_id, v.vector FROM {VECTOR_TABLE} AS v "
        f"WHERE v.model_id = %s AND {where} AND v.id > %s ORDER BY v.id LIMIT %s) AS tail "
        f"UNION ALL {wanted_sql} AND {where}",
        [
            *candidates_params,
            *pair,
            meta.watermark,
            meta.model_id,
            *pair,
            meta.watermark,
            lag + 1,
            *wanted_params,
            *pair,
        ],
    )
    # A BinaryField read on PostgreSQL is a memoryview: ``decode_half`` takes either.
    return [(int(kind), int(document), vector) for kind, document, vector in rows]


def _by_document(kind: int, documents: Sequence[int], model_id: str) -> tuple[str, list]:
    """A part selecting (``kind``, document id, vector) of the vectors by ``model_id`` of ``documents``, ending in a
    WHERE the caller continues with ``AND``: looked up one by one by the unique index (document, model), where the
    planners would rather range over the whole pair's rows (SQLite: 17 ms at 10,000 vectors instead of under 1).
    SQLite loops over the ids (CROSS JOIN fixes the order); PostgreSQL probes the index per array element."""
    if postgresql():
        return (
            f"SELECT {kind}, v.document_id, v.vector FROM {VECTOR_TABLE} AS v "
            "WHERE v.document_id = ANY(%s::bigint[]) AND v.model_id = %s",
            [pg_array(documents, "bigint"), model_id],
        )
    return (
        f"SELECT {kind}, v.document_id, v.vector FROM json_each(%s) AS d CROSS JOIN {VECTOR_TABLE} AS v "
        "WHERE v.document_id = d.value AND v.model_id = %s",
        [json.dumps(list(documents)), model_id],
    )


def count_missing(answer: IndexAnswer, copies: Mapping[Pair, Any]) -> None:
    """Count a fallback for each pair without an index whose copy (``resident``, read for the exact scan) holds at
    least POWERCONTEXT_DENSE_INDEX_MIN_VECTORS vectors: its index should have answered."""
    if not answer.missing:
        return
    threshold = recall_settings().dense_index_min_vectors
    for pair in answer.missing:
        if (copy := copies.get(pair)) is not None and copy.ids.size >= threshold:
            _fallback("missing")
            logger.info("dense index of scope %s %s missing: ranked by the exact scan", pair[1], pair[0])


def _fallback(reason: str) -> None:
    metrics.RECALL_DENSE_INDEX_FALLBACKS.labels(reason=reason).inc()
