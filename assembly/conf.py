"""The assembly app's settings, read through one accessor: ``assembly_settings().max_entries`` etc.

Read from ``django.conf.settings`` once and cached until a setting changes (``infrastructure/conf.py``); a bad value is
the system check error ``powercontext.E090`` naming its variable (registered by ``assembly/apps.py``, whose
``recall_configuration_check`` also refuses a source or a reranker that cannot be imported).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infrastructure import conf


@dataclass(frozen=True)
class AssemblySettings:
    max_entries: int
    """The most entries one assembly may ask for (the sum of its sections' limits)."""
    recall_sources: Mapping[str, str | None]
    """Each family's recall callable, as a dotted path (absent or empty: not configured)."""
    memory_reranker: str | None
    """The dotted path of ``callable(query, candidates) -> candidates``; None or "": none."""


def _sources(value: object) -> str | None:
    if isinstance(value, Mapping) and all(path is None or isinstance(path, str) for path in value.values()):
        return None
    return "must map families to dotted paths"


assembly_settings = conf.Accessor(
    AssemblySettings,
    (
        conf.Field(
            "max_entries",
            "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES",
            "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES",
            conf.whole(1),
            32,
        ),
        conf.Field("recall_sources", "POWERCONTEXT_RECALL_SOURCES", "POWERCONTEXT_RECALL_SOURCES", _sources, {}),
        conf.Field(
            "memory_reranker", "POWERCONTEXT_MEMORY_RERANKER", "POWERCONTEXT_MEMORY_RERANKER", conf.optional_text, None
        ),
    ),
    check_id="powercontext.E090",
)
"""``assembly_settings()``: this process's ``AssemblySettings``."""
