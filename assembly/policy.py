"""The selection policy of a prepare (seeds/003): its request object, parsed, and what the core needs to apply it.

``selection`` is an optional request object beside ``assembly`` (Markdown V1 only)::

    {"policy": "authority-v1", "min_score": 0.35, "max_tokens": 800}

``parse_selection_policy`` is the one place its rules live (pure Python, no Django): the HTTP layer and direct
runtime calls use it, every bad value is a field error, every error is listed. The tiers the policy ranks by are
never part of the request: the runtime reads them from the operator's configuration of each scope read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from vocabulary.errors import unknown_field_problems
from vocabulary.limits import SELECTION_MAX_TOKENS_MAX

from .types import AssemblyValidationError, FieldError

POLICY_AUTHORITY_V1 = "authority-v1"
"""Scope → confidence → authority → dedupe → conflict → top-k / byte and token budgets (docs/design-notes.md)."""
POLICIES = (POLICY_AUTHORITY_V1,)

_SELECTION_KEYS = ("policy", "min_score", "max_tokens")
NEEDS_ASSEMBLY = "needs assembly (Markdown V1); the legacy envelope has no selection policy"


@dataclass(frozen=True, slots=True)
class SelectionPolicy:
    """A validated ``selection`` object: ``min_score`` 0 turns the confidence gate off, ``max_tokens`` None the
    token budget."""

    policy: str = POLICY_AUTHORITY_V1
    min_score: float = 0.0
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    """Everything the core needs to apply a policy to one prepare, besides the candidates, which carry the evidence
    the policy ranks by in their own fields (``Candidate.score``, ``captured_at``, ``conflict_key``: the runtime
    gives them what their recall source returned beside them).

    ``scopes``: the scopes the prepare read, the current one first (the scope gate; a current-scope-only family
    reads the first alone). ``tiers``: the operator's tier of each of them, as stored (None: not configured, the
    default tier; any value that is not a tier fails closed).
    """

    policy: SelectionPolicy
    scopes: tuple[str, ...]
    tiers: Mapping[str, str | None] = field(default_factory=dict)


def _score_threshold(value: object) -> float | None:
    """A JSON number as a finite float ≥ 0, or None (booleans, text, NaN, infinities, 1e400 are refused)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


_SELECTION_KEY_SET = frozenset(_SELECTION_KEYS)


def _plainly_valid(raw: object) -> SelectionPolicy | None:
    """The policy of a ``selection`` that is valid at a glance (known keys, a known policy, a float or absent
    ``min_score`` ≥ 0 and finite, an int or absent ``max_tokens`` in range), else None: the full check below then
    decides, and lists every problem. Every prepare that asks for the policy parses one."""
    if type(raw) is not dict or not _SELECTION_KEY_SET.issuperset(raw):
        return None
    if type(policy := raw.get("policy")) is not str or policy not in POLICIES:
        return None
    min_score = raw.get("min_score", 0.0)
    if type(min_score) is not float or not 0.0 <= min_score < math.inf:  # false for NaN too
        return None
    max_tokens = raw.get("max_tokens")
    if "max_tokens" in raw and (type(max_tokens) is not int or not 1 <= max_tokens <= SELECTION_MAX_TOKENS_MAX):
        return None  # null included: refused below
    return SelectionPolicy(policy, min_score, max_tokens)


def parse_selection_policy(raw: object, *, path: str = "selection") -> SelectionPolicy:
    """Validate a JSON-decoded ``selection`` value; raises ``AssemblyValidationError`` listing every problem."""
    if (accepted := _plainly_valid(raw)) is not None:
        return accepted
    if raw is None:
        raise AssemblyValidationError([FieldError(path, "must not be null")])
    if not isinstance(raw, dict):
        raise AssemblyValidationError([FieldError(path, "must be an object")])
    errors = [FieldError(where, message) for where, message in unknown_field_problems(raw, _SELECTION_KEYS, path)]
    policy = raw.get("policy")
    if "policy" not in raw:
        errors.append(FieldError(f"{path}.policy", "is required"))
    elif not isinstance(policy, str) or policy not in POLICIES:
        errors.append(FieldError(f"{path}.policy", "must be one of " + ", ".join(f'"{p}"' for p in POLICIES)))
    min_score = _score_threshold(raw.get("min_score", 0.0))
    if min_score is None:
        errors.append(FieldError(f"{path}.min_score", "must be a number greater than or equal to 0"))
    max_tokens = raw.get("max_tokens")
    if "max_tokens" in raw:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            errors.append(FieldError(f"{path}.max_tokens", "must be an integer"))
        elif not 1 <= max_tokens <= SELECTION_MAX_TOKENS_MAX:
            errors.append(FieldError(f"{path}.max_tokens", f"must be between 1 and {SELECTION_MAX_TOKENS_MAX}"))
    if errors or not isinstance(policy, str) or min_score is None:  # the last two are errors listed above
        raise AssemblyValidationError(errors)
    return SelectionPolicy(policy=policy, min_score=min_score, max_tokens=max_tokens)
