"""A ranked document as recall hands it to the sources: its id, its score and its row.

A row is read once per copy of its (family, scope) pair and kept with the copy (``resident``): at the copy's
generation every field is what the database would return again. Bodies, titles, summaries and ids are immutable;
a memory entry is cited at its artifact's head, and every memory revision adds or retires an entry, so it changes
its pair's postings and the database renews the generation in the same transaction (``recall.generation``); an
entry retired or a document removed changes them too. Whoever moves a head or retires an entry without the services,
the database renews the generation all the same (migration 0009's triggers).
"""

from __future__ import annotations

import sys
from typing import NamedTuple

ROW_BYTES = 480
"""Memory of one kept row besides its strings: the row, its slot in the copy's dict, and the candidate and citation
a source keeps in it (measured with tracemalloc: about 430 bytes for a memory candidate)."""


class DocumentRow:
    """What a ranked document's citation and body need, as read (entry fields for memory only).

    ``candidate`` is what the recall source made of the row when it depends on nothing else (``sources``), kept
    with the row; None until then.
    """

    __slots__ = ("artifact_id", "revision", "entry_id", "version_id", "body", "title", "summary", "candidate")

    def __init__(
        self,
        artifact_id: str,
        revision: int,
        entry_id: str | None,
        version_id: str | None,
        body: str,
        title: str | None,
        summary: str | None,
    ) -> None:
        self.artifact_id = artifact_id
        self.revision = revision
        self.entry_id = entry_id
        self.version_id = version_id
        self.body = body
        self.title = title
        self.summary = summary
        self.candidate: object | None = None

    def size(self) -> int:
        """Estimated bytes of the row kept in memory, its strings included (each counted whole, though a kept
        candidate shares them)."""
        strings = (self.artifact_id, self.entry_id, self.version_id, self.body, self.title, self.summary)
        return ROW_BYTES + sum(sys.getsizeof(text) for text in strings if text is not None)


class RankedDocument(NamedTuple):
    """One ranked document: its id, its integer score and its row.

    A tuple: a prepare builds dozens per request.
    """

    document_id: int
    score: int
    row: DocumentRow
