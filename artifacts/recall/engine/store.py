"""The engine index on disk: one tantivy index per scope and family, its metadata, readers and writer lock.

Layout under ``POWERCONTEXT_SEARCH_INDEX_DIR``::

    v1/.writer.lock          one writer at a time on this machine (flock)
    v1/<scope pk>-<family>/  a tantivy index: one document per RecallDocument, plus one metadata document
    v1/<scope pk>-<family>/ids.bin   the RecallDocument ids it holds (the writer's view, for deletions)

Documents are indexed as the database's own terms (the postings, each repeated term-frequency times,
split on spaces), so the engine sees exactly the stems and lengths SQL ranks; it never tokenizes text.
The metadata document (``doc_id`` 0; RecallDocument ids start at 1) is committed with the documents, so a
reader always sees the watermark that belongs to the segments it searches. It names the scope and family it was
built for, and a reader checks that the segments hold as many documents as it says (``reader``): an index copied
or written over from elsewhere is not used.

The files themselves (sealed once committed, read-only directories): ``files``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import tempfile
import threading
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import tantivy

from artifacts.recall import index_files, locks
from artifacts.recall.conf import recall_settings
from artifacts.recall.engine import files
from artifacts.recall.index_files import Refused

FORMAT_VERSION = 1
META_DOC_ID = 0
_IDS_FILE = "ids.bin"
logger = logging.getLogger(__name__)


FALLBACK_REASONS = ("missing", "corrupt", "unreadable", "panic", "mismatch", "stale", "error", "unproven")
"""Every label of ``powercontext_recall_index_fallbacks_total`` (docs/metrics.md): a fixed set."""


class IndexUnusable(index_files.IndexUnusable):
    """The index cannot answer for this scope and family; ``reason`` (one of ``FALLBACK_REASONS``) labels the
    fallback metric."""


@dataclass(frozen=True)
class IndexMeta:
    """What one commit holds: every live document of the scope and family with id ≤ ``watermark``
    at the time of the update, ``documents`` of them."""

    watermark: int
    documents: int
    longest: int | None = None
    """The most terms any document it holds has (None from a build before it was recorded): bounds how far the
    engine's one-byte lengths are rounded (``bounds.length_kept``)."""
    scope_pk: int | None = None
    family: str | None = None
    """The scope and family it was built for (None from a build before they were recorded: not used until its next
    update records them)."""


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    # Frequencies without positions: BM25 needs nothing more, and the index stays small.
    builder.add_text_field("text", stored=False, tokenizer_name="whitespace", index_option="freq")
    builder.add_integer_field("doc_id", stored=False, indexed=True, fast=True)
    builder.add_text_field("meta", stored=True, tokenizer_name="raw", index_option="basic")
    return builder.build()


SCHEMA = _schema()


def index_root() -> Path:
    """The versioned root directory of this machine's engine indexes (the setting must be set)."""
    return Path(_versioned(_index_dir()))


def index_path(scope_pk: int, family: str) -> Path:
    """The directory of one scope and family's index."""
    return Path(_index_files(_index_dir(), scope_pk, family)[0])


def _index_dir() -> str:
    """The setting, read with the engine on (so set); unset, a TypeError (as ``os.fspath(None)`` raised)."""
    directory = recall_settings().search_index_dir
    if not directory:
        raise TypeError("POWERCONTEXT_SEARCH_INDEX_DIR is unset")
    return directory


def _versioned(root: str) -> str:
    return os.path.join(root, f"v{FORMAT_VERSION}")


@functools.lru_cache(maxsize=4096)
def _index_files(root: str, scope_pk: int, family: str) -> tuple[str, str]:
    """The directory of one index under the setting's value ``root`` and its ``meta.json``, as strings: every prepare
    stats the file of each large pair, and building the paths anew cost more than the stat (about 4 % of a prepare
    at 100k documents)."""
    directory = os.path.join(_versioned(root), f"{scope_pk}-{family}")
    return directory, os.path.join(directory, "meta.json")


def index_open(path: Path, *, create: bool = False) -> tantivy.Index:
    """Open (or, with ``create``, create) the tantivy index in ``path``."""
    if create:
        path.mkdir(parents=True, exist_ok=True)
        return tantivy.Index(SCHEMA, path=str(path), reuse=True)
    return tantivy.Index.open(str(path))


def meta_read(searcher: tantivy.Searcher) -> IndexMeta | None:
    """The metadata document of the searcher's commit, or None when there is none (an empty index)."""
    hits = searcher.search(tantivy.Query.term_query(SCHEMA, "doc_id", META_DOC_ID), 1).hits
    if not hits:
        return None
    values = json.loads(searcher.doc(hits[0][1]).to_dict()["meta"][0])
    if values.get("format") != FORMAT_VERSION:
        raise IndexUnusable("corrupt", f"format {values.get('format')!r}")
    longest, scope_pk, family = values.get("longest"), values.get("scope"), values.get("family")
    meta = IndexMeta(
        watermark=int(values["watermark"]),
        documents=int(values["documents"]),
        # A damaged value is as good as none: it only chooses the candidates worth rescoring, never proves.
        longest=longest if type(longest) is int and 0 <= longest < 2**63 else None,
        scope_pk=scope_pk if type(scope_pk) is int else None,
        family=family if type(family) is str else None,
    )
    # Bound as 64-bit integers in SQL: a damaged file must not turn into an error there.
    if not (0 <= meta.watermark < 2**63 and 0 <= meta.documents < 2**63):
        raise IndexUnusable("corrupt", f"watermark {meta.watermark}, documents {meta.documents}")
    return meta


def meta_document(meta: IndexMeta) -> tantivy.Document:
    """The metadata document to commit with the documents it describes."""
    values: dict[str, int | str] = {"format": FORMAT_VERSION, "watermark": meta.watermark, "documents": meta.documents}
    for key, value in (("longest", meta.longest), ("scope", meta.scope_pk), ("family", meta.family)):
        if value is not None:
            values[key] = value
    return tantivy.Document(doc_id=META_DOC_ID, meta=json.dumps(values))


def text_document(document_id: int, text: str) -> tantivy.Document:
    """One RecallDocument as the engine stores it: its terms separated by spaces (see ``build``)."""
    return tantivy.Document(doc_id=document_id, text=text)


def ids_read(path: Path) -> array | None:
    """The ids the index in ``path`` holds, as the last writer recorded them (None if unreadable)."""
    values = array("q")
    try:
        with open(path / _IDS_FILE, "rb") as file:
            data = file.read()
        values.frombytes(data)
    except (OSError, ValueError):
        return None
    return values


def ids_write(path: Path, ids: array) -> None:
    """Record the ids after a commit; written aside and renamed, so a reader never sees half a file."""
    temporary = path / f"{_IDS_FILE}.tmp"
    with contextlib.suppress(FileNotFoundError):  # left by a crash, and sealed (``files.seal``): not writable
        os.unlink(temporary)
    with open(temporary, "wb") as file:
        ids.tofile(file)
    os.replace(temporary, path / _IDS_FILE)


def writer_lock():
    """Hold this machine's engine writer lock (blocking): one build or update at a time."""
    return locks.directory_lock(index_root())


@dataclass(frozen=True)
class EngineScoring:
    """The statistics the engine's BM25 used for one commit: its document count (documents deleted but not yet
    merged away and the metadata document included) and its average document length."""

    documents: float
    average_length: float


@dataclass(frozen=True)
class Proposal:
    """The engine's top documents for a query, with what bounds the scores of those it left out."""

    documents: list[int]
    """Document ids, best first (``engine.query`` keeps the ones its database may hold, in id order)."""
    lowest_score: float | None
    """An engine score that no document left out exceeds (the last proposal's, as the engine answers); None when
    every document holding a query term is proposed."""
    scoring: EngineScoring | None
    """The statistics of the engine scores (None with ``lowest_score``)."""
    scores: tuple[float, ...] = ()
    """The engine's score of each document, best first, as the engine answers."""


@dataclass
class Reader:
    """One index's searcher at its latest commit, the commit's metadata and (once a search needed it) the
    statistics its scores were computed with."""

    stamp: tuple[int, int, int]
    searcher: tantivy.Searcher
    meta: IndexMeta
    scoring: EngineScoring | None = None
    view: tempfile.TemporaryDirectory | None = None
    """The private directory of links it searches through when the index's own is read-only (``_opened``)."""


READERS_MAX = 512
"""Searchers one process keeps open (least recently used first out): each holds the index's open files."""

_readers: dict[str, Reader | Refused] = {}
"""Open readers by index directory (or why its current commit is not used)."""
_readers_lock = threading.Lock()


def reader(scope_pk: int, family: str) -> Reader:
    """The searcher of the latest commit of one index and its metadata; raises ``IndexUnusable``.

    Each process keeps its searcher until the index's ``meta.json`` changes (a writer committed: tantivy
    replaces the file), then opens the new commit: a stat per query, no background thread. A commit is used only
    when its metadata names this scope and family and its segments hold the documents it counts (plus itself): an
    index written over with another's files, or with damaged ones, is not.
    """
    path, meta_file = _index_files(_index_dir(), scope_pk, family)
    try:
        status = os.stat(meta_file)
    except FileNotFoundError:
        raise IndexUnusable("missing") from None
    except OSError as exc:  # a directory the workers may not search
        raise IndexUnusable("unreadable", str(exc)) from exc
    stamp = (status.st_ino, status.st_mtime_ns, status.st_size)
    cached = _readers.get(path)
    if cached is not None and cached.stamp == stamp:
        with _readers_lock:
            _readers[path] = _readers.pop(path, cached)  # most recently used last
        if isinstance(cached, Refused):
            raise IndexUnusable(cached.reason, cached.detail)
        return cached
    try:
        opened = _checked(_opened(Path(path), stamp), scope_pk, family)
    except IndexUnusable as exc:
        # Refused until the index changes: opening a damaged index again at every query would cost more than SQL. A
        # panic may have come from the moment (files changed as they were read): the next query tries again.
        if exc.reason != "panic":
            _keep(path, Refused(stamp, exc.reason, exc.detail))
        raise
    _keep(path, opened)
    return opened


def _keep(path: str, found: Reader | Refused) -> None:
    with _readers_lock:
        _readers.pop(path, None)
        _readers[path] = found
        while len(_readers) > READERS_MAX:
            del _readers[next(iter(_readers))]


def _checked(opened: Reader, scope_pk: int, family: str) -> Reader:
    """``opened``, if its metadata names this scope and family and its segments hold the documents it counts (plus
    itself); raises ``IndexUnusable`` otherwise."""
    meta = opened.meta
    if (meta.scope_pk, meta.family) == (None, None):
        raise IndexUnusable("stale", "built before its metadata named its scope: the next update records it")
    if (meta.scope_pk, meta.family) != (scope_pk, family):
        raise IndexUnusable("mismatch", f"built for scope #{meta.scope_pk} {meta.family}")
    if (held := opened.searcher.num_docs) != meta.documents + 1:
        raise IndexUnusable("mismatch", f"its segments hold {held} documents, its metadata counts {meta.documents}")
    return opened


def reader_forget(scope_pk: int, family: str) -> None:
    """Drop this process's searcher of one index (it panicked): the next query opens the index again."""
    path, _ = _index_files(_index_dir(), scope_pk, family)
    with _readers_lock:
        _readers.pop(path, None)


def engine_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a panic of the engine's native code (``pyo3_runtime.PanicException``, raised by tantivy on
    data it cannot read, e.g. an index written over in place). It derives from BaseException, not Exception, so
    ``except Exception`` does not catch it; the type lives in no importable module, hence the name check."""
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def _opened(path: Path, stamp: tuple[int, int, int]) -> Reader:
    """A new Reader of the index in ``path``; raises ``IndexUnusable`` (panics included)."""
    try:
        try:
            searcher, view = index_open(path).searcher(), None
        except (ValueError, OSError):
            if not files.lock_refused(path):
                raise
            # A directory the workers may read but not write (a read-only mount, or the builder's own user): tantivy
            # creates a lock file beside the files it opens, so it opens them through links in a directory of ours.
            view = files.read_only_view(path)
            searcher = index_open(Path(view.name)).searcher()
        meta = meta_read(searcher)
    except IndexUnusable:
        raise
    except Exception as exc:  # tantivy reports a damaged index as ValueError or OSError
        reason = "unreadable" if not os.access(path / "meta.json", os.R_OK) else "corrupt"
        raise IndexUnusable(reason, str(exc)) from exc
    except BaseException as exc:
        if not engine_panic(exc):
            raise
        raise IndexUnusable("panic", str(exc)) from exc
    if meta is None:
        raise IndexUnusable("missing", "no commit with metadata yet")
    if view is not None:
        logger.warning("search index %s is read-only for this process: searched through links in %s", path, view.name)
    return Reader(stamp, searcher, meta, view=view)


def search(reader: Reader, terms: list[str], limit: int) -> Proposal:
    """The engine's top ``limit`` documents for the terms (any term matches; BM25 by tantivy)."""
    query = tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "text", term, "freq")) for term in terms]
    )
    hits = reader.searcher.search(query, limit, count=False).hits
    # doc_id is an integer fast field: its values are ints (the stubs type any fast field's values).
    documents = cast(
        list[int], reader.searcher.fast_field_values("doc_id", [address for _, address in hits]) if hits else []
    )
    scores = tuple(score for score, _ in hits)
    if len(hits) < limit:
        return Proposal(documents, None, None, scores)
    if reader.scoring is None:
        reader.scoring = _scoring_explained(query.explain(reader.searcher, hits[0][1]).to_json())
    return Proposal(documents, scores[-1], reader.scoring, scores)


def _scoring_explained(explanation: str) -> EngineScoring:
    """The document count and average length in the engine's explanation of a score (the same for every term and
    document of one commit)."""
    found: dict[str, float] = {}

    def visit(node) -> None:
        if isinstance(node, dict):
            description = str(node.get("description", ""))
            for key, prefix in (("documents", "N, total number of docs"), ("average", "avgdl, ")):
                if description.startswith(prefix):
                    found.setdefault(key, float(node["value"]))
            for child in node.get("details") or ():
                visit(child)

    visit(json.loads(explanation))
    if not (found.get("documents", 0) > 0 and found.get("average", 0) > 0):
        raise IndexUnusable("corrupt", "the engine's scores do not explain their statistics")
    return EngineScoring(documents=found["documents"], average_length=found["average"])
