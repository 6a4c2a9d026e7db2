"""Recall's settings (recall, search index), read through one accessor: ``recall_settings().mode`` etc.; dense
recall's embeddings through another: ``embeddings_settings().provider`` etc.

Read from ``django.conf.settings`` once and cached until a setting changes (``infrastructure/conf.py``); a bad value is
the system check error ``powercontext.E010`` (``E040``: embeddings) naming its environment variable (registered by
``artifacts/apps.py``). The fusion parameters' contents are the check error ``powercontext.E011``
(``hybrid.fusion_settings_check``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infrastructure import conf
from vocabulary.limits import (
    DENSE_INDEX_MIN_VECTORS_DEFAULT,
    RESIDENT_MEMORY_MB_DEFAULT,
    RESIDENT_PAIR_POSTINGS_DEFAULT,
    SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT,
)
from vocabulary.recall_modes import EMBEDDINGS_WRITE_INLINE, EMBEDDINGS_WRITE_MODES, RECALL_MODE_HYBRID, RECALL_MODES


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
    dense_index_min_vectors: int


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
        _field(
            "dense_index_min_vectors",
            "POWERCONTEXT_DENSE_INDEX_MIN_VECTORS",
            conf.whole(1),
            DENSE_INDEX_MIN_VECTORS_DEFAULT,
        ),
    ),
    check_id="powercontext.E010",
)
"""``recall_settings()``: this process's ``RecallSettings``."""


QUERY_TIMEOUT_DEFAULT = 0.5
"""Seconds a prepare waits for its query's embedding when the settings name no ``query_timeout``."""
QUERY_CACHE_DEFAULT = 256
"""Query vectors kept per process when the settings name no ``query_cache``."""
DEFAULT_WRITE_WAIT = 2.0
"""Seconds a write waits for an endpoint's vectors when ``POWERCONTEXT_EMBEDDINGS`` names no ``write_wait``."""
EMBEDDINGS_PROVIDERS = ("packaged", "endpoint", "off")


@dataclass(frozen=True)
class EmbeddingsSettings:
    """POWERCONTEXT_EMBEDDINGS, typed: a key the dictionary lacks takes the value the code always gave it."""

    options: Mapping[str, Any]
    """The dictionary itself (what ``providers.provider_from_settings`` builds the provider from)."""
    provider: str
    url: str | None
    model: str | None
    api_key: str | None
    dimension: int
    batch_size: int
    timeout: float
    write_wait: float
    write: str
    """``inline`` or ``deferred`` (``vectors.write``, ``vectors.drainer``)."""
    query_prefix: str
    passage_prefix: str
    input_type: bool
    threads: int
    query_timeout: float
    query_cache: int


def _option(name: str, problem: conf.Problem, default: object) -> conf.Field:
    return conf.Field(
        name, "POWERCONTEXT_EMBEDDINGS", f"POWERCONTEXT_EMBEDDINGS_{name.upper()}", problem, default, key=name
    )


embeddings_settings = conf.Accessor(
    EmbeddingsSettings,
    (
        conf.Field("options", "POWERCONTEXT_EMBEDDINGS", "POWERCONTEXT_EMBEDDINGS", conf.mapping, {}),
        _option("provider", conf.one_of(EMBEDDINGS_PROVIDERS), "off"),
        _option("url", conf.optional_text, None),
        _option("model", conf.optional_text, None),
        _option("api_key", conf.optional_text, None),
        _option("dimension", conf.whole(0), 0),
        _option("batch_size", conf.whole(1), 32),
        _option("timeout", conf.seconds, 10.0),
        _option("write_wait", conf.seconds, DEFAULT_WRITE_WAIT),
        # A dictionary without the key: what writes always did.
        _option("write", conf.one_of(EMBEDDINGS_WRITE_MODES), EMBEDDINGS_WRITE_INLINE),
        _option("query_prefix", conf.text, ""),
        _option("passage_prefix", conf.text, ""),
        _option("input_type", conf.boolean, False),
        _option("threads", conf.whole(1), 1),
        _option("query_timeout", conf.seconds, QUERY_TIMEOUT_DEFAULT),
        _option("query_cache", conf.whole(0), QUERY_CACHE_DEFAULT),
    ),
    check_id="powercontext.E040",
)
"""``embeddings_settings()``: this process's ``EmbeddingsSettings``."""
