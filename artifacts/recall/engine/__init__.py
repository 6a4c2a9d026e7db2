"""An optional search engine (tantivy) that ranks the large scopes, beside the exact SQL ranking.

The database stays the source of truth: the engine index is a per-machine copy of the recall postings
(``POWERCONTEXT_SEARCH_INDEX_DIR``), rebuilt and brought up to date by ``manage.py recall_index_build``.
At query time the engine only proposes candidates; every answer is rescored exactly in SQL with the
current statistics, together with the documents written since the index was last updated, so the final
ranking uses the same integer scores and tie-break as the SQL path, and is kept only when the engine's scores
prove that no document it left out could enter it. A missing, damaged, unreadable or stale index, one that does not
describe the database (another scope's, written over, missing documents: its counts disagree), a panic of the
engine's native code, or an unproven ranking falls back to the SQL ranking
(``powercontext_recall_index_fallbacks_total``, by ``store.FALLBACK_REASONS``).

- ``store``: the index directory, its schema and metadata, the per-process readers and the writer lock
- ``files``: the index files sealed once committed, and read through private links from a read-only directory
- ``build``: full and incremental builds from the database
- ``enabled``: whether the engine is asked at all (no native code: what the planner reads per pair)
- ``query``: candidates from the engine, the unindexed tail, exact rescoring (as SQL its caller runs), fallback
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from artifacts.recall.engine.enabled import may_answer

__all__ = ["may_answer", "ranked_by_index", "rescoring_by_index", "settled"]


def ranked_by_index(queries: Mapping, *, limits: Mapping[str, int]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Per (family, scope) of ``queries`` the engine answers, its exact top ``limits[family]`` (document id, score).

    Pairs absent from the answer (engine off, scope below the size threshold, index unusable) are ranked by
    SQL as before. Nothing is read when ``POWERCONTEXT_SEARCH_INDEX_DIR`` is unset.
    """
    if not _consulted(queries):
        return {}
    # Imported when first called (here and below): the engine's modules load tantivy's native code, which a process
    # whose index is off never needs.
    from artifacts.recall.engine import query

    return query.ranked_by_index(queries, limits=limits)


def rescoring_by_index(queries: Mapping, *, limits: Mapping[str, int]) -> dict:
    """Per (family, scope) of ``queries`` the engine answers, its ``query.Rescoring``: SQL parts yielding
    ``(document_id, score)`` whose union's first ``limits[family]`` by (score desc, document id) is its exact
    ranking once ``settled`` proves it (``query.rescoring_by_index``).

    For a caller that runs them inside its own statement; the same pairs as ``ranked_by_index`` are absent.
    """
    if not _consulted(queries):
        return {}
    from artifacts.recall.engine import query

    return query.rescoring_by_index(queries, limits=limits)


def settled(pair: tuple[str, int], rescoring, scores: Sequence[int], *, limit: int) -> bool:
    """Whether a rescored pair's kept scores (best first) prove its ranking exact (``query.settled``); counted."""
    from artifacts.recall.engine import query

    return query.settled(pair, rescoring, scores, limit=limit)


def _consulted(queries: Mapping) -> bool:
    """Whether the engine is on (``POWERCONTEXT_SEARCH_INDEX_DIR``) and there is anything to ask it."""
    from artifacts.recall.conf import recall_settings

    return bool(recall_settings().search_index_dir and queries)
