"""Small scopes' postings kept in process memory and ranked in Python with the SQL ranking's arithmetic.

Why: at a few thousand documents per scope, the ranking statement (every query term's postings in each scope,
scored, grouped and ordered by the database) costs more than the rest of a prepare together (docs/benchmarks.md
part 2). A copy of one (family, scope) pair's postings, each term's contributions computed once per
generation, ranks the same documents with the same integer scores in a fraction of that.

Correct by construction:

- a copy is keyed by its corpus row's ``generation``, which the database renews with every index change of the
  pair, in the same transaction, whoever writes (``recall.generation``); a prepare reads the generation with
  its statistics (``bm25.bm25_queries``) and uses a copy only when they match, so a write is visible to the
  very next prepare on every worker and machine, and a rolled-back write's copy is never used;
- a copy is read by one statement that returns the postings and their generation together (one snapshot);
- each posting contributes the same IEEE double expression as ``bm25.score_sql``, truncated to whole
  micro-units; the integer sums and the tie-break on the document id give the SQL ranking on both engines.

Bounded: a pair is copied only when its total length (its words, an upper bound of its postings) is at most
POWERCONTEXT_RESIDENT_PAIR_POSTINGS, only on the second prepare that needs the same generation (a scope read
once, or written between every two reads, is not worth a load), and at most one copy is loaded per prepare; a
process keeps at most POWERCONTEXT_RESIDENT_MEMORY_MB of copies (an estimate: 24 bytes per posting with its
cached contribution, 450 per distinct term, and the rows of its documents read at its generation,
``documents.DocumentRow.size``), dropping the least recently used first. 0 turns copies off.

Upgrades: a process of an older version changes postings through the same corpus row, so the database renews
the generation for it too (migration 0008), as it does when such a process moves a head or retires an entry
(migration 0009, for the rows kept with a copy); no setting needs to change during a rolling upgrade.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence

from django.db import connection

from artifacts.recall import bm25, sql
from artifacts.recall.base import ranking_order
from artifacts.recall.bm25 import Bm25Query, HeldPostings
from artifacts.recall.conf import recall_settings
from artifacts.recall.documents import DocumentRow
from artifacts.recall.tables import CORPUS_TABLE, POSTINGS_TABLE
from infrastructure import metrics

_SEEN_MAX = 4096
"""Pairs whose last generation asked for is remembered (to load a copy on the second request)."""
POSTING_BYTES = 24
"""Memory of one posting in a copy: document id, term frequency, document length, cached contribution."""
TERM_BYTES = 450
"""Memory of one distinct term in a copy (its key, three arrays and their headers; measured)."""
ROWS_SHARE = 4
"""A copy keeps document rows up to 1/ROWS_SHARE of the budget: a pair is copied by its words, not its bytes, so one
scope of long texts (many characters that are no words) cannot push every other copy out with its rows."""


def budget_bytes() -> int:
    """The process's memory budget for copies, from POWERCONTEXT_RESIDENT_MEMORY_MB (0: copies off)."""
    return int(recall_settings().resident_memory_mb * 1024 * 1024)


class _Copy:
    """One pair's postings at one generation: per term, its documents, term frequencies and document lengths."""

    __slots__ = (
        "generation",
        "postings",
        "count",
        "documents",
        "total_length",
        "size",
        "rows",
        "rows_size",
        "_contributions",
    )

    def __init__(
        self,
        generation: int,
        postings: dict[str, tuple[array, array, array]],
        count: int,
        *,
        documents: int,
        total_length: int,
    ) -> None:
        self.generation = generation
        self.postings = postings
        self.count = count  # postings
        # The corpus row at this generation: the pair's statistics without reading them (``planner``).
        self.documents = documents
        self.total_length = total_length
        self.size = count * POSTING_BYTES + len(postings) * TERM_BYTES  # bytes, estimated
        # The rows of its documents read at this generation (``planner``), by document id.
        self.rows: dict[int, DocumentRow] = {}
        self.rows_size = 0  # bytes, estimated; counted in ``size`` too
        self._contributions: dict[str, tuple[tuple[float, float, float], array]] = {}

    def frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """Document frequency of each of ``terms`` present in the copy (``bm25.HeldPostings``)."""
        return {term: len(self.postings[term][0]) for term in terms if term in self.postings}

    def contributions(self, term: str, query: Bm25Query) -> tuple[array, array]:
        """The term's documents and each one's score contribution in micro-units (computed once per weight)."""
        documents, frequencies, lengths = self.postings[term]
        weight, length_constant, length_factor = query.weights[term], query.length_constant, query.length_factor
        memo = self._contributions.get(term)
        if memo is not None and memo[0] == (weight, length_constant, length_factor):
            return documents, memo[1]
        values = array(
            "q",
            (
                bm25.contribution(
                    weight, frequency, length, length_constant=length_constant, length_factor=length_factor
                )
                for frequency, length in zip(frequencies, lengths, strict=True)
            ),
        )
        self._contributions[term] = ((weight, length_constant, length_factor), values)
        return documents, values


class _Copies:
    """The process's copies, least recently used first, within a memory budget in bytes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.copies: OrderedDict[tuple, _Copy] = OrderedDict()
        self.seen: OrderedDict[tuple, int] = OrderedDict()
        self.empty: OrderedDict[tuple, None] = OrderedDict()  # pairs last found without live documents
        self.loading: set[tuple] = set()  # pairs a thread of this process is reading now
        self.size = 0

    def get(self, key: tuple, generation: int) -> _Copy | None:
        """The pair's copy at this generation, if held."""
        with self.lock:
            copy = self.copies.get(key)
            if copy is None or copy.generation != generation:
                return None
            self.copies.move_to_end(key)
            return copy

    def discard(self, key: tuple) -> None:
        """Drop the pair's copy: a statistics read found it at another generation (written since, or loaded
        inside a transaction that rolled back). A reader of an older snapshot may drop a newer copy: it is
        loaded again, never used wrongly."""
        with self.lock:
            self._drop(key)

    def second_request(self, key: tuple, generation: int) -> bool:
        """Whether this generation of the pair was asked for before (remembering it otherwise)."""
        with self.lock:
            if self.seen.get(key) == generation:
                return True
            self.seen[key] = generation
            self.seen.move_to_end(key)
            while len(self.seen) > _SEEN_MAX:
                self.seen.popitem(last=False)
            return False

    def put(self, key: tuple, copy: _Copy, budget: int) -> None:
        with self.lock:
            self._drop(key)
            self.copies[key] = copy
            self.size += copy.size
            self._trim(budget)

    def rows_keep(self, key: tuple, copy: _Copy, rows: Mapping[int, DocumentRow], budget: int) -> None:
        """Keep rows of the copy's documents with it, counted in the budget, up to its share of the budget; not when
        the copy is no longer held (dropped or replaced since it was used)."""
        with self.lock:
            if self.copies.get(key) is not copy:
                return
            added = 0
            for document, row in rows.items():
                size = row.size()
                if document not in copy.rows and copy.rows_size + size <= budget // ROWS_SHARE:
                    copy.rows[document] = row
                    copy.rows_size += size
                    added += size
            copy.size += added
            self.size += added
            self._trim(budget)

    def _trim(self, budget: int) -> None:
        while self.size > budget and self.copies:
            _, dropped = self.copies.popitem(last=False)
            self.size -= dropped.size

    def _drop(self, key: tuple) -> None:
        if (copy := self.copies.pop(key, None)) is not None:
            self.size -= copy.size

    def empty_note(self, key: tuple) -> None:
        """Remember that the pair was last found without live documents (the last _SEEN_MAX such pairs)."""
        with self.lock:
            self.empty[key] = None
            self.empty.move_to_end(key)
            while len(self.empty) > _SEEN_MAX:
                self.empty.popitem(last=False)

    def empty_forget(self, key: tuple) -> None:
        with self.lock:
            self.empty.pop(key, None)

    def clear(self) -> None:
        with self.lock:
            self.copies.clear()
            self.seen.clear()
            self.empty.clear()
            self.size = 0


COPIES = _Copies()


def _load(family: str, scope_pk: int) -> _Copy | None:
    """The pair's postings and generation, read in one statement; None when the pair has no corpus row."""
    rows = sql.fetch(
        f"SELECT term, document_id, term_frequency, document_length FROM {POSTINGS_TABLE} "
        "WHERE scope_id = %s AND family = %s UNION ALL SELECT NULL, generation, documents, total_length "
        f"FROM {CORPUS_TABLE} WHERE scope_id = %s AND family = %s",
        [scope_pk, family, scope_pk, family],
    )
    generation: int | None = None
    documents = total_length = 0  # read with the generation, from the corpus row
    grouped: dict[str, tuple[array, array, array]] = {}
    for term, document, frequency, length in rows:
        if term is None:
            generation, documents, total_length = document, frequency, length
            continue
        if (lists := grouped.get(term)) is None:
            lists = grouped[term] = (array("q"), array("i"), array("i"))
        lists[0].append(document)
        lists[1].append(frequency)
        lists[2].append(length)
    if generation is None:
        return None
    return _Copy(generation, grouped, len(rows) - 1, documents=documents, total_length=total_length)


def _fits(copy: _Copy, *, budget: int, pair_postings: int) -> bool:
    """Whether a copy just read is within the limits (its pair may have grown since the statistics were read)."""
    return copy.count <= pair_postings and copy.size <= budget


def _load_once(key: tuple, pair: tuple[str, int], *, budget: int, pair_postings: int) -> _Copy | None:
    """Read the pair's copy and keep it when it fits the limits; None when another thread of this process is
    loading the same pair (threaded workers: that one keeps its copy, and this prepare ranks the pair in SQL
    rather than read the same postings twice) or the pair has no corpus row. Counted as a load when read."""
    with COPIES.lock:
        if key in COPIES.loading:
            return None
        COPIES.loading.add(key)
    try:
        copy = _load(*pair)
        if copy is None:
            return None
        metrics.RECALL_RESIDENT_LOADS.inc()
        if _fits(copy, budget=budget, pair_postings=pair_postings):
            COPIES.put(key, copy, budget)
        return copy
    finally:  # only once the copy is kept: a thread arriving in between finds it
        with COPIES.lock:
            COPIES.loading.discard(key)


def ranked(copy: _Copy, query: Bm25Query, limit: int) -> list[tuple[int, int]]:
    """The copy's first ``limit`` (document id, score) for the query, exactly as the SQL ranking orders them."""
    scores: dict[int, int] = {}
    for term in query.weights:
        if term not in copy.postings:
            continue
        documents, contributions = copy.contributions(term, query)
        if not scores:
            scores = dict(zip(documents, contributions, strict=True))
            continue
        get = scores.get
        for document, contribution in zip(documents, contributions, strict=True):
            scores[document] = get(document, 0) + contribution
    return _first_by_score(scores, limit)


def _first_by_score(scores: dict[int, int], limit: int) -> list[tuple[int, int]]:
    """The first ``limit`` (document, score) by (score desc, document id), the SQL ranking's order."""
    if len(scores) > limit > 0:
        # Sorting the bare integers finds the limit-th score in C; only documents scoring at least that are
        # ordered by key (a third of a heap's time over every document, for a few hundred).
        threshold = sorted(scores.values(), reverse=True)[limit - 1]
        return sorted([item for item in scores.items() if item[1] >= threshold], key=ranking_order)[:limit]
    return sorted(scores.items(), key=ranking_order)[:limit]


def copies_held(scope_pks_by_family: Mapping[str, Sequence[int]]) -> dict[tuple[str, int], HeldPostings]:
    """The pairs this process holds a copy of, at whatever generation (``bm25.bm25_queries`` checks it)."""
    if not budget_bytes():
        return {}
    alias = connection.alias
    with COPIES.lock:
        return {
            (family, scope_pk): copy
            for family, scope_pks in scope_pks_by_family.items()
            for scope_pk in scope_pks
            if (copy := COPIES.copies.get((alias, family, scope_pk))) is not None
        }


def copies_at(generations: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], _Copy]:
    """The pairs this process holds a copy of at the given generation (their rows kept are current there)."""
    if not budget_bytes():
        return {}
    alias = connection.alias
    return {pair: copy for pair, generation in generations.items() if (copy := COPIES.get((alias, *pair), generation))}


def rows_keep(pair: tuple[str, int], copy: _Copy, rows: Mapping[int, DocumentRow]) -> None:
    """Keep document rows read at the copy's generation with this process's copy of ``pair`` (``planner``)."""
    COPIES.rows_keep((connection.alias, *pair), copy, rows, budget_bytes())


def copy_discard(pair: tuple[str, int]) -> None:
    """Forget this process's copy of ``pair`` (``bm25.bm25_queries`` found it stale)."""
    COPIES.discard((connection.alias, *pair))


def empty_found(pair: tuple[str, int]) -> None:
    """Remember that ``pair`` had no live documents when its statistics were last read (``bm25.bm25_queries``)."""
    COPIES.empty_note((connection.alias, *pair))


def empty_lost(pair: tuple[str, int]) -> None:
    """Forget that ``pair`` had no live documents: it has some now."""
    COPIES.empty_forget((connection.alias, *pair))


def known(pairs: Sequence[tuple[str, int]]) -> dict[tuple[str, int], _Copy | None] | None:
    """Per pair, its copy, or None for a pair last found without live documents, when every pair is one or the
    other and each copy would rank in memory (within POWERCONTEXT_RESIDENT_PAIR_POSTINGS); None otherwise.

    Only what this process last saw: the caller confirms every generation (and every emptiness) in the statement
    that reads the ranked documents. Copies used are the most recently used.
    """
    if not budget_bytes():
        return None
    pair_postings, alias = recall_settings().resident_pair_postings, connection.alias
    found: dict[tuple[str, int], _Copy | None] = {}
    with COPIES.lock:
        for pair in pairs:
            key = (alias, *pair)
            if (copy := COPIES.copies.get(key)) is not None and copy.total_length <= pair_postings:
                COPIES.copies.move_to_end(key)
                found[pair] = copy
            elif key in COPIES.empty:
                found[pair] = None
            else:
                return None
    return found


def ranked_in_memory(
    queries: Mapping[tuple[str, int], Bm25Query],
    *,
    limits: Mapping[str, int],
    skip: Collection[tuple[str, int]] = (),
) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Per (family, scope) of ``queries`` (but not in ``skip``) held in memory at the generation its statistics
    were read with, its top ``limits[family]`` (document id, score), exactly as the SQL ranking orders them.

    Loads at most one copy of a small pair, asked for the second time at the same generation and not being loaded
    by another thread. Pairs absent from the answer are ranked in SQL.
    """
    budget = budget_bytes()
    pair_postings = recall_settings().resident_pair_postings
    answered: dict[tuple[str, int], list[tuple[int, int]]] = {}
    if not budget:
        return answered
    loaded = False
    for pair, query in queries.items():
        if pair in skip or query.total_length > pair_postings:
            continue
        key = (connection.alias, *pair)
        copy = COPIES.get(key, query.generation)
        if copy is None:
            if not COPIES.second_request(key, query.generation) or loaded:
                continue
            copy = _load_once(key, pair, budget=budget, pair_postings=pair_postings)
            if copy is None:
                continue
            loaded = True
            if not _fits(copy, budget=budget, pair_postings=pair_postings):
                continue  # not kept
            if copy.generation != query.generation:
                continue  # written since the statistics were read: the next prepare uses it
        answered[pair] = ranked(copy, query, limits[pair[0]])
    return answered
