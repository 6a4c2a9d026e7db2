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


def decode(blobs: Sequence[bytes], dimension: int) -> np.ndarray:
    """Stored vectors as one float32 matrix, one row each (``len(blobs)`` × ``dimension``)."""
    if not blobs:
        return np.zeros((0, dimension), dtype=np.float32)
    joined = b"".join(bytes(blob) for blob in blobs)
    if len(joined) != len(blobs) * dimension * _STORED.itemsize:
        raise VectorRefused("a stored vector is not of its recorded dimension")
    return np.frombuffer(joined, dtype=_STORED).reshape(len(blobs), dimension).astype(np.float32)


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
