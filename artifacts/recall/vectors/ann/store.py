"""The dense index on disk: one usearch HNSW file per (scope, family, model) pair, its metadata, and this process's
memory-mapped views of them.

Layout under ``POWERCONTEXT_SEARCH_INDEX_DIR`` (beside the lexical engine's ``v1/``)::

    dense-v1/.writer.lock                              one builder at a time on this machine (flock)
    dense-v1/<scope pk>-<family>-<model key>/meta.json what the index holds (written aside and renamed)
    dense-v1/<scope pk>-<family>-<model key>/<token>.usearch   the HNSW graph and the vectors, keyed by document id

A build writes a new ``<token>.usearch`` file, then renames a new ``meta.json`` naming it over the old one, then
unlinks the file the old metadata named: a worker still searching the old file keeps reading what it mapped (the
data of an unlinked file lives until its last mapping goes), and the next query sees the new metadata (a stat per
query, as the lexical engine's readers do). Files are sealed read-only once written, so that a copy or truncation
over a live index by the service user fails instead of killing the workers that map it (SIGBUS).

A view is used only when its metadata names this pair, model and dimension, the file has the size the metadata
records, and usearch reads it as an index of that dimension holding as many vectors as the metadata counts;
otherwise the pair is ranked by the exact scan, counted by reason (``FALLBACK_REASONS``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import stat
import threading
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from artifacts.recall import index_files, locks
from artifacts.recall.conf import recall_settings
from artifacts.recall.index_files import Refused

FORMAT_VERSION = 1
META_FILE = "meta.json"
SUFFIX = ".usearch"
logger = logging.getLogger(__name__)

CONNECTIVITY = 16
"""Edges per node of the HNSW graph (usearch's M). At 100k vectors 32 gave no better recall after rescoring than 16
(docs/benchmarks.md, "Dense index for large scopes"); not measured at 1M, where a denser graph may let a smaller
``EXPANSION_SEARCH`` do."""
EXPANSION_ADD = 128
"""Candidates kept while a vector is linked into the graph (efConstruction): a better graph for a slower build."""
EXPANSION_SEARCH = 2048
"""Candidates kept while searching (ef) an index of a million vectors or more (``expansion_search``), at least as many
as a query asks for (``query.candidates``). At 1M vectors (docs/benchmarks.md, "Dense index for large scopes") 512
left 8 of 200 queries in a wrong region of the graph (recall@16 0.928, worst query 0); 2,048 kept 99.1 % of the exact
top 16 after rescoring (worst query 0.75) for a 6.5 ms search; 8,192 99.5 % for 28 ms."""
EXPANSION_SEARCH_MIN = 512
"""ef of an index of up to 250,000 vectors: at 100,000, 512 kept 99.97 % of the exact top 16 (worst query 0.94) in
a quarter of 2,048's search time."""
EXPANSION_SEARCH_AT = 1_000_000
"""The index size from which ``EXPANSION_SEARCH`` is kept; below it ef shrinks in proportion (a search wanders
further in a larger graph), down to ``EXPANSION_SEARCH_MIN``."""
SCALAR_KIND = "f16"
"""How the index stores each vector for the graph's distances: half floats, as the database stores them. int8 halves
the file, but usearch quantizes the unit vector itself (a component times 127: at 512 dimensions most codes are
within ±10), and at 1M vectors its graph lost the exact top 16 of some queries altogether (recall@16 0.92, worst
query 0; docs/benchmarks.md)."""

FALLBACK_REASONS = ("missing", "corrupt", "unreadable", "mismatch", "stale", "error")
"""Every label of ``powercontext_recall_dense_index_fallbacks_total`` (docs/metrics.md): a fixed set."""


class IndexUnusable(index_files.IndexUnusable):
    """The index cannot answer for this pair; ``reason`` (one of ``FALLBACK_REASONS``) labels the fallback metric."""


@dataclass(frozen=True)
class IndexMeta:
    """What one index file holds: the vector (RecallVector row) of every live document of the pair by ``model_id``
    whose row id is at most ``watermark``, ``vectors`` of them, keyed by document id."""

    scope_pk: int
    family: str
    model_id: str
    dimension: int
    watermark: int
    vectors: int
    file: str
    """The index file's name in the pair's directory."""
    size: int
    """The index file's size in bytes: a file of another size (truncated, written over) is not mapped."""
    checksum: int
    """The CRC-32 of the index file: one written over in place with other bytes is not mapped."""


def dense_root() -> Path:
    """This machine's dense indexes' versioned root directory (the setting must be set)."""
    directory = recall_settings().search_index_dir
    if not directory:
        raise TypeError("POWERCONTEXT_SEARCH_INDEX_DIR is unset")
    return Path(directory) / f"dense-v{FORMAT_VERSION}"


def model_key(model_id: str, dimension: int) -> str:
    """A file-name-safe name of a model and dimension (a model id may hold any character)."""
    return hashlib.sha256(f"{model_id}\0{dimension}".encode()).hexdigest()[:16]


def index_directory(scope_pk: int, family: str, model_id: str, dimension: int) -> Path:
    """The directory of one pair's index by one model."""
    return dense_root() / f"{scope_pk}-{family}-{model_key(model_id, dimension)}"


def meta_read(directory: Path) -> IndexMeta:
    """The metadata in ``directory``; raises ``IndexUnusable`` (missing, unreadable, corrupt)."""
    try:
        text = (directory / META_FILE).read_text()
    except FileNotFoundError:
        raise IndexUnusable("missing") from None
    except OSError as exc:
        raise IndexUnusable("unreadable", str(exc)) from exc
    try:
        values: dict[str, Any] = json.loads(text)
        if values.pop("format") != FORMAT_VERSION:
            raise ValueError("another format")
        meta = IndexMeta(**values)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise IndexUnusable("corrupt", f"metadata: {exc}") from exc
    integers = (meta.scope_pk, meta.dimension, meta.watermark, meta.vectors, meta.size, meta.checksum)
    # Bound as 64-bit integers in SQL: a damaged file must not turn into an error there.
    if not all(type(value) is int and 0 <= value < 2**63 for value in integers) or "/" in meta.file:
        raise IndexUnusable("corrupt", "metadata out of range")
    return meta


def meta_write(directory: Path, meta: IndexMeta) -> None:
    """Replace the metadata in ``directory``: written aside and renamed, so a reader never sees half a file."""
    temporary = directory / f"{META_FILE}.tmp"
    with contextlib.suppress(FileNotFoundError):  # left by a crash, and sealed: not writable
        os.unlink(temporary)
    temporary.write_text(json.dumps({"format": FORMAT_VERSION, **asdict(meta)}))
    seal(temporary)
    os.replace(temporary, directory / META_FILE)


CHECKSUM_CHUNK = 16 * 1024 * 1024


def file_checksum(path: Path) -> int:
    """The CRC-32 of a file, read in chunks (into the page cache the workers' mappings share, not into a mapping:
    the check adds nothing to a process's resident memory)."""
    checksum = 0
    with open(path, "rb") as file:
        while chunk := file.read(CHECKSUM_CHUNK):
            checksum = zlib.crc32(chunk, checksum)
    return checksum


def seal(path: Path) -> None:
    """Remove the write permission of a written file (read permissions kept)."""
    mode = path.stat().st_mode
    os.chmod(path, stat.S_IMODE(mode) & ~0o222)


def writer_lock():
    """Hold this machine's dense index writer lock (blocking): one build or update at a time."""
    return locks.directory_lock(dense_root())


def new_index(dimension: int):
    """An empty in-memory HNSW index of ``dimension`` (cosine), as every build makes it."""
    from usearch.index import Index

    return Index(
        ndim=dimension,
        metric="cos",
        dtype=SCALAR_KIND,
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )


@dataclass
class View:
    """One pair's index file mapped into this process's memory (shared with every process mapping it), with its
    metadata."""

    stamp: tuple[int, int, int]
    meta: IndexMeta
    index: Any
    """A ``usearch.index.Index`` viewing the file: searched through ``search``."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def search(self, unit_query, count: int):
        """The keys of the ``count`` nearest vectors the graph finds, nearest first. One search at a time per view: a
        single-threaded usearch search uses the index's first thread context, which two threads of a worker would
        share (a search costs about a millisecond)."""
        with self.lock:
            return self.index.search(unit_query, count, threads=1).keys


VIEWS_MAX = 256
"""Index files one process keeps mapped (least recently used first out)."""
_views: dict[Path, View | Refused] = {}
_views_lock = threading.Lock()


def view(scope_pk: int, family: str, model_id: str, dimension: int) -> View:
    """The mapped index of one pair by one model at its latest build; raises ``IndexUnusable``.

    A stat of the metadata file per call: a new build (a renamed metadata file) is seen by the next query, and an
    index found unusable is not opened again until its metadata changes.
    """
    directory = index_directory(scope_pk, family, model_id, dimension)
    try:
        status = os.stat(directory / META_FILE)
    except FileNotFoundError:
        raise IndexUnusable("missing") from None
    except OSError as exc:
        raise IndexUnusable("unreadable", str(exc)) from exc
    stamp = (status.st_ino, status.st_mtime_ns, status.st_size)
    cached = _views.get(directory)
    if cached is not None and cached.stamp == stamp:
        if isinstance(cached, Refused):
            raise IndexUnusable(cached.reason, cached.detail)
        return cached
    if isinstance(cached, View) and (moved := _watermark_moved(directory, cached)) is not None:
        return moved
    try:
        opened = View(stamp, *_opened(directory, scope_pk, family, model_id, dimension))
    except IndexUnusable as exc:
        _keep(directory, Refused(stamp, exc.reason, exc.detail))
        logger.warning("dense index %s not used: %s", directory, exc)
        raise
    _keep(directory, opened)
    return opened


def _watermark_moved(directory: Path, cached: View) -> View | None:
    """``cached`` with the directory's new metadata when that only moves the watermark of the same file (an update
    that found nothing to add or remove): the file already checked and mapped is kept, not read again."""
    try:
        # The stat first: a metadata file replaced in between leaves an older stamp, looked at again next time.
        status = os.stat(directory / META_FILE)
        meta = meta_read(directory)
    except (IndexUnusable, OSError):
        return None
    if dataclasses.replace(meta, watermark=cached.meta.watermark) != cached.meta:
        return None
    moved = View((status.st_ino, status.st_mtime_ns, status.st_size), meta, cached.index, cached.lock)
    _keep(directory, moved)
    return moved


def _keep(directory: Path, found: View | Refused) -> None:
    with _views_lock:
        _views.pop(directory, None)
        _views[directory] = found
        while len(_views) > VIEWS_MAX:
            del _views[next(iter(_views))]


def views_forget() -> None:
    """Unmap every index this process holds (tests, and a process about to fork workers)."""
    with _views_lock:
        _views.clear()


def verified(directory: Path, scope_pk: int, family: str, model_id: str, dimension: int) -> tuple[IndexMeta, Path]:
    """(metadata, index file) in ``directory``, the metadata naming this pair and model and the file holding the
    bytes its build wrote; raises ``IndexUnusable``."""
    meta = meta_read(directory)
    if (meta.scope_pk, meta.family, meta.model_id, meta.dimension) != (scope_pk, family, model_id, dimension):
        raise IndexUnusable("mismatch", f"built for scope #{meta.scope_pk} {meta.family} by {meta.model_id}")
    path = directory / meta.file
    try:
        size = path.stat().st_size
        # Checked before usearch reads it: a truncated file is read past its end, and garbage where the graph's
        # links should be could send its reads anywhere. Once per build and process (0.8 s for 1.1 GB from the cache).
        checksum = file_checksum(path) if size == meta.size else None
    except FileNotFoundError:
        raise IndexUnusable("missing", f"{meta.file} is gone") from None
    except OSError as exc:
        raise IndexUnusable("unreadable", str(exc)) from exc
    if size != meta.size:
        raise IndexUnusable("corrupt", f"{meta.file} holds {size} bytes, its metadata says {meta.size}")
    if checksum != meta.checksum:
        raise IndexUnusable("corrupt", f"{meta.file} does not hold the bytes its build wrote (checksum)")
    return meta, path


def restored(path: Path, meta: IndexMeta, *, mapped: bool):
    """The usearch index in ``path`` (``verified``), mapped or loaded into memory; raises ``IndexUnusable`` when usearch
    does not read it as an index of the metadata's dimension holding as many vectors as it counts."""
    from usearch.index import Index

    try:
        index = Index.restore(str(path), view=mapped)
    except Exception as exc:  # usearch reports a file it cannot read as a RuntimeError or ValueError
        raise IndexUnusable("corrupt", str(exc)) from exc
    if index is None or index.ndim != meta.dimension or len(index) != meta.vectors:
        held = "nothing" if index is None else f"{len(index)} vectors of {index.ndim} dimensions"
        raise IndexUnusable("corrupt", f"{meta.file} holds {held}, its metadata counts {meta.vectors}")
    # usearch declares the setter apart from its property (after another one): mypy takes it for read-only.
    index.expansion_search = expansion_search(meta.vectors)  # type: ignore[misc]
    return index


def expansion_search(vectors: int) -> int:
    """The ef a search of an index of ``vectors`` keeps: ``EXPANSION_SEARCH_MIN`` up to 250,000 vectors, growing in
    proportion to ``EXPANSION_SEARCH`` at ``EXPANSION_SEARCH_AT`` and beyond."""
    return min(EXPANSION_SEARCH, max(EXPANSION_SEARCH_MIN, vectors * EXPANSION_SEARCH // EXPANSION_SEARCH_AT))


def _opened(directory: Path, scope_pk: int, family: str, model_id: str, dimension: int):
    """(metadata, mapped index) of the index in ``directory``, checked against the pair; raises ``IndexUnusable``."""
    meta, path = verified(directory, scope_pk, family, model_id, dimension)
    return meta, restored(path, meta, mapped=True)
