"""Whether the search engine is asked to rank a pair: settings alone, no native code (the planner asks per pair,
and a process whose index is off never loads tantivy)."""

from __future__ import annotations

from artifacts.recall.conf import recall_settings


def may_answer(documents: int) -> bool:
    """Whether the engine is asked to rank a pair of this many live documents (it is on and they reach
    POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS)."""
    threshold = recall_settings().search_index_min_documents
    return bool(recall_settings().search_index_dir) and documents >= threshold
