"""The host-side prompt planner of the selection chapter (seeds/003, "两层预算" and "展示顺序和预算价值是两件事").

PowerContext selects and packs memory on the server (the first budget: which memory items go into the prepared
text). A host then assembles its whole prompt from several segments, of which the prepared memory is one; this
module is that second budget. Each :class:`PromptSegment` is either *required* (base instructions, tool
boundaries, working mode: never dropped) or optional (recalled memory, project context, skills, ...), and has
two independent orders:

- ``priority``: where the segment is rendered (lower first);
- ``budget_priority``: who gets space first when the budget is tight (lower first).

:func:`plan_prompt` reserves the required segments first and raises :class:`PromptBudgetError` when they alone
exceed a budget (fail closed: a required segment is never dropped or cut). Optional segments are then tried in
``budget_priority`` order (ties by name), each atomic: one is included when the rendered prompt with it still
fits both budgets (separators counted), else it is rejected with ``char_budget_exceeded`` or
``token_budget_exceeded`` and smaller ones after it may still fit. The result is a :class:`PromptPlan` with one
:class:`SegmentDecision` per segment, a log kept apart from the server's memory decision log: the server's says
why a memory item was not selected, this one why a whole prompt segment was left out.

Tokens are counted by ``token_counter``, any callable ``str -> int``. The default is the chapter's transparent
offline estimate (:func:`powercontext_client.tokens.estimate_context_tokens`, the same units as the server); a
host that needs its model's real count passes its tokenizer, e.g. with tiktoken::

    encoding = tiktoken.get_encoding("o200k_base")
    plan = plan_prompt(segments, max_tokens=6000, token_counter=lambda text: len(encoding.encode(text)))

Pure standard library, no I/O, deterministic: the same segments in any input order give the same plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .tokens import estimate_context_tokens

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text: the offline estimate by default, or a model's real tokenizer."""

INCLUDED = "included"
REJECTED = "rejected"

REASON_REQUIRED = "required"
"""Included: a required segment, reserved before any optional one."""
REASON_WITHIN_BUDGET = "within_budget"
"""Included: an optional segment for which both budgets still had room."""
REASON_EMPTY = "empty"
"""Rejected: the segment has no text (nothing but whitespace), so nothing is rendered for it."""
REASON_CHAR_BUDGET = "char_budget_exceeded"
"""Rejected: with this segment the rendered prompt would exceed ``max_chars``."""
REASON_TOKEN_BUDGET = "token_budget_exceeded"
"""Rejected: with this segment the rendered prompt would exceed ``max_tokens``."""

DEFAULT_SEPARATOR = "\n\n"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class PromptSegment:
    """One piece of a host's prompt, rendered whole or not at all.

    ``priority`` orders the rendered prompt and ``budget_priority`` the claim on the budget (both lower
    first, ties by name). ``source`` says where the text came from (a file, ``powercontext:<scope>``, ...),
    for the decision log.
    """

    name: str
    text: str
    required: bool = False
    priority: int = 0
    budget_priority: int = 0
    source: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a prompt segment needs a non-empty name")
        if not isinstance(self.text, str):
            raise TypeError(f"segment {self.name!r}: text must be a string, not {type(self.text).__name__}")
        if not isinstance(self.required, bool):
            raise TypeError(f"segment {self.name!r}: required must be True or False")
        if not _is_int(self.priority) or not _is_int(self.budget_priority):
            raise TypeError(f"segment {self.name!r}: priority and budget_priority must be integers")
        if self.source is not None and not isinstance(self.source, str):
            raise TypeError(f"segment {self.name!r}: source must be a string or None")

    @property
    def is_empty(self) -> bool:
        return not self.text.strip()


@dataclass(frozen=True)
class SegmentDecision:
    """Why one segment is or is not in the prompt; ``chars`` and ``tokens`` measure the segment alone."""

    name: str
    required: bool
    status: str
    reason: str
    chars: int
    tokens: int
    source: str | None = None

    @property
    def included(self) -> bool:
        return self.status == INCLUDED


@dataclass(frozen=True)
class PromptPlan:
    """The rendered prompt and its decision log.

    ``text`` joins the included segments in ``priority`` order; ``used_chars`` and ``used_tokens`` measure
    exactly that text (separators included). ``decisions`` lists every segment in the order it was
    considered: required ones first, then optional ones, each by ``budget_priority`` (ties by name).
    """

    text: str
    used_chars: int
    used_tokens: int
    decisions: tuple[SegmentDecision, ...]
    included: tuple[str, ...]
    max_chars: int | None = None
    max_tokens: int | None = None

    @property
    def rejected(self) -> tuple[SegmentDecision, ...]:
        return tuple(decision for decision in self.decisions if not decision.included)

    def decision(self, name: str) -> SegmentDecision:
        """The decision about the segment called ``name`` (``KeyError`` if there is none)."""
        for decision in self.decisions:
            if decision.name == name:
                return decision
        raise KeyError(name)


class PromptBudgetError(ValueError):
    """The required segments alone do not fit the budget: no prompt is built (fail closed).

    ``required_chars`` and ``required_tokens`` measure the prompt of the required segments alone;
    ``decisions`` holds one rejected decision per required segment, with the budget that was exceeded.
    """

    def __init__(
        self,
        *,
        decisions: tuple[SegmentDecision, ...],
        required_chars: int,
        required_tokens: int,
        max_chars: int | None,
        max_tokens: int | None,
    ) -> None:
        self.decisions = decisions
        self.required_chars = required_chars
        self.required_tokens = required_tokens
        self.max_chars = max_chars
        self.max_tokens = max_tokens
        names = ", ".join(decision.name for decision in decisions)
        super().__init__(
            f"the required segments ({names}) need {required_chars} characters and {required_tokens} tokens; "
            f"the budget is {_limit(max_chars)} characters and {_limit(max_tokens)} tokens"
        )


def _limit(value: int | None) -> str:
    return "unlimited" if value is None else str(value)


def _check_budget(name: str, value: int | None) -> None:
    if value is not None and (not _is_int(value) or value < 0):
        raise ValueError(f"{name} must be None or a non-negative integer, not {value!r}")


def _render_order(segment: PromptSegment) -> tuple[int, str]:
    return (segment.priority, segment.name)


def _budget_order(segment: PromptSegment) -> tuple[int, str]:
    return (segment.budget_priority, segment.name)


class _Measure:
    """Counts characters and tokens, checking what the token counter returns."""

    def __init__(self, token_counter: TokenCounter, separator: str) -> None:
        self._count = token_counter
        self._separator = separator

    def tokens(self, text: str) -> int:
        tokens = self._count(text)
        if not _is_int(tokens) or tokens < 0:
            raise ValueError(f"the token counter returned {tokens!r}; it must return a non-negative integer")
        return tokens

    def render(self, segments: Iterable[PromptSegment]) -> str:
        return self._separator.join(segment.text for segment in sorted(segments, key=_render_order))

    def exceeded(self, text: str, max_chars: int | None, max_tokens: int | None) -> tuple[str | None, int]:
        """The budget ``text`` exceeds (characters checked first) or None, and its token count."""
        tokens = self.tokens(text)
        if max_chars is not None and len(text) > max_chars:
            return REASON_CHAR_BUDGET, tokens
        if max_tokens is not None and tokens > max_tokens:
            return REASON_TOKEN_BUDGET, tokens
        return None, tokens


def plan_prompt(
    segments: Iterable[PromptSegment],
    *,
    max_chars: int | None = None,
    max_tokens: int | None = None,
    token_counter: TokenCounter = estimate_context_tokens,
    separator: str = DEFAULT_SEPARATOR,
) -> PromptPlan:
    """Plan a prompt from ``segments`` under a character and a token budget (``None``: no limit).

    Raises ``ValueError`` for two segments with one name or a required segment without text,
    :class:`PromptBudgetError` when the required segments alone exceed a budget. Every fit is measured on
    the whole rendered text (separators included), so ``used_chars <= max_chars`` and
    ``used_tokens <= max_tokens`` hold for any token counter.
    """
    _check_budget("max_chars", max_chars)
    _check_budget("max_tokens", max_tokens)
    if not isinstance(separator, str):
        raise TypeError("separator must be a string")
    segments = tuple(segments)
    seen: set[str] = set()
    for segment in segments:
        if not isinstance(segment, PromptSegment):
            raise TypeError(f"expected PromptSegment, not {type(segment).__name__}")
        if segment.name in seen:
            raise ValueError(f"two prompt segments are called {segment.name!r}")
        seen.add(segment.name)
        if segment.required and segment.is_empty:
            raise ValueError(f"required segment {segment.name!r} has no text")
    measure = _Measure(token_counter, separator)

    def decide(segment: PromptSegment, status: str, reason: str) -> SegmentDecision:
        return SegmentDecision(
            segment.name,
            segment.required,
            status,
            reason,
            len(segment.text),
            measure.tokens(segment.text),
            segment.source,
        )

    required = sorted((segment for segment in segments if segment.required), key=_budget_order)
    optional = sorted((segment for segment in segments if not segment.required), key=_budget_order)

    chosen = list(required)
    text = measure.render(chosen)
    exceeded, tokens = measure.exceeded(text, max_chars, max_tokens)
    if exceeded is not None:
        raise PromptBudgetError(
            decisions=tuple(decide(segment, REJECTED, exceeded) for segment in required),
            required_chars=len(text),
            required_tokens=tokens,
            max_chars=max_chars,
            max_tokens=max_tokens,
        )
    decisions = [decide(segment, INCLUDED, REASON_REQUIRED) for segment in required]
    for segment in optional:
        if segment.is_empty:
            decisions.append(decide(segment, REJECTED, REASON_EMPTY))
            continue
        candidate = measure.render([*chosen, segment])
        exceeded, candidate_tokens = measure.exceeded(candidate, max_chars, max_tokens)
        if exceeded is not None:
            decisions.append(decide(segment, REJECTED, exceeded))
            continue
        chosen.append(segment)
        text, tokens = candidate, candidate_tokens
        decisions.append(decide(segment, INCLUDED, REASON_WITHIN_BUDGET))
    return PromptPlan(
        text=text,
        used_chars=len(text),
        used_tokens=tokens,
        decisions=tuple(decisions),
        included=tuple(segment.name for segment in sorted(chosen, key=_render_order)),
        max_chars=max_chars,
        max_tokens=max_tokens,
    )
