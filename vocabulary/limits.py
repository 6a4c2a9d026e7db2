"""Sizes every write and read boundary enforces: the API, the services, the fixture loader, the admin."""

from __future__ import annotations

MAX_IDENTIFIER_CHARACTERS = 200
"""Scope, artifact, entry and version ids, key names and authors."""

MAX_CONFLICT_KEY_CHARACTERS = 200
"""A memory entry's conflict slot (``preference:automation-language``)."""

MAX_BODY_CHARACTERS = 65_536
"""A stored body or summary."""

MAX_SCOPE_TITLE_CHARACTERS = 200
MAX_ERASURE_REASON_CHARACTERS = 2000
"""An erasure's reason (``manage.py erase``, the admin's erase form): kept in the record and its chain hash."""
MAX_TOPIC_TITLE_CHARACTERS = 1000

MAX_SCOPE_REFERENCES = 64
"""Direct references of one scope: every prepare ranks each of them, so this bounds what one request reads."""

MAX_REVISION = 2_147_483_647
"""The largest revision number storage can hold (a positive 32-bit integer column)."""

MAX_ROW_ID = 2**63 - 1
"""The largest row id storage can hold (a 64-bit integer primary key): a larger one names no row, and SQLite's
driver cannot even bind it (``OverflowError``)."""

QUERY_MAX_CHARACTERS = 8192
MAX_BYTES_MIN = 512
MAX_BYTES_MAX = 32_768
MAX_BYTES_DEFAULT = 8000

SELECTION_MAX_TOKENS_MAX = 32_768
"""The largest token budget (``selection.max_tokens``) a prepare may ask for: teaching units of
``vocabulary.tokens`` (about one per byte of Latin text at most, so never more than ``MAX_BYTES_MAX``)."""

MAX_UNKNOWN_FIELDS_NAMED = 20
"""Unknown keys of one object an error names one by one; one more entry counts the rest (a 2.5 MB body can
carry 100,000 of them)."""

MAX_ERROR_FIELDS = 100
"""Entries of one error's ``fields`` at most: the first ones, then one entry counting the rest (an array of
100,000 wrong items would otherwise be answered item by item)."""

HISTORY_PAGE_DEFAULT = 20
HISTORY_PAGE_MAX = 100
HISTORY_PAGE_MAX_BYTES = 1_048_576
"""Revisions one page of an artifact's history (GET /v1/artifacts/history) returns at most, newest first: ``limit``
of them, and none after the one whose changes (the bodies of the memory entry versions it added or retired) take the
page past this many UTF-8 bytes as stored (the first one always, so every page makes progress; JSON escaping can make
the answer larger, as for REVISION_ENTRIES_PAGE_MAX_BYTES). A revision written through the API changes one entry;
one loaded from a fixture or by the services may change many, and its page shows them all."""

REVISION_ENTRIES_PAGE_DEFAULT = 50
REVISION_ENTRIES_PAGE_MAX = 100
REVISION_ENTRIES_PAGE_MAX_BYTES = 1_048_576
"""Entry versions one exact read of a memory revision (GET /v1/artifacts/revision) returns at most, in entry-id
order: ``entries_limit`` of them (the default and the maximum above), and none after the one whose body takes the
page's bodies past this many UTF-8 bytes (the first one always, so every page makes progress). A revision with
more live entries is read page by page (``entries_after``): one request never reads more than about this bound of
stored bodies plus one body (MAX_BODY_CHARACTERS, 256 KiB of UTF-8 at most), however many entries a writer added.
The bound counts the bodies as stored: JSON escaping can make the answer larger (a control character is sent as six
bytes, a quote or backslash as two), and ids and hashes come on top."""

SCOPES_PAGE_DEFAULT = 50
SCOPES_PAGE_MAX = 100
"""Scopes one GET /v1/scopes page lists at most: a key with thousands of grants pages through them, each page one
bounded read of scopes and of their references (at most MAX_SCOPE_REFERENCES each)."""

API_KEY_MIN_CHARACTERS = 32
API_KEY_MAX_CHARACTERS = 200
API_KEY_PREFIX = "pc_"
API_KEY_SHOWN_PREFIX_CHARACTERS = 12
"""How much of a key the admin shows (the rest is never stored)."""

RECALL_MAX_PREPARE_TERMS = 128
"""Distinct query terms one prepare looks up at most: the first ones in the query's order (see recall tokenize).

Every term is looked up in every scope and family a prepare ranks (up to 1 + MAX_SCOPE_REFERENCES scopes), so
this bounds the statistics a prepare reads to RECALL_MAX_PREPARE_TERMS × its pairs, whatever the query. Chosen
from the query's text alone, so the same terms on every engine and path; a query of fewer distinct terms (every
natural question) is ranked on all of them. Measured in docs/benchmarks.md part 7.
"""

RECALL_MAX_DOCUMENT_TOKENS = 4096
"""Terms of one document the recall index holds at most: the first ones of its text, in order (see recall tokenize).

What a write costs to index is per distinct term (a posting and a term-statistics row each, their index entries and,
on PostgreSQL, foreign-key checks): a 65,536-character body of random CJK holds about 65,000 distinct bigrams, and
indexed whole it cost over 100x a 1 KB write (issue 34 asks at most 25x). Term frequencies and the document's BM25
length are both counted over this prefix, so the statistics, every ranking path and the search engine agree. Only
what is searchable shrinks, for documents of more than about 4,000 words or CJK bigrams: the stored body, exact
reads, citations and what a prepare shows are whole. Documents indexed before the limit keep their postings (with
statistics that match them). Measured in docs/design-notes.md ("Write cost").
"""

RECALL_MAX_QUERY_TERMS = 64
"""Distinct query terms one scope's ranking uses at most: the rarest present ones of the prepare's terms (see
recall ranking), so a prepare joins at most RECALL_MAX_QUERY_TERMS weights per pair to the postings.

Queries keep their full 1–8192 characters; this bounds what one of them can cost.
"""

DENSE_INDEX_MIN_VECTORS_DEFAULT = 100_000
"""Vectors of one family a scope needs before its dense index (HNSW) ranks it (when the search index is on).

Measured (docs/benchmarks.md, "Dense index for large scopes"): at 10,000 vectors the exact scan of a worker's copy
takes 1.8 ms and the index 4.1; at 100,000 both about 9 ms, the index holding no copy per worker; at 1M the index
10 ms, the scan 87 ms and 1.5 GB per worker."""

SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT = 5_000
"""Live documents of one family a scope needs before the search index ranks it (when the index is on).

Measured (docs/benchmarks.md part 9): a 10,000-document scope's top-16 costs about 3.6 ms in SQL and about 1 ms
through the engine with exact rescoring; at 1,000 documents SQL is the faster."""

RESIDENT_MEMORY_MB_DEFAULT = 32
"""Memory one process spends on copies of small scopes' postings to rank them there (about 1.3 million postings
of scopes with few distinct terms; fewer where every entry brings new terms)."""

RESIDENT_PAIR_POSTINGS_DEFAULT = 50_000
"""The largest scope and family kept in memory, by total length (its words, an upper bound of its postings):
about 800 entries of 60 words, loaded in tens of milliseconds. Larger ones are ranked in SQL or by the search
index."""
