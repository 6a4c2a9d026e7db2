"""Ranking a large scope with the engine: candidates from the index, the unindexed tail, exact rescoring, proof.

The engine's own BM25 differs slightly from ours (it rounds document lengths down to a byte's precision and uses
the statistics of its last update), so it only proposes candidates: CANDIDATE_FACTOR × the limit, plus as many as
the index holds deleted documents (they may occupy slots), less those whose engine scores are too low to rank
(``bounds.worth_rescoring``). Those candidates are rescored in SQL with the current statistics (``Bm25Query``'s
weights, the same expression as ``bm25.score_sql``); the documents written since the index's watermark (the tail) are
ranked exactly in SQL, their first ``limit`` kept; both are ordered by (score desc, document id): the same integer
scores and tie-break as the SQL path. The kept ranking is exact when its last document scores above what any
document the engine left out can score (``Rescoring.proven_above``, derived from the engine's score of the best one
left out: ``bounds.worth_rescoring``); otherwise the caller ranks the pair by SQL (``settled``). Long documents whose
rounded lengths tie in the engine are the usual cause.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from django.db import DatabaseError, connection

from artifacts.recall.base import Pair, Part, ranking_order, top_of_parts_sql
from artifacts.recall.bm25 import Bm25Query, postings_of_terms, ranked_all_sql
from artifacts.recall.conf import recall_settings
from artifacts.recall.engine import bounds, store
from artifacts.recall.engine.enabled import may_answer
from artifacts.recall.sql import fetch, one_of, postgresql
from artifacts.recall.tables import CORPUS_TABLE, DOCUMENTS_TABLE, POSTINGS_TABLE
from infrastructure import metrics

CANDIDATE_FACTOR = 2
"""Candidates per kept document. Each ranking is proven or ranked again by SQL, so this only trades rescoring
against fallbacks: at 100k documents 2 left no ranking unproven and cut the prepare by 15-21 % against 4
(benchmarks.md, part 9; docs/design-notes.md)."""
PAIRS_PER_STATEMENT = 100
"""(family, scope) pairs per tail or rescoring statement (up to two UNION ALL parts each, its candidates and its
tail; SQLite allows 500 parts)."""
logger = logging.getLogger(__name__)

TAIL_SIZES_MAX = 4096
"""Pairs whose last counted tail a process remembers."""


class _TailSizes:
    """Each pair's tail size (documents written since its index's watermark) as last counted, with the watermark
    and the corpus generation it was counted at.

    A pair's documents change only together with its corpus row, whose generation the database renews in the
    writer's transaction with a random token (``recall.generation``), and the count is read in one statement with
    that generation: a count at the same watermark and generation is exact for any snapshot that shows this
    generation. So a prepare that reads the same generation with its statistics skips the count; the first one after
    a write to the pair, or after an index update, counts again.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sizes: dict[tuple, tuple[int, int, int]] = {}

    def get(self, key: tuple, watermark: int, generation: int) -> int | None:
        found = self.sizes.get(key)
        if found is None or found[:2] != (watermark, generation):
            return None
        return found[2]

    def put(self, key: tuple, watermark: int, generation: int, size: int) -> None:
        with self.lock:
            self.sizes.pop(key, None)
            self.sizes[key] = (watermark, generation, size)
            while len(self.sizes) > TAIL_SIZES_MAX:
                del self.sizes[next(iter(self.sizes))]

    def clear(self) -> None:
        with self.lock:
            self.sizes.clear()


TAIL_SIZES = _TailSizes()


class Rescoring(NamedTuple):
    """One pair's exact rescoring: SQL parts whose union's first ``limit`` by (score desc, document id) is its exact
    ranking when proven (``settled``)."""

    parts: list[Part]
    proven_above: int | None
    """An exact score that no document the engine left out reaches; None when it left none out."""
    live_candidates: int = 0
    """How many of its candidates the database must find live: all but the documents the index holds deleted (each
    live candidate holds a query term, so it yields a row)."""


def rescoring_by_index(queries: Mapping[Pair, Bm25Query], *, limits: Mapping[str, int]) -> dict[Pair, Rescoring]:
    """Per (family, scope) at or above the size threshold whose index is usable, the SQL parts whose rows hold its
    top ``limits[family]``: its candidates rescored exactly, and its first ``limit`` documents written since the
    watermark. Their union's first ``limit`` by (score desc, document id) is the pair's exact ranking when
    ``settled`` finds it proven; an unproven pair is the caller's to rank by SQL.

    The caller runs the parts inside its own statement (a prepare inside its read: no round trip of its own). Deciding
    which pairs the engine answers costs at most one statement per ``PAIRS_PER_STATEMENT`` pairs (their unindexed
    tails' sizes), and none while every pair's corpus generation matches the one its remembered tail was counted at.
    A pair the engine cannot answer is counted and left to SQL.
    """
    # Each query carries its scope's live document count, read with the statistics: no second read.
    readers = {}
    for pair, query in queries.items():
        if may_answer(query.documents) and (found := _guarded([pair], store.reader, pair[1], pair[0])):
            readers[pair] = found
    pairs = list(readers)
    answered: dict[Pair, Rescoring] = {}
    for start in range(0, len(pairs), PAIRS_PER_STATEMENT):
        group = {pair: readers[pair] for pair in pairs[start : start + PAIRS_PER_STATEMENT]}
        answered |= _answered(group, queries, limits)
    return answered


def settled(pair: Pair, rescoring: Rescoring, scores: Sequence[int], *, limit: int) -> bool:
    """Whether the kept rows' exact scores (best first) prove the pair's rescored ranking exact: every document the
    engine left out scores at most ``proven_above``, below the ``limit``-th kept one. Counts the engine's answer, or
    the fallback to SQL (``mismatch``, ``unproven``).

    Fewer rows than the limit are every row the parts yield, so at least the candidates the database must find live:
    fewer means the engine proposed documents this scope does not hold (an index written over with another's files),
    and its word on the documents it left out is worth nothing.
    """
    if len(scores) < min(limit, rescoring.live_candidates):
        reason, detail = "mismatch", f"{len(scores)} of {rescoring.live_candidates} candidates found live"
    elif rescoring.proven_above is None or (len(scores) >= limit and scores[limit - 1] > rescoring.proven_above):
        metrics.RECALL_INDEX_ANSWERS.inc()
        return True
    else:
        reason, detail = "unproven", "its candidates do not prove the ranking"
    _fallback_count(reason)
    logger.info("recall index for scope %s %s not used: %s", pair[1], pair[0], detail)
    return False


def ranked_by_index(
    queries: Mapping[Pair, Bm25Query], *, limits: Mapping[str, int]
) -> dict[Pair, list[tuple[int, int]]]:
    """Per pair ``rescoring_by_index`` answers, its exact top ``limits[family]`` (document id, score), read in one more
    statement per ``PAIRS_PER_STATEMENT`` pairs."""
    rescorings = rescoring_by_index(queries, limits=limits)
    pairs = list(rescorings)
    ranked: dict[Pair, list[tuple[int, int]]] = {pair: [] for pair in pairs}
    for start in range(0, len(pairs), PAIRS_PER_STATEMENT):
        group = pairs[start : start + PAIRS_PER_STATEMENT]
        rescored = [
            (branch, limits[pair[0]], part) for branch, pair in enumerate(group) for part in rescorings[pair].parts
        ]
        for branch, document, score in fetch(*top_of_parts_sql(rescored)) if rescored else []:
            ranked[group[branch]].append((document, score))
    for pair, rows in list(ranked.items()):
        rows.sort(key=ranking_order)
        if not settled(pair, rescorings[pair], [score for _, score in rows], limit=limits[pair[0]]):
            del ranked[pair]
    return ranked


def _answered(
    readers: Mapping[Pair, store.Reader], queries: Mapping[Pair, Bm25Query], limits: Mapping[str, int]
) -> dict[Pair, Rescoring]:
    watermarks = {pair: reader.meta.watermark for pair, reader in readers.items()}
    tails = _guarded(readers, _tail_sizes, watermarks, queries)
    if tails is None:
        return {}
    answered: dict[Pair, Rescoring] = {}
    for pair, reader in readers.items():
        family, scope_pk = pair
        candidates = _guarded([pair], _candidates, queries[pair], reader, tails[pair], limits[family])
        if candidates is None:
            continue
        rescoring = _guarded(
            [pair],
            _rescoring,
            queries[pair],
            candidates,
            reader,
            tails[pair],
            family=family,
            scope_pk=scope_pk,
            limit=limits[family],
        )
        if rescoring is not None:
            answered[pair] = rescoring
    return answered


def _guarded(pairs: Iterable[Pair], work, *arguments, **keywords):
    """``work(*arguments, **keywords)``, or None when the engine cannot answer these pairs (each counted and logged; SQL
    answers them instead). Database errors propagate: the SQL path would fail the same way (and a PostgreSQL
    transaction is aborted). A panic of the engine's native code is caught too (it is no Exception), and the
    searcher that panicked is dropped: the next query opens the index again."""
    pairs = list(pairs)
    try:
        return work(*arguments, **keywords)
    except store.IndexUnusable as exc:
        reason, level, detail = exc.reason, logging.INFO, str(exc)
    except DatabaseError:
        raise
    except Exception:  # an engine failure (or a value the database cannot take) must never fail or empty a prepare
        reason, level, detail = "error", logging.WARNING, "failed"
    except BaseException as exc:
        if not store.engine_panic(exc):
            raise
        reason, level, detail = "panic", logging.WARNING, f"the engine panicked: {exc}"
        for family, scope_pk in pairs:
            store.reader_forget(scope_pk, family)
    for family, scope_pk in pairs:
        _fallback_count(reason)
        logger.log(
            level, "recall index for scope %s %s not used: %s", scope_pk, family, detail, exc_info=reason == "error"
        )
    return None


def _fallback_count(reason: str) -> None:
    """Count one ranking SQL answered instead of the index, under one of a fixed set of labels."""
    metrics.RECALL_INDEX_FALLBACKS.labels(reason if reason in store.FALLBACK_REASONS else "error").inc()


def _tail_sizes(watermarks: Mapping[Pair, int], queries: Mapping[Pair, Bm25Query]) -> dict[Pair, int]:
    """Per pair, how many documents were written since its index's watermark (up to MAX_LAG + 1): as counted before
    at the generation its statistics were just read with (``_TailSizes``), the others counted in one statement."""
    alias = connection.alias
    sizes: dict[Pair, int] = {}
    for pair, watermark in watermarks.items():
        if (size := TAIL_SIZES.get((alias, *pair), watermark, queries[pair].generation)) is not None:
            sizes[pair] = size
    uncounted = {pair: watermark for pair, watermark in watermarks.items() if pair not in sizes}
    for pair, (size, generation) in (_tails(uncounted) if uncounted else {}).items():
        sizes[pair] = size
        if generation is not None:
            TAIL_SIZES.put((alias, *pair), uncounted[pair], generation, size)
    return sizes


def _tails(watermarks: Mapping[Pair, int]) -> dict[Pair, tuple[int, int | None]]:
    """Per pair, how many documents were written since its index's watermark (counted up to MAX_LAG + 1) and its
    corpus generation in the same snapshot (None without a corpus row), in one statement."""
    max_lag = recall_settings().search_index_max_lag
    pairs = list(watermarks)
    # Each part ordered by id from the watermark up, so the database walks only the documents written since.
    parts = [
        f"SELECT {branch} AS branch, COUNT(*), (SELECT generation FROM {CORPUS_TABLE} WHERE scope_id = %s "
        f"AND family = %s) FROM (SELECT id FROM {DOCUMENTS_TABLE} WHERE id > %s AND scope_id = %s "
        f"AND family = %s ORDER BY id LIMIT %s) AS tail{branch}"
        for branch in range(len(pairs))
    ]
    params = [
        value
        for (family, scope_pk) in pairs
        for value in (scope_pk, family, watermarks[(family, scope_pk)], scope_pk, family, max_lag + 1)
    ]
    rows = fetch(" UNION ALL ".join(parts), params)
    return {pairs[branch]: (count, generation) for branch, count, generation in rows}


class Candidates(NamedTuple):
    """The documents of one pair worth rescoring, and the exact score no indexed document left out reaches."""

    documents: list[int]
    """Ids in ascending order."""
    proven_above: int | None
    """None when the engine left none out (``Rescoring.proven_above``)."""
    live_candidates: int = 0
    """``Rescoring.live_candidates``."""


def _candidates(query: Bm25Query, reader: store.Reader, tail_size: int, limit: int) -> Candidates:
    """The engine's proposals for one pair worth rescoring (``tail_size``: its documents written since the
    watermark, up to MAX_LAG + 1); raises IndexUnusable when stale."""
    max_lag, meta = recall_settings().search_index_max_lag, reader.meta
    if tail_size > max_lag:
        raise store.IndexUnusable("stale", f"{tail_size}+ documents written since the last update")
    # Documents are never edited (a change is a new document), so the index holds exactly `deleted` documents
    # that are no longer live. Negative: the index does not describe this database (restored, another one, or a
    # document missed by a build).
    deleted = meta.documents - (query.documents - tail_size)
    if deleted < 0:
        raise store.IndexUnusable("mismatch", "the index holds fewer documents than the database below its watermark")
    if deleted > max_lag:
        raise store.IndexUnusable("stale", f"{deleted} documents removed since the last update")
    terms = sorted(query.weights)
    _check_term_counts(query, reader, terms, tail_size)
    proposal = store.search(reader, terms, CANDIDATE_FACTOR * limit + deleted)
    if proposal.lowest_score is None and len(proposal.documents) < max(query.frequencies.values()) - tail_size:
        # Every document of the index holding a query term was proposed: at least the database's up to the watermark.
        raise store.IndexUnusable("mismatch", f"{len(proposal.documents)} documents hold the query's terms")
    proposal, proven_above = bounds.worth_rescoring(query, reader, proposal, kept=limit + deleted)
    # Only ids the index may hold (up to its watermark; ids start at 1): an index copied from another database can
    # propose neither a document twice (the tail ranks those after the watermark) nor a value the database cannot
    # take.
    documents = sorted({d for d in proposal.documents if 0 < d <= meta.watermark})
    return Candidates(documents, proven_above, max(0, len(documents) - deleted))


def _check_term_counts(query: Bm25Query, reader: store.Reader, terms: list[str], tail_size: int) -> None:
    """Raise ``IndexUnusable("mismatch")`` unless the index holds each query term in at least as many documents as the
    database does up to the watermark (every live one of those is in the index): an index whose files were written
    over, or that misses documents, would otherwise propose nothing and prove an empty ranking."""
    for term in terms:
        if (held := reader.searcher.doc_freq("text", term)) < query.frequencies[term] - tail_size:
            raise store.IndexUnusable(
                "mismatch", f"{held} documents hold a query term, the database has {query.frequencies[term]}"
            )


def _rescoring(
    query: Bm25Query,
    candidates: Candidates,
    reader: store.Reader,
    tail_size: int,
    *,
    family: str,
    scope_pk: int,
    limit: int,
) -> Rescoring:
    """The pair's ``Rescoring``: ``_rescored_parts`` of the candidates and the score that proves their ranking."""
    parts = _rescored_parts(
        query, candidates.documents, reader.meta, tail_size, family=family, scope_pk=scope_pk, limit=limit
    )
    return Rescoring(parts, candidates.proven_above, candidates.live_candidates)


def _rescored_parts(
    query: Bm25Query,
    candidates: list[int],
    meta: store.IndexMeta,
    tail_size: int,
    *,
    family: str,
    scope_pk: int,
    limit: int,
) -> list[Part]:
    """``(document, exact score)`` of every candidate live in the pair's scope that holds a query term, and of the
    pair's first ``limit`` documents written after the watermark (when there are any).

    The same score expression and weights as the SQL ranking, so the same integers. The candidates' postings are
    looked up by document (a few hundred rows; on SQLite by (term, document)), never scanned by term (a common term
    has most of the scope's documents); the tail's by term, from the watermark on (reading every posting of 1,000
    fresh documents cost 8-10 ms). The scope and family are checked: an index copied from another database cannot
    leak documents. (One relation of all pairs' weights was tried: both engines then scanned it per posting.)
    """
    parts = [_rescored_part(query, candidates, family=family, scope_pk=scope_pk)] if candidates else []
    if tail_size:
        parts.append(
            ranked_all_sql(query, scope_pk=scope_pk, family=family, limit=limit, after_document=meta.watermark)
        )
    return parts


def _rescored_part(query: Bm25Query, documents: list[int], *, family: str, scope_pk: int) -> tuple[str, list]:
    score, score_params = query.score_sql_and_params()
    candidate, candidate_params = one_of("p.document_id", documents, "bigint")
    if postgresql():
        # The candidates' postings alone, in a subquery that OFFSET 0 keeps whole: given the terms too, the planner
        # read every posting of each query term in the scope (the covering term index) and filtered them by
        # document, as slow as ranking without the engine at 1M documents. (A lookup per (term, document), spelled
        # as a join with the documents, was 1.4x slower than this read by document.)
        weights, weight_params = query.weights_sql_and_params()
        return (
            f"SELECT p.document_id, {score} AS score FROM (SELECT document_id, scope_id, family, term, term_frequency, "
            f"document_length FROM {POSTINGS_TABLE} AS p WHERE {candidate} OFFSET 0) AS p "
            f"CROSS JOIN {weights} WHERE w.term = p.term AND p.scope_id = %s AND p.family = %s GROUP BY p.document_id",
            [*score_params, *candidate_params, *weight_params, scope_pk, family],
        )
    # SQLite looks each (term, document) up in the covering index: 2.4x faster than reading the candidates'
    # postings by document and keeping the query's terms.
    postings, postings_params = postings_of_terms(query, scope_pk=scope_pk, family=family)
    return (
        f"SELECT p.document_id, {score} AS score FROM {postings} AND {candidate} GROUP BY p.document_id",
        [*score_params, *postings_params, *candidate_params],
    )
