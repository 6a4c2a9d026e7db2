"""Building and updating the engine indexes from the database (``manage.py recall_index_build``).

An update adds the documents written since the index's watermark and deletes the ones no longer live;
a rebuild (or an index whose records do not match its commit) starts from empty. Either ends in one
commit that also carries the new watermark, so readers switch from the old state to the new at once.
"""

from __future__ import annotations

import shutil
import time
from array import array
from dataclasses import dataclass

import tantivy
from django.db import connection

from artifacts.recall import index_files, sql
from artifacts.recall.engine import files, store
from artifacts.recall.index_files import Progress
from artifacts.recall.sql import fetch, marks
from artifacts.recall.tables import CORPUS_TABLE, DOCUMENTS_TABLE

INDEXED_FAMILIES = ("memory", "experience", "topic_memory")
BATCH_DOCUMENTS = 2000
WRITER_HEAP_BYTES = 128_000_000


@dataclass(frozen=True, kw_only=True)
class UpdateResult(index_files.UpdateResult):
    """What one update did to one scope and family's index: besides what every index reports, the documents it
    deleted and those it holds."""

    deleted: int
    documents: int


def large_scopes(minimum_documents: int, *, scope_pks: list[int] | None = None) -> list[tuple[int, str, int]]:
    """(scope pk, family, live documents) of every indexed family's corpus with at least ``minimum_documents``."""
    scope_filter, params = "", [minimum_documents]
    if scope_pks is not None:
        if not scope_pks:
            return []
        scope_filter, params = f" AND scope_id IN ({marks(scope_pks)})", [minimum_documents, *scope_pks]
    return [
        (scope_pk, family, documents)
        for scope_pk, family, documents in fetch(
            f"SELECT scope_id, family, documents FROM {CORPUS_TABLE} "
            f"WHERE documents >= %s{scope_filter} ORDER BY scope_id, family",
            params,
        )
        if family in INDEXED_FAMILIES
    ]


class WritesOpen(sql.WritesOpen):
    """Writes to the recall documents that were open when the build read the highest id stayed open longer than the
    build waits: it cannot know which ids they hold, so it does not index past its previous watermark this time."""


def settled_watermark(wait_seconds: float) -> int:
    """The highest document id such that every document with a lower id is visible or never will be; raises
    ``WritesOpen`` when that cannot be known within ``wait_seconds`` (``sql.settled_watermark``)."""
    try:
        return sql.settled_watermark(DOCUMENTS_TABLE, wait_seconds)
    except sql.WritesOpen as exc:
        raise WritesOpen(str(exc)) from exc


def index_update(
    scope_pk: int, family: str, *, watermark: int, rebuild: bool = False, progress: Progress | None = None
) -> UpdateResult:
    """Bring one index up to ``watermark`` (from ``settled_watermark``); hold ``store.writer_lock()``."""
    started = time.perf_counter()
    path = store.index_path(scope_pk, family)
    try:
        index = store.index_open(path, create=True)
        searcher = index.searcher()
        meta = store.meta_read(searcher)
        # Segments that do not hold what the metadata counts (files written over): rebuilt, like a damaged index.
        if meta is not None and searcher.num_docs != meta.documents + 1:
            meta = None
    except Exception:  # a damaged index is rebuilt from the database, its source of truth
        index, meta = _recreated(path), None
    except BaseException as exc:  # tantivy panicked reading it (no Exception): the same
        if not store.engine_panic(exc):
            raise
        index, meta = _recreated(path), None
    held = store.ids_read(path)
    # The writer's record must match the commit (a crash between the commit and the record, a copy).
    usable = (
        not rebuild
        and meta is not None
        and held is not None
        and len(held) == meta.documents
        and meta.watermark <= watermark
        and meta.scope_pk in (scope_pk, None)
        and meta.family in (family, None)
    )
    # Usable implies both are there; mypy does not follow a condition kept in a variable.
    known: set[int] = set(held) if usable and held is not None else set()
    previous = meta.watermark if usable and meta is not None else 0
    writer = index.writer(heap_size=WRITER_HEAP_BYTES)
    if not usable:
        writer.delete_all_documents()
    deleted, late = _reconcile(writer, known, scope_pk=scope_pk, family=family, watermark=previous)
    new = [
        row[0]
        for row in fetch(
            f"SELECT id FROM {DOCUMENTS_TABLE} WHERE scope_id = %s AND family = %s AND id > %s AND id <= %s "
            "ORDER BY id",
            [scope_pk, family, previous, watermark],
        )
    ]
    to_add = sorted(late) + new
    # Documents leave but never change: the longest held is at most the longest ever added. A document's terms in the
    # engine are its postings, each term-frequency times: as many as the database's ``length`` (``_longest``).
    longest = (
        (meta.longest if meta.longest is not None else _longest(scope_pk, family, previous))
        if usable and meta is not None
        else 0
    )
    for start in range(0, len(to_add), BATCH_DOCUMENTS):
        batch = to_add[start : start + BATCH_DOCUMENTS]
        for document_id, text in _texts_of(batch).items():
            writer.add_document(store.text_document(document_id, text))
            longest = max(longest, len(text.split()))
        if progress is not None:
            progress(start + len(batch), len(to_add))
    if progress is not None and not to_add:
        progress(0, 0)
    known.update(to_add)
    writer.delete_documents_by_term("doc_id", store.META_DOC_ID)
    writer.add_document(
        store.meta_document(
            store.IndexMeta(
                watermark=watermark, documents=len(known), longest=longest, scope_pk=scope_pk, family=family
            )
        )
    )
    writer.commit()
    writer.wait_merging_threads()
    store.ids_write(path, array("q", sorted(known)))
    files.seal(path)
    return UpdateResult(
        scope_pk=scope_pk,
        family=family,
        rebuilt=not usable,
        added=len(to_add),
        deleted=deleted,
        documents=len(known),
        watermark=watermark,
        seconds=time.perf_counter() - started,
    )


def _longest(scope_pk: int, family: str, watermark: int) -> int:
    """The most terms of any live document up to ``watermark`` (for an index built before its metadata said)."""
    return fetch(
        f"SELECT COALESCE(MAX(length), 0) FROM {DOCUMENTS_TABLE} WHERE scope_id = %s AND family = %s AND id <= %s",
        [scope_pk, family, watermark],
    )[0][0]


def _reconcile(writer, known: set[int], *, scope_pk: int, family: str, watermark: int) -> tuple[int, set[int]]:
    """Delete the held documents no longer live; return how many, and live ones below the watermark not held.

    Counting first costs one index range; the ids are compared only when the counts differ.
    """
    if not known:
        return 0, set()
    where = f"FROM {DOCUMENTS_TABLE} WHERE scope_id = %s AND family = %s AND id <= %s"
    params = [scope_pk, family, watermark]
    if fetch(f"SELECT COUNT(*) {where}", params)[0][0] == len(known):
        return 0, set()
    live = {row[0] for row in fetch(f"SELECT id {where}", params)}
    gone = known - live
    for document_id in gone:
        writer.delete_documents_by_term("doc_id", document_id)
    known -= gone
    return len(gone), live - known


def _texts_of(document_ids: list[int]) -> dict[int, str]:
    """Each document's text for the engine: every term once per occurrence (order is irrelevant to BM25).

    The database concatenates each document's terms (one row per document instead of one per posting, several
    times faster to read), and lists the terms that occur more than once with their frequency.
    """
    concat = "string_agg" if connection.vendor == "postgresql" else "group_concat"
    texts = dict.fromkeys(document_ids, "")  # a document without terms is still a document (N, lengths)
    for document_id, terms, repeated in fetch(
        f"SELECT document_id, {concat}(term, ' '), "
        f"{concat}(CASE WHEN term_frequency > 1 THEN term || ':' || term_frequency END, ' ') "
        f"FROM artifacts_recallposting WHERE document_id IN ({marks(document_ids)}) GROUP BY document_id",
        document_ids,
    ):
        if repeated:
            # Terms are runs of word characters: never a space or a colon.
            extra = [(term + " ") * (int(frequency) - 1) for term, frequency in _pairs(repeated)]
            terms = terms + " " + "".join(extra)
        texts[document_id] = terms
    return texts


def _pairs(repeated: str) -> list[tuple[str, str]]:
    return [(term, frequency) for term, frequency in (item.rsplit(":", 1) for item in repeated.split(" "))]


def _recreated(path) -> tantivy.Index:
    """An empty index in ``path`` in place of a damaged one: its files are unlinked, never truncated, so a worker
    still searching them keeps reading what it mapped until it opens the new commit."""
    shutil.rmtree(path, ignore_errors=True)
    return store.index_open(path, create=True)
