"""A ranked document as recall hands it to the sources: its id, its score and its row.

A row is read once per copy of its (family, scope) pair and kept with the copy (``resident``): at the copy's
generation every field is what the database would return again. Bodies, titles, summaries and ids are immutable;
a memory entry is cited at its artifact's head, and every memory revision adds or retires an entry, so it changes
its pair's postings and the database renews the generation in the same transaction (``recall.generation``); an
entry retired or a document removed changes them too. Whoever moves a head or retires an entry without the services,
the database renews the generation all the same (migration 0009's triggers).
"""

from __future__ import annotations

import datetime
import functools
import sys
from typing import NamedTuple

from django.utils.dateparse import parse_datetime

from vocabulary.citation import Candidate

ROW_BYTES = 480
"""Memory of one kept row besides its strings: the row, its slot in the copy's dict, and the candidate and citation
a source keeps in it (measured with tracemalloc: about 430 bytes for a memory candidate)."""


@functools.lru_cache(maxsize=8192)
def captured_at_text(value: datetime.datetime | str | None) -> str | None:
    """When a row was written, as a candidate carries it: UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (None stays None).

    Recall reads the column in raw SQL (SQLite gives Django's stored text, ``YYYY-MM-DD HH:MM:SS[.ffffff]`` in UTC;
    PostgreSQL an aware datetime), replay through the ORM (a datetime): every path gives the same text.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) == 19:
            value += ".000000"
        if len(value) == 26 and value[10] == " ":
            return f"{value[:10]}T{value[11:]}Z"
        parsed = parse_datetime(value)
        if parsed is None:
            raise ValueError(f"not a stored time: {value!r}")
        value = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)
    if value.tzinfo is not None:
        value = value.astimezone(datetime.UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class DocumentRow:
    """What a ranked document's citation and body need, as read (entry fields for memory only).

    ``candidate`` is what the recall source made of the row when it depends on nothing else (``sources``), kept
    with the row; None until then. ``captured`` (when the entry version or revision was written, as the engine
    returns it) and ``conflict_key`` (a memory entry version's slot) are what the selection policy ranks by;
    ``length`` (the document's length in BM25 terms) is one of the learned ranker's signals (``learned``).
    """

    __slots__ = (
        "artifact_id",
        "revision",
        "entry_id",
        "version_id",
        "body",
        "title",
        "summary",
        "captured",
        "conflict_key",
        "length",
        "candidate",
    )

    def __init__(
        self,
        artifact_id: str,
        revision: int,
        entry_id: str | None,
        version_id: str | None,
        body: str,
        title: str | None,
        summary: str | None,
        captured: datetime.datetime | str | None = None,
        conflict_key: str | None = None,
        length: int | None = None,
    ) -> None:
        self.artifact_id = artifact_id
        self.revision = revision
        self.entry_id = entry_id
        self.version_id = version_id
        self.body = body
        self.title = title
        self.summary = summary
        self.captured = captured
        self.conflict_key = conflict_key
        self.length = length
        self.candidate: Candidate | None = None

    def size(self) -> int:
        """Estimated bytes of the row kept in memory, its strings included (each counted whole, though a kept
        candidate shares them)."""
        strings = (
            self.artifact_id,
            self.entry_id,
            self.version_id,
            self.body,
            self.title,
            self.summary,
            self.captured,
            self.conflict_key,
        )
        return ROW_BYTES + sum(sys.getsizeof(text) for text in strings if text is not None)


class RankedDocument(NamedTuple):
    """One ranked document: its id, its integer score and its row.

    A tuple: a prepare builds dozens per request.
    """

    document_id: int
    score: int
    row: DocumentRow
