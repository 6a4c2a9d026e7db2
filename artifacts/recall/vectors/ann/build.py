"""Building and updating the dense indexes from the database (``manage.py recall_vector_index_build``).

An update loads the pair's current index file, removes the documents whose vector is no longer live (the document
removed, or its vector replaced by a later row) and adds the vectors stored since its watermark; a rebuild (or an
index that does not match its metadata) starts from empty. Either ends in a new file and a new metadata file naming
it, renamed into place, so readers switch from the old state to the new at once (``store``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import time
from dataclasses import dataclass

import numpy as np

from artifacts.models import RecallVector
from artifacts.recall import index_files
from artifacts.recall.index_files import Progress
from artifacts.recall.sql import fetch, settled_watermark
from artifacts.recall.vectors.ann import store
from artifacts.recall.vectors.ranking import ENCODING, decode_half

VECTOR_TABLE = RecallVector._meta.db_table
BATCH_VECTORS = 5000
"""Vectors read and added per step (5 MB of rows at 512 dimensions)."""


@dataclass(frozen=True, kw_only=True)
class UpdateResult(index_files.UpdateResult):
    """What one update did to one pair's index by one model: besides what every index reports, the documents it
    removed and the vectors it holds."""

    removed: int
    vectors: int


def vector_watermark(wait_seconds: float) -> int:
    """The highest vector row id below which every row is visible or never will be (``sql.settled_watermark``;
    raises ``sql.WritesOpen``)."""
    return settled_watermark(VECTOR_TABLE, wait_seconds)


def large_pairs(
    minimum_vectors: int, *, model_id: str, dimension: int, scope_pks: list[int] | None = None
) -> list[tuple[int, str, int]]:
    """(scope pk, family, vectors) of every pair with at least ``minimum_vectors`` vectors by the model."""
    if scope_pks is not None and not scope_pks:
        return []
    scope_filter = f" AND scope_id IN ({', '.join(['%s'] * len(scope_pks))})" if scope_pks else ""
    return [
        (scope_pk, family, vectors)
        for scope_pk, family, vectors in fetch(
            f"SELECT scope_id, family, COUNT(*) FROM {VECTOR_TABLE} WHERE model_id = %s AND encoding = %s "
            f"AND dimension = %s{scope_filter} GROUP BY scope_id, family HAVING COUNT(*) >= %s "
            "ORDER BY scope_id, family",
            [model_id, ENCODING, dimension, *(scope_pks or []), minimum_vectors],
        )
    ]


_PAIR = (
    f"FROM {VECTOR_TABLE} WHERE scope_id = %s AND family = %s AND model_id = %s AND encoding = %s AND dimension = %s"
)


def index_update(
    scope_pk: int,
    family: str,
    *,
    model_id: str,
    dimension: int,
    watermark: int,
    rebuild: bool = False,
    progress: Progress | None = None,
    threads: int | None = None,
) -> UpdateResult:
    """Bring one pair's index by ``model_id`` up to ``watermark`` (from ``vector_watermark``), adding vectors on
    ``threads`` threads (default ``default_threads()``); hold ``store.writer_lock()``."""
    started = time.perf_counter()
    directory = store.index_directory(scope_pk, family, model_id, dimension)
    directory.mkdir(parents=True, exist_ok=True)
    if not rebuild and (unchanged := _unchanged(directory, scope_pk, family, model_id, dimension, watermark)):
        # Nothing of the pair's written or removed since: the same file, its metadata moved to the new watermark
        # (a --follow pass over an idle 1M scope reads and writes no 1 GB file).
        store.meta_write(directory, dataclasses.replace(unchanged, watermark=watermark))
        if progress is not None:
            progress(0, 0)
        return UpdateResult(
            scope_pk=scope_pk,
            family=family,
            rebuilt=False,
            added=0,
            removed=0,
            vectors=unchanged.vectors,
            watermark=watermark,
            seconds=time.perf_counter() - started,
        )
    index, meta = (None, None) if rebuild else _current(directory, scope_pk, family, model_id, dimension, watermark)
    usable = index is not None and meta is not None
    if index is None or meta is None:
        index, previous = store.new_index(dimension), 0
    else:
        previous = meta.watermark
    pair = [scope_pk, family, model_id, ENCODING, dimension]
    removed = _reconcile(index, pair, previous) if usable else 0
    new_total = fetch(f"SELECT COUNT(*) {_PAIR} AND id > %s AND id <= %s", [*pair, previous, watermark])[0][0]
    added, after = 0, previous
    while True:
        rows = fetch(
            f"SELECT id, document_id, vector {_PAIR} AND id > %s AND id <= %s ORDER BY id LIMIT %s",
            [*pair, after, watermark, BATCH_VECTORS],
        )
        if not rows:
            break
        after = rows[-1][0]
        keys = np.fromiter((row[1] for row in rows), dtype=np.uint64, count=len(rows))
        # A document whose vector was replaced (a later row) is held with its old one: it gives way.
        held = keys[np.asarray(index.contains(keys), dtype=bool)]
        if held.size:
            index.remove(held)
        index.add(keys, decode_half([row[2] for row in rows], dimension), threads=threads or default_threads())
        added += len(rows)
        if progress is not None:
            progress(added, max(new_total, added))
    if progress is not None and not added:
        progress(0, 0)
    _written(directory, index, store.IndexMeta(scope_pk, family, model_id, dimension, watermark, len(index), "", 0, 0))
    return UpdateResult(
        scope_pk=scope_pk,
        family=family,
        rebuilt=not usable,
        added=added,
        removed=removed,
        vectors=len(index),
        watermark=watermark,
        seconds=time.perf_counter() - started,
    )


def default_threads() -> int:
    """Threads a build adds vectors on: every core but one, which it leaves to the workers it runs beside."""
    return max(1, (os.cpu_count() or 1) - 1)


def _unchanged(directory, scope_pk: int, family: str, model_id: str, dimension: int, watermark: int):
    """The metadata of the pair's index when nothing of the pair was stored since its watermark and none of its
    vectors removed (two counts), its file still of its recorded size; else None."""
    try:
        meta = store.meta_read(directory)
        size = (directory / meta.file).stat().st_size
    except (store.IndexUnusable, OSError):
        return None
    if (meta.scope_pk, meta.family, meta.model_id, meta.dimension) != (scope_pk, family, model_id, dimension):
        return None
    if size != meta.size or meta.watermark > watermark:
        return None
    pair = [scope_pk, family, model_id, ENCODING, dimension]
    if fetch(f"SELECT COUNT(*) {_PAIR} AND id > %s AND id <= %s", [*pair, meta.watermark, watermark])[0][0]:
        return None
    if fetch(f"SELECT COUNT(*) {_PAIR} AND id <= %s", [*pair, meta.watermark])[0][0] != meta.vectors:
        return None
    return meta


def _current(directory, scope_pk: int, family: str, model_id: str, dimension: int, watermark: int):
    """(the pair's index loaded for changes, its metadata), or (None, None) when there is none it can be built on:
    missing, damaged, of another pair or model, or ahead of ``watermark``."""
    try:
        meta, path = store.verified(directory, scope_pk, family, model_id, dimension)
        if meta.watermark > watermark:
            return None, None
        return store.restored(path, meta, mapped=False), meta
    except store.IndexUnusable:  # a damaged index is rebuilt from the database, its source of truth
        return None, None


def _reconcile(index, pair: list, previous: int) -> int:
    """Remove the held documents whose vector up to ``previous`` is no longer live; return how many.

    Counting first costs one index range; the ids are compared only when the counts differ.
    """
    if fetch(f"SELECT COUNT(*) {_PAIR} AND id <= %s", [*pair, previous])[0][0] == len(index):
        return 0
    live = np.asarray([row[0] for row in fetch(f"SELECT document_id {_PAIR} AND id <= %s", [*pair, previous])])
    held = np.asarray(index.keys, dtype=np.uint64)
    gone = held[~np.isin(held, live.astype(np.uint64))]
    if gone.size:
        index.remove(gone)
    return int(gone.size)


def _written(directory, index, meta: store.IndexMeta) -> None:
    """Save ``index`` as a new sealed file, point the metadata at it, and unlink every other index file of the
    directory (a worker mapping one keeps its data until it opens the new one)."""
    name = f"{meta.watermark}-{secrets.token_hex(6)}{store.SUFFIX}"
    path = directory / name
    index.save(str(path))
    store.seal(path)
    store.meta_write(
        directory,
        store.IndexMeta(
            meta.scope_pk,
            meta.family,
            meta.model_id,
            meta.dimension,
            meta.watermark,
            meta.vectors,
            name,
            path.stat().st_size,
            store.file_checksum(path),
        ),
    )
    for entry in os.scandir(directory):
        if entry.name.endswith(store.SUFFIX) and entry.name != name:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
