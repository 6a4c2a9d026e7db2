"""Artifact families and the per-family numbers every layer shares."""

from __future__ import annotations

ASSEMBLED_FAMILIES = ("memory", "experience", "profile", "topic_memory")
"""Families that prepare can assemble (the RFC's sections), in the RFC's order."""

BODY_ONLY_FAMILIES = ("skill", "handoff", "source")
"""Families storage keeps (one body per revision) that prepare never reads."""

STORED_FAMILIES = ASSEMBLED_FAMILIES + BODY_ONLY_FAMILIES
"""Every family storage knows."""

CURRENT_SCOPE_ONLY_FAMILIES = frozenset({"topic_memory"})
"""Families whose candidates come from the current scope only, never from referenced scopes."""

POOL_CAP: dict[str, int | None] = {"memory": 16, "experience": 8, "topic_memory": 8, "profile": None}
"""The merged candidate pool per family after cross-scope interleaving (None: uncapped).

Recall never needs more than this many candidates of one scope: no more can enter the pool.
"""

UNSCORED_FAMILIES = frozenset({"profile"})
"""Families recall returns by their section, not by the query: their candidates have no recall score (a scope's
profile snapshot), so a selection policy's confidence gate does not apply to them."""

FAMILY_LIMIT_MAX = {"memory": 16, "experience": 8, "topic_memory": 8, "profile": 8}
"""The largest ``limit`` a request may give a section of each family."""

DEFAULT_SECTIONS = (("memory", 6), ("experience", 2))
"""``assembly: {}``: memory up to 6, then experience up to 2."""

LEGACY_FAMILIES = ("memory", "topic_memory", "experience")
"""The legacy envelope's families, in output order."""

LEGACY_LIMITS = {"memory": 6, "topic_memory": 2, "experience": 2}
"""The legacy envelope's entries per family."""

PROFILE_ARTIFACT_ID = "profile"
"""The one profile artifact of a scope that prepare reads."""

SECTION_TITLES = {
    "memory": "Memory",
    "experience": "Experience",
    "profile": "Profile",
    "topic_memory": "Topic Memory",
}
"""Markdown V1 section headings (also how operator pages name a family)."""
