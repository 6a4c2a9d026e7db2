"""Typed inputs and outputs of the pure assembly core.

Everything here is an immutable value. Recall sources return `Candidate`s (shared vocabulary), the core
returns a `PreparedResult` whose `origins` and `decisions` are typed: provenance is never re-derived
from rendered text. This module imports nothing from Django.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from vocabulary.citation import Candidate as Candidate  # re-exported: the core's input, shared vocabulary
from vocabulary.citation import Citation as Citation

STATUS_READY = "ready"
STATUS_EMPTY = "empty"
RESULT_STATUSES = (STATUS_READY, STATUS_EMPTY)
"""Every status a prepared result has."""

OUTCOME_INCLUDED = "included"
OUTCOME_INCLUDED_TRUNCATED = "included_truncated"
OUTCOME_SKIPPED = "skipped"

REASON_POOL_CAP = "pool_cap"
REASON_NO_BODY = "no_body"
REASON_DUPLICATE = "duplicate"
REASON_FAMILY_LIMIT_REACHED = "family_limit_reached"
REASON_BUDGET = "budget"
REASON_TRUNCATION_BELOW_MINIMUM = "truncation_below_minimum"
REASON_FAMILY_NOT_SELECTED = "family_not_selected"

# The selection policy's reasons (seeds/003; only a prepare that asks for the policy gives them).
REASON_SCOPE_MISMATCH = "scope_mismatch"
REASON_LOW_CONFIDENCE = "low_confidence"
REASON_UNKNOWN_AUTHORITY = "unknown_authority"
REASON_DUPLICATE_CONTENT = "duplicate_content"
REASON_AUTHORITY_LOSER = "authority_loser"
REASON_CONFLICT_LOSER = "conflict_loser"
REASON_TOKEN_BUDGET_EXCEEDED = "token_budget_exceeded"

POLICY_REASONS = (
    REASON_SCOPE_MISMATCH,
    REASON_LOW_CONFIDENCE,
    REASON_UNKNOWN_AUTHORITY,
    REASON_DUPLICATE_CONTENT,
    REASON_AUTHORITY_LOSER,
    REASON_CONFLICT_LOSER,
    REASON_TOKEN_BUDGET_EXCEEDED,
)

REASONS = (
    REASON_POOL_CAP,
    REASON_NO_BODY,
    REASON_DUPLICATE,
    REASON_FAMILY_LIMIT_REACHED,
    REASON_BUDGET,
    REASON_TRUNCATION_BELOW_MINIMUM,
    REASON_FAMILY_NOT_SELECTED,
    *POLICY_REASONS,
)

# What the selection policy notes of a candidate a gate let through without weighing it (``Decision.note``): beside
# its outcome and reason, never instead of them.
NOTE_GATE_NOT_APPLICABLE = "gate_not_applicable"
"""The confidence gate (``min_score`` > 0) did not apply: the candidate's family has no recall score (a profile
snapshot is requested by its section, not ranked by the query), so the later gates and packing decide it."""

NOTES = (NOTE_GATE_NOT_APPLICABLE,)
"""Every note a decision can carry."""


@dataclass(frozen=True, slots=True)
class SectionSpec:
    family: str
    limit: int


@dataclass(frozen=True, slots=True)
class AssemblyOptions:
    format: str
    sections: tuple[SectionSpec, ...]
    show: frozenset[str]


@dataclass(frozen=True, slots=True)
class FieldError:
    path: str
    message: str


class AssemblyValidationError(ValueError):
    """Invalid assembly options; `errors` lists every problem found, in document order."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__("; ".join(f"{error.path}: {error.message}" for error in self.errors))


@dataclass(frozen=True, slots=True)
class Origin:
    """One included entry, in content order."""

    citation: Citation
    section_family: str
    number: int
    recall_rank: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class Decision:
    """What happened to one candidate, for the operator's decision log.

    The last five fields are the selection policy's (all None for a prepare that did not ask for it).
    """

    citation: Citation
    recall_rank: int | None
    outcome: str
    reason: str | None
    bytes: int | None
    authority: str | None = None
    """The tier of the candidate's scope (an unknown stored value as stored); None outside the scopes read."""
    conflict_slot: str | None = None
    """The candidate's normalized conflict slot, if its writer declared one."""
    winner: Citation | None = None
    """The candidate that beat it (``duplicate_content``, ``authority_loser``, ``conflict_loser``)."""
    score: float | None = None
    """The recall score the policy ranked it by."""
    note: str | None = None
    """One of ``NOTES``: what a gate noted without deciding it (``gate_not_applicable``: the confidence gate skipped
    it)."""


@dataclass(frozen=True, slots=True)
class PreparedResult:
    status: str
    content: str | None
    content_bytes: int
    origins: tuple[Origin, ...]
    decisions: tuple[Decision, ...]


Recalled: TypeAlias = Mapping[str, Sequence[Sequence[Candidate]]]
"""family -> per-scope hit lists in scope order, each in retrieval order."""
