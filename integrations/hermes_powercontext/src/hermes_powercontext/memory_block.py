"""The provider's injected memory block, planned with the client's prompt planner and logged.

Hermes 0.19 lets a memory provider shape only what its ``prefetch`` returns (and a static system-prompt block),
so the plan has one optional segment, the prepared text, kept or dropped whole under the provider's budgets.
"""

from __future__ import annotations

import logging

from powercontext_client import PromptPlan, PromptSegment, TokenCounter, plan_prompt
from powercontext_client.prompt import REASON_EMPTY

logger = logging.getLogger("hermes_powercontext")

MEMORY_SEGMENT = "powercontext_memory"
"""The name of the prepared text's prompt segment (and of its decisions)."""


def _limit(value: int | None) -> str:
    return "no limit" if value is None else str(value)


def plan_memory_block(
    segment: PromptSegment, *, max_chars: int | None, max_tokens: int | None, token_counter: TokenCounter
) -> PromptPlan:
    """Plan the memory segment under the budgets; log every decision (DEBUG) and a dropped block (WARNING)."""
    plan = plan_prompt([segment], max_chars=max_chars, max_tokens=max_tokens, token_counter=token_counter)
    for decision in plan.decisions:
        logger.debug(
            "PowerContext prompt segment %s (%s): %s, %s; %d characters, %d tokens",
            decision.name,
            decision.source,
            decision.status,
            decision.reason,
            decision.chars,
            decision.tokens,
        )
        if not decision.included and decision.reason != REASON_EMPTY:
            logger.warning(
                "PowerContext memory not injected: %s (%d characters, %d tokens; budget %s characters, %s tokens). "
                "Lower max_bytes or raise prompt_max_tokens / prompt_max_chars.",
                decision.reason,
                decision.chars,
                decision.tokens,
                _limit(max_chars),
                _limit(max_tokens),
            )
    return plan
