"""Dense ranking, pure numpy: vectors as stored (unit length, float16 little-endian bytes) and cosine top-k.

Vectors are normalized when stored, so a dot product with the normalized query is their cosine. Ties go to the lower
document id, so a ranking is the same on every run, engine and machine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ENCODING = "f16"
"""How ``RecallVector.vector`` holds a vector: ``dimension`` IEEE half floats, little-endian, unit length."""
_STORED = np.dtype("<f2")


class VectorRefused(ValueError):
    """A vector that cannot be stored: of another dimension than its model's, or not finite."""


def normalized(vector: Sequence[float] | np.ndarray, dimension: int) -> np.ndarray:
    """``vector`` as float32 of unit length (a zero vector stays zero: it is nearest to nothing)."""
    array = np.asarray(vector, dtype=np.float64)
    if array.shape != (dimension,):
        raise VectorRefused(f"a vector of shape {array.shape} where the model gives {dimension} numbers")
    if not np.isfinite(array).all():
        raise VectorRefused("a vector holds a number that is not finite")
    norm = float(np.linalg.norm(array))
    return (array / norm if norm > 0 else array).astype(np.float32)


def encode(vector: Sequence[float] | np.ndarray, dimension: int) -> bytes:
    """The stored bytes of ``vector`` (normalized, then half floats)."""
    return normalized(vector, dimension).astype(_STORED).tobytes()


def decode_half(blobs: Sequence[bytes | memoryview], dimension: int) -> np.ndarray:
    """Stored vectors as they are stored, one float16 matrix, one row each (``len(blobs)`` × ``dimension``); a
    blob is bytes, or a memoryview (a BinaryField read on PostgreSQL)."""
    if not blobs:
        return np.zeros((0, dimension), dtype=_STORED)
    joined = b"".join(bytes(blob) for blob in blobs)
    if len(joined) != len(blobs) * dimension * _STORED.itemsize:
        raise VectorRefused("a stored vector is not of its recorded dimension")
    return np.frombuffer(joined, dtype=_STORED).reshape(len(blobs), dimension)


def decode(blobs: Sequence[bytes | memoryview], dimension: int) -> np.ndarray:
    """Stored vectors as one float32 matrix, one row each (``len(blobs)`` × ``dimension``)."""
    return decode_half(blobs, dimension).astype(np.float32)


def dense_rank(
    query_vector: Sequence[float] | np.ndarray,
    matrix: np.ndarray,
    document_ids: Sequence[int] | np.ndarray,
    limit: int,
) -> list[tuple[int, float]]:
    """The ``limit`` documents nearest the query, as (document id, cosine), best first, ties by lower id."""
    ids = np.asarray(document_ids, dtype=np.int64)
    if limit <= 0 or ids.size == 0:
        return []
    if matrix.shape[0] != ids.size:
        raise ValueError(f"{matrix.shape[0]} vectors for {ids.size} document ids")
    return nearest(normalized(query_vector, matrix.shape[1]), matrix, ids, limit)


def nearest(unit_query: np.ndarray, matrix: np.ndarray, ids: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """``dense_rank`` of a query already ``normalized`` (several matrices ranked for one query normalize it once),
    over int64 ``ids`` of the matrix's rows."""
    if limit <= 0 or ids.size == 0:
        return []
    scores = matrix @ unit_query
    if limit < ids.size:
        # The k-th best score, then every document scoring at least that: ties at the cut are all kept and
        # decided by id below, so the cut never depends on argpartition's order.
        threshold = np.partition(scores, ids.size - limit)[ids.size - limit]
        keep = np.flatnonzero(scores >= threshold)
    else:
        keep = np.arange(ids.size)
    chosen = keep[np.lexsort((ids[keep], -scores[keep]))[:limit]]
    # ``tolist`` gives the same Python ints and floats as ``int()`` and ``float()`` of each element, at a third of the
    # cost.
    return list(zip(ids[chosen].tolist(), scores[chosen].tolist(), strict=True))


def similarities(
    unit_query: np.ndarray, rows: np.ndarray, ids: np.ndarray, wanted: Sequence[int]
) -> list[tuple[int, float]]:
    """(document id, exact cosine with the normalized query) of each of ``wanted`` that ``ids`` holds (``ids``
    sorted ascending, as copies keep them; ``rows`` float16 or float32), by id ascending, each id once."""
    asked = np.asarray(sorted(set(wanted)), dtype=np.int64)
    if asked.size == 0 or ids.size == 0:
        return []
    at = np.minimum(np.searchsorted(ids, asked), ids.size - 1)
    found = ids[at] == asked
    at, asked = at[found], asked[found]
    scores = rows[at].astype(np.float32) @ unit_query
    return list(zip(asked.tolist(), scores.tolist(), strict=True))


QUANTIZED_CANDIDATES = 64
"""The int8 first pass keeps at least this many documents, and at least ``QUANTIZED_DEPTH`` times the limit, for
the exact second pass (docs/benchmarks.md part 12: recall of the exact top 16 and top 64 at 1M vectors)."""
QUANTIZED_DEPTH = 4
_CHUNK_ROWS = 1024
"""Rows of int8 widened to float32 at a time for the first pass: numpy has no int8 product, so each block is
converted into a small float32 buffer (2 MB at 512 dimensions, within a core's cache) and multiplied by BLAS."""


def quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` (float16 or float32) as int8 codes and one float32 scale per row: row ≈ codes × scale, the row's
    largest magnitude mapped to 127 (a zero row: codes and scale 0)."""
    codes = np.empty(rows.shape, dtype=np.int8)
    scales = np.empty(rows.shape[0], dtype=np.float32)
    for start in range(0, rows.shape[0], _CHUNK_ROWS):
        block = rows[start : start + _CHUNK_ROWS].astype(np.float32)
        scale = np.abs(block).max(axis=1) / np.float32(127)
        divisor = np.where(scale > 0, scale, np.float32(1))
        np.rint(block / divisor[:, None], out=block)
        codes[start : start + block.shape[0]] = block
        scales[start : start + block.shape[0]] = scale
    return codes, scales


def _approximate_scores(query: np.ndarray, codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Every row's approximate cosine with the unit float32 ``query``, from its int8 codes and scale."""
    scores = np.empty(codes.shape[0], dtype=np.float32)
    buffer = np.empty((min(_CHUNK_ROWS, codes.shape[0]), codes.shape[1]), dtype=np.float32)
    for start in range(0, codes.shape[0], _CHUNK_ROWS):
        block = codes[start : start + _CHUNK_ROWS]
        widened = buffer[: block.shape[0]]
        np.copyto(widened, block, casting="unsafe")
        np.matmul(widened, query, out=scores[start : start + block.shape[0]])
    scores *= scales
    return scores


def quantized_rank(
    query_vector: Sequence[float] | np.ndarray,
    codes: np.ndarray,
    scales: np.ndarray,
    rows: np.ndarray,
    document_ids: Sequence[int] | np.ndarray,
    limit: int,
) -> list[tuple[int, float]]:
    """As ``dense_rank`` over ``rows`` (the stored float16 vectors), in two passes: the int8 ``codes`` and
    ``scales`` (``quantize``) choose the candidates (at least ``QUANTIZED_CANDIDATES``, and ``QUANTIZED_DEPTH``
    times ``limit``; ties at that cut all kept), which ``dense_rank`` then scores exactly and orders, cosine desc
    then id asc. Approximate only in which documents reach the second pass: a document whose int8 score falls
    below the candidates' is missed."""
    ids = np.asarray(document_ids, dtype=np.int64)
    if limit <= 0 or ids.size == 0:
        return []
    if not (codes.shape[0] == scales.size == rows.shape[0] == ids.size):
        raise ValueError(f"{codes.shape[0]} codes, {scales.size} scales, {rows.shape[0]} vectors, {ids.size} ids")
    return quantized_nearest(normalized(query_vector, rows.shape[1]), codes, scales, rows, ids, limit)


def quantized_nearest(
    unit_query: np.ndarray, codes: np.ndarray, scales: np.ndarray, rows: np.ndarray, ids: np.ndarray, limit: int
) -> list[tuple[int, float]]:
    """``quantized_rank`` of a query already ``normalized``, over int64 ``ids`` of the rows."""
    if limit <= 0 or ids.size == 0:
        return []
    depth = max(QUANTIZED_CANDIDATES, QUANTIZED_DEPTH * limit)
    if depth >= ids.size:
        return nearest(unit_query, rows.astype(np.float32), ids, limit)
    approximate = _approximate_scores(unit_query, codes, scales)
    threshold = np.partition(approximate, ids.size - depth)[ids.size - depth]
    keep = np.flatnonzero(approximate >= threshold)
    return nearest(unit_query, rows[keep].astype(np.float32), ids[keep], limit)
