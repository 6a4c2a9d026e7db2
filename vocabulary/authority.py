"""Authority tiers of the selection policy (seeds/003): who said it, not how well it matched.

A tier is never a score weight: a candidate of a lower tier never beats one of a higher tier in the same conflict
slot, whatever its score, rank or age. Tiers come only from the trusted side (the operator's configuration of a
scope), never from stored text or a model.
"""

from __future__ import annotations

AUTHORITY_CURRENT_TURN = "current_turn"
"""What the user asked for this task only (a host writes it to a turn scope before it prepares)."""

AUTHORITY_WORKSPACE_OVERRIDE = "workspace_override"
"""A convention of the current project or workspace."""

AUTHORITY_USER_DEFAULT = "user_default"
"""A personal default reused across projects; the tier of every scope nobody configured."""

AUTHORITY_TIERS = (AUTHORITY_CURRENT_TURN, AUTHORITY_WORKSPACE_OVERRIDE, AUTHORITY_USER_DEFAULT)
"""Every tier, highest first."""

AUTHORITY_DEFAULT = AUTHORITY_USER_DEFAULT
