"""Each (scope, family, model) pair's vectors kept in process memory (float32 rows, or for a large pair int8 codes
beside the float16 rows), current by the pair's corpus generation, as ``recall.resident`` keeps postings.

Correct by the same rule: a copy is keyed by its corpus row's ``generation`` (``recall.generation``: the database
renews it in the transaction of every change of the pair, whoever writes), read together with the vectors in one
statement (one snapshot). A prepare uses a copy only when the generation it reads now is the copy's, so a write to
the pair is seen by the very next prepare on every worker. A write that stores vectors must therefore renew the
pair's generation (it does when the vectors are stored with the document's own write; a backlog embedder touches
the pair's corpus row, or its vectors are seen at the pair's next write).

Statements per prepare (``ranked_pairs``): none when the caller passes the generations it already read (the BM25
statistics read them: ``bm25.bm25_queries``); else one indexed read of the pairs' corpus rows, only when this
process holds a copy of one of them. Then one statement per pair without a current copy (its vectors and its
generation). Documents without a vector by the model are simply absent.

Bounded: at most POWERCONTEXT_RESIDENT_VECTORS_MB of copies per process (counted exactly: every array a copy
holds), the least recently used dropped first; a pair larger than the whole budget is ranked from its read and not
kept. 0 keeps none (every prepare reads its pairs' vectors).

Two forms, chosen when a copy is read. Below POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM vectors (``Matrix``):
float32 rows, scanned exactly (``ranking.dense_rank``; 0.5 ms at 10k vectors of 512 dimensions, about 25 ms at
100k). From it (``Quantized``): the stored float16 rows, plus an int8 code per number and a float32 scale per row
derived from them (3/4 of float32's bytes); a first pass over the int8 rows picks candidates (at least 64, four
times the limit), rescored exactly from the float16 rows and ordered as ``dense_rank`` orders (cosine desc, id
asc). It reads a quarter of float32's bytes per scan; numpy has no int8 product, so blocks of rows are widened to
float32 in a small buffer for BLAS, and the widening, not memory, bounds it: 1.3 to 1.8 times faster than the
float32 scan from 25k to 1M, with recall of the exact top 16 and top 64 measured in docs/benchmarks.md part 12
(``bench/dense_index.py``). Both forms are derived from the same statement's rows, so the generation rule holds
for both.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np
from django.db import connection

from artifacts.models import RecallVector
from artifacts.recall import sql
from artifacts.recall.conf import recall_settings
from artifacts.recall.tables import CORPUS_TABLE
from artifacts.recall.vectors.ranking import (
    ENCODING,
    decode_half,
    dense_rank,
    nearest,
    normalized,
    quantize,
    quantized_nearest,
    quantized_rank,
    similarities,
)
from infrastructure import metrics

Pair = tuple[str, int]
"""(family, scope pk)."""
VECTOR_TABLE = RecallVector._meta.db_table
_blas: list = []
"""Every scan runs on one BLAS thread: a matrix-vector product is bound by memory, and threads only contend (10,000 x
512 on a busy 2-core machine: 4 ms threaded, 0.8 ms on one) or, for a small pair, wake up for nothing (1,000 x 512:
about 0.4 ms a scan inside a prepare, threaded); the limit costs 7 us. The packaged model sets its own thread count
the same way (threadpoolctl), per call."""


def budget_bytes() -> int:
    """The process's memory budget for matrices, from POWERCONTEXT_RESIDENT_VECTORS_MB (0: none kept)."""
    return int(recall_settings().resident_vectors_mb * 1024 * 1024)


def quantized_from() -> int:
    """The fewest vectors a pair holds to be kept quantized, from POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM (0:
    never)."""
    return int(recall_settings().resident_vectors_quantized_from)


class Matrix:
    """One pair's vectors by one model at one generation: document ids and their unit float32 rows."""

    __slots__ = ("generation", "ids", "matrix", "size")

    def __init__(self, generation: int, ids: np.ndarray, matrix: np.ndarray) -> None:
        self.generation = generation
        self.ids = ids
        self.matrix = matrix
        self.size = ids.nbytes + matrix.nbytes

    def ranked(self, query_vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """The first ``limit`` (document id, cosine), cosine desc then document id asc."""
        with _one_blas_thread():
            return dense_rank(query_vector, self.matrix, self.ids, limit)

    def nearest(self, unit_query: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """``ranked`` of a normalized query, on the caller's BLAS thread limit (``ranked_all``)."""
        return nearest(unit_query, self.matrix, self.ids, limit)

    def similarities(self, unit_query: np.ndarray, wanted: Sequence[int]) -> list[tuple[int, float]]:
        """(document id, exact cosine) of each of ``wanted`` this copy holds, by id."""
        return similarities(unit_query, self.matrix, self.ids, wanted)

    @property
    def dimension(self) -> int:
        return self.matrix.shape[1]


class Quantized:
    """One large pair's vectors by one model at one generation: document ids, their stored float16 rows, and an
    int8 copy with one scale per row for the first pass (``ranking.quantized_rank``)."""

    __slots__ = ("codes", "generation", "ids", "rows", "scales", "size")

    def __init__(self, generation: int, ids: np.ndarray, rows: np.ndarray) -> None:
        self.generation = generation
        self.ids = ids
        self.rows = rows
        self.codes, self.scales = quantize(rows)
        self.size = ids.nbytes + rows.nbytes + self.codes.nbytes + self.scales.nbytes

    def ranked(self, query_vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """The first ``limit`` (document id, cosine), cosine desc then document id asc; approximate only in that a
        document the int8 pass ranks far below its exact place may be missed."""
        with _one_blas_thread():
            return quantized_rank(query_vector, self.codes, self.scales, self.rows, self.ids, limit)

    def nearest(self, unit_query: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """``ranked`` of a normalized query, on the caller's BLAS thread limit (``ranked_all``)."""
        return quantized_nearest(unit_query, self.codes, self.scales, self.rows, self.ids, limit)

    def similarities(self, unit_query: np.ndarray, wanted: Sequence[int]) -> list[tuple[int, float]]:
        """(document id, exact cosine from the float16 rows) of each of ``wanted`` this copy holds, by id."""
        return similarities(unit_query, self.rows, self.ids, wanted)

    @property
    def dimension(self) -> int:
        return self.rows.shape[1]


def ranked_all(
    matrices: Mapping[Pair, Matrix | Quantized], query_vector: np.ndarray, limits: Mapping[str, int]
) -> dict[Pair, list[tuple[int, float]]]:
    """``ranked`` of each pair's copy, its first ``limits[family]``: the query normalized once and every scan under
    one limit to one BLAS thread (setting the limit costs about as much as a scan of 1,000 vectors)."""
    if not matrices:
        return {}
    unit = normalized(query_vector, next(iter(matrices.values())).dimension)
    with _one_blas_thread():
        return {pair: held.nearest(unit, limits[pair[0]]) for pair, held in matrices.items()}


def similarities_all(
    matrices: Mapping[Pair, Matrix | Quantized], query_vector: np.ndarray, wanted: Mapping[Pair, Sequence[int]]
) -> dict[Pair, list[tuple[int, float]]]:
    """Per pair with a copy, the exact cosine of each of its ``wanted`` documents that has a vector, by id: a row
    subset of the copy times the query, no scan."""
    held = {pair: matrices[pair] for pair, ids in wanted.items() if ids and pair in matrices}
    if not held:
        return {}
    unit = normalized(query_vector, next(iter(held.values())).dimension)
    with _one_blas_thread():
        return {pair: copy.similarities(unit, wanted[pair]) for pair, copy in held.items()}


def _one_blas_thread():
    if not _blas:
        from threadpoolctl import ThreadpoolController

        _blas.append(ThreadpoolController())  # found once: it inspects the loaded libraries
    return _blas[0].limit(limits=1, user_api="blas")


class _Matrices:
    """The process's matrices, least recently used first, within a budget in bytes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: OrderedDict[tuple, Matrix | Quantized] = OrderedDict()
        self.size = 0

    def get(self, key: tuple) -> Matrix | Quantized | None:
        with self.lock:
            held = self.held.get(key)
            if held is not None:
                self.held.move_to_end(key)
            return held

    def holds_any(self, keys: Sequence[tuple]) -> bool:
        with self.lock:
            return any(key in self.held for key in keys)

    def put(self, key: tuple, matrix: Matrix | Quantized, budget: int) -> None:
        with self.lock:
            if (old := self.held.pop(key, None)) is not None:
                self.size -= old.size
            if matrix.size > budget:
                return
            self.held[key] = matrix
            self.size += matrix.size
            while self.size > budget and self.held:
                _, dropped = self.held.popitem(last=False)
                self.size -= dropped.size
                metrics.RECALL_DENSE_RESIDENT.labels(event="eviction").inc()

    def clear(self) -> None:
        with self.lock:
            self.held.clear()
            self.size = 0


MATRICES = _Matrices()


def _key(pair: Pair, model_id: str, dimension: int) -> tuple:
    # The dimension too: a copy read at another dimension by the same model name is never served as current.
    return (connection.alias, pair[0], pair[1], model_id, dimension)


def generations(pairs: Sequence[Pair]) -> dict[Pair, int]:
    """The pairs' current generations, in one statement (pairs without a corpus row, so without documents, are
    absent)."""
    if not pairs:
        return {}
    families, scope_pks = sorted({family for family, _ in pairs}), sorted({pk for _, pk in pairs})
    scope_sql, scope_params = sql.one_of("scope_id", scope_pks, "bigint")
    family_sql, family_params = sql.one_of("family", families, "text")
    wanted = set(pairs)
    rows = sql.fetch(
        f"SELECT family, scope_id, generation FROM {CORPUS_TABLE} WHERE {scope_sql} AND {family_sql}",
        [*scope_params, *family_params],
    )
    return {(family, pk): generation for family, pk, generation in rows if (family, pk) in wanted}


def load(pair: Pair, model_id: str, dimension: int) -> Matrix | Quantized | None:
    """The pair's vectors by ``model_id`` (of ``dimension``, stored as ``ENCODING``) and its generation, read in one
    statement, as float32 rows or, from ``quantized_from()`` vectors, quantized; None when the pair has no corpus
    row."""
    family, scope_pk = pair
    rows = sql.fetch(
        f"SELECT document_id, vector, NULL FROM {VECTOR_TABLE} WHERE scope_id = %s AND family = %s "
        "AND model_id = %s AND encoding = %s AND dimension = %s "
        f"UNION ALL SELECT NULL, NULL, generation FROM {CORPUS_TABLE} WHERE scope_id = %s AND family = %s",
        [scope_pk, family, model_id, ENCODING, dimension, scope_pk, family],
    )
    generation = None
    ids: list[int] = []
    blobs: list[bytes] = []
    for document_id, vector, row_generation in rows:
        if document_id is None:
            generation = row_generation
        else:
            ids.append(document_id)
            blobs.append(vector)
    if generation is None:
        return None
    order = np.argsort(np.asarray(ids, dtype=np.int64), kind="stable")
    vectors = decode_half(blobs, dimension)[order]
    ordered_ids = np.asarray(ids, dtype=np.int64)[order]
    if (threshold := quantized_from()) and len(ids) >= threshold:
        return Quantized(generation, ordered_ids, np.ascontiguousarray(vectors))
    return Matrix(generation, ordered_ids, np.ascontiguousarray(vectors, dtype=np.float32))


def current_matrices(
    pairs: Sequence[Pair],
    *,
    model_id: str,
    dimension: int,
    known_generations: Mapping[Pair, int] | None = None,
) -> dict[Pair, Matrix | Quantized]:
    """Per pair with documents, its matrix at its current generation: this process's copy when current (a hit),
    else read (a miss) and kept within the budget."""
    budget = budget_bytes()
    keys = {pair: _key(pair, model_id, dimension) for pair in pairs}
    current: Mapping[Pair, int] | None = known_generations
    if current is None and budget and MATRICES.holds_any(list(keys.values())):
        current = generations(pairs)
    found: dict[Pair, Matrix | Quantized] = {}
    for pair in pairs:
        if current is not None:
            if pair not in current:
                continue  # no corpus row: no documents
            held = MATRICES.get(keys[pair]) if budget else None
            if held is not None and held.generation == current[pair]:
                metrics.RECALL_DENSE_RESIDENT.labels(event="hit").inc()
                found[pair] = held
                continue
        metrics.RECALL_DENSE_RESIDENT.labels(event="miss").inc()
        matrix = load(pair, model_id, dimension)
        if matrix is None:
            continue
        if budget:
            MATRICES.put(keys[pair], matrix, budget)
        found[pair] = matrix
    return found
