"""Recall's settings (recall, search index), read through one accessor: ``recall_settings().mode`` etc.

Read from ``django.conf.settings`` once and cached until a setting changes (``powercontext/conf.py``); a bad value is
the system check error ``powercontext.E010`` naming its environment variable (registered by ``artifacts/apps.py``).
The fusion parameters' contents are checked by ``artifacts/apps.py`` too (``fusion.weights_by_model``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from powercontext import conf
from vocabulary.limits import (
    RESIDENT_MEMORY_MB_DEFAULT,
    RESIDENT_PAIR_POSTINGS_DEFAULT,
    SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT,
)
from vocabulary.recall_modes import RECALL_MODE_HYBRID, RECALL_MODES


@dataclass(frozen=True)
class RecallSettings:
    mode: str
    """``hybrid`` or ``lexical`` (POWERCONTEXT_RECALL_MODE)."""
    fusion: Mapping[str, Any]
    """Fusion parameters by model name (POWERCONTEXT_RECALL_FUSION)."""
    resident_memory_mb: float
    resident_pair_postings: int
    resident_vectors_mb: float
    resident_vectors_quantized_from: int
    search_index_dir: str
    """"" when the search index is off."""
    search_index_min_documents: int
    search_index_max_lag: int


def _field(name: str, variable: str, problem: conf.Problem, default: object, **kwargs: Any) -> conf.Field:
    return conf.Field(name, variable, variable, problem, default, **kwargs)


recall_settings = conf.Accessor(
    RecallSettings,
    (
        _field("mode", "POWERCONTEXT_RECALL_MODE", conf.one_of(RECALL_MODES), RECALL_MODE_HYBRID),
        _field("fusion", "POWERCONTEXT_RECALL_FUSION", conf.mapping, {}),
        _field("resident_memory_mb", "POWERCONTEXT_RESIDENT_MEMORY_MB", conf.amount(0), RESIDENT_MEMORY_MB_DEFAULT),
        _field(
            "resident_pair_postings",
            "POWERCONTEXT_RESIDENT_PAIR_POSTINGS",
            conf.whole(0),
            RESIDENT_PAIR_POSTINGS_DEFAULT,
        ),
        _field("resident_vectors_mb", "POWERCONTEXT_RESIDENT_VECTORS_MB", conf.amount(0), 256),
        _field(
            "resident_vectors_quantized_from", "POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM", conf.whole(0), 25_000
        ),
        _field("search_index_dir", "POWERCONTEXT_SEARCH_INDEX_DIR", conf.optional_path, "", convert=conf.path_text),
        _field(
            "search_index_min_documents",
            "POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS",
            conf.whole(1),
            SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT,
        ),
        _field("search_index_max_lag", "POWERCONTEXT_SEARCH_INDEX_MAX_LAG", conf.whole(1), 2_000),
    ),
    check_id="powercontext.E010",
)
"""``recall_settings()``: this process's ``RecallSettings``."""
