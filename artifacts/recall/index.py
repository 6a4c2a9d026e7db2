"""Recall index maintenance at write time: one document per live text, its postings and statistics.

Called inside the write services' transactions, so the index always reflects exactly the live heads.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

from django.db import connection
from django.db.models import F

from artifacts.models import (
    Artifact,
    ArtifactRevision,
    MemoryEntryVersion,
    RecallCorpusStat,
    RecallDocument,
)
from artifacts.recall import tokenize
from artifacts.recall.sql import one_of, pg_array, postgresql
from artifacts.recall.tables import DOCUMENTS_TABLE, POSTINGS_TABLE, TERM_STATS_TABLE, VECTORS_TABLE


def revision_text(title: str | None, summary: str | None, body: str | None) -> str:
    """The text recall indexes for a revision (an experience, a topic memory): its title, summary and body, one per
    line, the parts it has. A memory entry's is its body. The one home of that rule: the write indexes it, and its
    vector (``recall.vectors``) is of exactly that text."""
    return "\n".join(part for part in (title, summary, body) if part)


def recall_index_add(
    *,
    artifact: Artifact,
    text: str,
    entry_version: MemoryEntryVersion | None = None,
    revision: ArtifactRevision | None = None,
) -> RecallDocument:
    """Index a newly live text: its document (returned), one posting per distinct term, and the statistics."""
    frequencies, length = tokenize.term_frequencies(text)
    document = RecallDocument.objects.create(
        scope_id=artifact.scope_id,
        family=artifact.family,
        artifact=artifact,
        entry_version=entry_version,
        revision=revision,
        length=length,
    )
    _corpus_change(artifact=artifact, length=length, delta=1)
    terms = sorted(frequencies)
    if not terms:
        return document
    counts = [frequencies[term] for term in terms]
    scope_family = [artifact.scope_id, artifact.family]
    # Two statements whatever the number of distinct terms (a 65,536-character CJK body has ~65k): the terms
    # travel as one array (PostgreSQL) or one JSON document (SQLite), never one statement per row.
    if postgresql():
        _execute(
            f"INSERT INTO {POSTINGS_TABLE} (document_id, scope_id, family, term, term_frequency, document_length) "
            "SELECT %s, %s, %s, t.term, t.frequency, %s FROM unnest(%s::text[], %s::int[]) AS t(term, frequency)",
            [document.pk, *scope_family, length, pg_array(terms, "text"), pg_array(counts, "int")],
        )
    else:
        _execute(
            f"INSERT INTO {POSTINGS_TABLE} (document_id, scope_id, family, term, term_frequency, document_length) "
            "SELECT %s, %s, %s, t.key, t.value, %s FROM json_each(%s) AS t",
            [document.pk, *scope_family, length, json.dumps(dict(zip(terms, counts, strict=True)), ensure_ascii=False)],
        )
    _term_stats_change(artifact=artifact, terms=terms, delta=1)
    return document


def recall_index_remove(*, artifact: Artifact, documents: Iterable[RecallDocument]) -> None:
    """Drop texts that are no longer live: their postings, documents and their share of the statistics.

    A fixed number of statements whatever the number of documents and terms. The terms whose statistics go
    down are the removed postings' own (the index's record of what was counted, not a new tokenization),
    counted here; each group of terms removed the same number of times is one upsert (``_term_stats_change``).
    The former ``term IN (SELECT term FROM postings WHERE document_id = …)`` let PostgreSQL, on statistics
    older than a large document, loop over the postings once per term-statistics row of the scope: a
    65,536-character CJK update ran past the 30 s worker timeout.
    """
    documents = list(documents)
    if not documents:
        return
    _corpus_change(artifact=artifact, length=sum(d.length for d in documents), delta=-len(documents))
    ids = [document.pk for document in documents]
    in_documents, id_params = one_of("document_id", ids, "bigint")
    if postgresql():
        removed = _fetch(f"DELETE FROM {POSTINGS_TABLE} WHERE {in_documents} RETURNING term", id_params)
    else:  # DELETE … RETURNING needs SQLite 3.35; Django supports 3.31
        removed = _fetch(f"SELECT term FROM {POSTINGS_TABLE} WHERE {in_documents}", id_params)
        _execute(f"DELETE FROM {POSTINGS_TABLE} WHERE {in_documents}", id_params)
    times_removed = Counter(term for (term,) in removed)
    by_times: dict[int, list[str]] = {}
    for term, times in times_removed.items():
        by_times.setdefault(times, []).append(term)
    for times, terms in sorted(by_times.items()):
        _term_stats_change(artifact=artifact, terms=sorted(terms), delta=-times)
    # The documents' other rows by hand too: the ORM's cascade would also look for postings, deleted above.
    _execute(f"DELETE FROM {VECTORS_TABLE} WHERE {in_documents}", id_params)
    in_ids, _ = one_of("id", ids, "bigint")
    _execute(f"DELETE FROM {DOCUMENTS_TABLE} WHERE {in_ids}", id_params)


def _term_stats_change(*, artifact: Artifact, terms: list[str], delta: int) -> None:
    """Add ``delta`` to the document count of each of the (sorted, distinct) ``terms``: one upsert.

    An upsert finds each row by the unique index's conflict check, one probe per term, whatever the planner
    estimates: an UPDATE … WHERE term = ANY(array) was planned as a scan of the scope's rows filtered against
    the whole array (quadratic), and the former IN (SELECT …) as a loop over the postings per row. A term
    with no row yet gets one: ``delta`` when adding, 0 when removing (never below 0; it had no document).
    Terms in order, so concurrent writers lock the rows in one order.
    """
    params = [artifact.scope_id, artifact.family, max(delta, 0)]
    if postgresql():
        source, terms_param = "unnest(%s::text[]) AS t(value) ORDER BY t.value", pg_array(terms, "text")
    else:  # "WHERE true" lets SQLite tell the upsert's ON from a join's
        source, terms_param = "json_each(%s) AS t WHERE true", json.dumps(terms, ensure_ascii=False)
    _execute(
        f"INSERT INTO {TERM_STATS_TABLE} AS s (scope_id, family, term, documents) SELECT %s, %s, t.value, %s "
        f"FROM {source} ON CONFLICT (scope_id, family, term) DO UPDATE SET documents = s.documents + %s",
        [*params, terms_param, delta],
    )


def _corpus_change(*, artifact: Artifact, length: int, delta: int) -> None:
    # ``delta`` documents of ``length`` terms in all: added when positive, removed when negative.
    # Lock order: the scope and family's corpus row first, then term rows. Every index change of a scope
    # and family updates that one row, so taking it first queues writers of different artifacts there;
    # taking term rows first let a removal and an addition with different terms lock in opposite orders
    # (a PostgreSQL deadlock, answered 503).
    scope_id, family = artifact.scope_id, artifact.family
    if delta > 0:
        RecallCorpusStat.objects.get_or_create(scope_id=scope_id, family=family)
    # Every change of the scope and family's postings passes here: the database renews the row's generation
    # (recall.generation), which tells each process holding a copy of them (recall.resident) it is out of date.
    RecallCorpusStat.objects.filter(scope_id=scope_id, family=family).update(
        documents=F("documents") + delta,
        total_length=F("total_length") + (length if delta > 0 else -length),
    )


def _execute(sql: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _fetch(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
