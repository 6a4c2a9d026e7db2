"""The host-side prompt planner: required segments reserved first and never dropped, optional ones by budget
priority, rendering by priority, exact measures, and a decision log of its own."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from powercontext_client import (
    PromptBudgetError,
    PromptPlan,
    PromptSegment,
    SegmentDecision,
    estimate_context_tokens,
    plan_prompt,
)

BASE = PromptSegment("base", "Follow the operator's rules.", required=True, priority=0, budget_priority=0)
MODE = PromptSegment("mode", "Working mode: plan.", required=True, priority=99, budget_priority=0)
MEMORY = PromptSegment("memory", "Releases tag main; CI publishes.", priority=20, budget_priority=30, source="pc")
PROJECT = PromptSegment("project", "The repo is a Django server.", priority=10, budget_priority=10)


def statuses(plan: PromptPlan) -> dict[str, tuple[str, str]]:
    return {decision.name: (decision.status, decision.reason) for decision in plan.decisions}


def test_without_budgets_every_segment_is_rendered_in_priority_order():
    plan = plan_prompt([MEMORY, MODE, PROJECT, BASE])
    assert plan.included == ("base", "project", "memory", "mode")
    assert plan.text == "\n\n".join(s.text for s in (BASE, PROJECT, MEMORY, MODE))
    assert statuses(plan) == {
        "base": ("included", "required"),
        "mode": ("included", "required"),
        "project": ("included", "within_budget"),
        "memory": ("included", "within_budget"),
    }


def test_the_decision_log_lists_required_first_then_optional_by_budget_priority():
    plan = plan_prompt([MEMORY, MODE, PROJECT, BASE])
    assert [decision.name for decision in plan.decisions] == ["base", "mode", "project", "memory"]


def test_decisions_measure_each_segment_alone_and_carry_its_source():
    decision = plan_prompt([MEMORY]).decision("memory")
    assert decision == SegmentDecision(
        "memory", False, "included", "within_budget", len(MEMORY.text), estimate_context_tokens(MEMORY.text), "pc"
    )
    with pytest.raises(KeyError):
        plan_prompt([MEMORY]).decision("absent")


def test_a_tight_budget_drops_the_optional_segment_with_the_lower_budget_claim_first():
    # Project context claims space first (budget_priority 10) although memory renders after it.
    budget = len(BASE.text) + len(MODE.text) + len(PROJECT.text) + 4 + 2 + 5
    plan = plan_prompt([BASE, MODE, PROJECT, MEMORY], max_chars=budget)
    assert plan.included == ("base", "project", "mode")
    assert statuses(plan)["memory"] == ("rejected", "char_budget_exceeded")
    assert plan.used_chars == len(plan.text) <= budget


def test_separators_count_against_the_character_budget():
    exact = len(BASE.text) + 2 + len(PROJECT.text)
    assert plan_prompt([BASE, PROJECT], max_chars=exact).included == ("base", "project")
    plan = plan_prompt([BASE, PROJECT], max_chars=exact - 1)
    assert plan.included == ("base",)
    assert statuses(plan)["project"] == ("rejected", "char_budget_exceeded")


def test_a_segment_over_the_token_budget_is_rejected_whole_and_smaller_ones_still_fit():
    long = PromptSegment("long", "word " * 50, budget_priority=1)
    short = PromptSegment("short", "two words", budget_priority=2)
    plan = plan_prompt([BASE, long, short], max_tokens=estimate_context_tokens(BASE.text) + 2)
    assert plan.included == ("base", "short")
    assert statuses(plan)["long"] == ("rejected", "token_budget_exceeded")
    assert "word word" not in plan.text  # never cut


def test_the_character_budget_is_reported_when_both_are_exceeded():
    plan = plan_prompt([PromptSegment("x", "many words here")], max_chars=3, max_tokens=1)
    assert statuses(plan)["x"] == ("rejected", "char_budget_exceeded")


def test_required_segments_that_do_not_fit_raise_instead_of_being_dropped():
    with pytest.raises(PromptBudgetError) as caught:
        plan_prompt([BASE, MODE, MEMORY], max_chars=len(BASE.text))
    error = caught.value
    assert error.required_chars == len(BASE.text) + 2 + len(MODE.text)
    assert error.max_chars == len(BASE.text)
    assert [(d.name, d.status, d.reason) for d in error.decisions] == [
        ("base", "rejected", "char_budget_exceeded"),
        ("mode", "rejected", "char_budget_exceeded"),
    ]
    assert "base, mode" in str(error)


def test_required_segments_over_the_token_budget_raise_with_their_token_need():
    need = estimate_context_tokens(BASE.text + "\n\n" + MODE.text)
    with pytest.raises(PromptBudgetError) as caught:
        plan_prompt([BASE, MODE], max_tokens=need - 1)
    assert (caught.value.required_tokens, caught.value.max_tokens) == (need, need - 1)
    assert {d.reason for d in caught.value.decisions} == {"token_budget_exceeded"}
    assert plan_prompt([BASE, MODE], max_tokens=need).used_tokens == need


def test_an_empty_optional_segment_is_logged_and_not_rendered():
    plan = plan_prompt([BASE, PromptSegment("memory", "  \n"), PROJECT])
    assert plan.included == ("base", "project")
    assert statuses(plan)["memory"] == ("rejected", "empty")
    assert plan.text == BASE.text + "\n\n" + PROJECT.text


def test_a_required_segment_without_text_is_refused():
    with pytest.raises(ValueError, match="has no text"):
        plan_prompt([PromptSegment("base", " ", required=True)])


def test_duplicate_names_are_refused():
    with pytest.raises(ValueError, match="two prompt segments"):
        plan_prompt([MEMORY, PromptSegment("memory", "other")])


@pytest.mark.parametrize("budget", [-1, 1.5, True, "10"])
def test_invalid_budgets_are_refused(budget):
    with pytest.raises(ValueError):
        plan_prompt([BASE], max_chars=budget)
    with pytest.raises(ValueError):
        plan_prompt([BASE], max_tokens=budget)


@pytest.mark.parametrize(
    "fields",
    [{"name": ""}, {"text": None}, {"required": 1}, {"priority": 1.0}, {"budget_priority": "1"}, {"source": 3}],
)
def test_malformed_segments_are_refused(fields):
    with pytest.raises((TypeError, ValueError)):
        PromptSegment(**({"name": "x", "text": "t"} | fields))


def test_a_token_counter_returning_a_non_integer_is_refused():
    with pytest.raises(ValueError, match="token counter"):
        plan_prompt([BASE], token_counter=lambda text: 1.5)


def test_a_real_tokenizer_is_honoured():
    def characters(text: str) -> int:  # stands in for e.g. len(encoding.encode(text))
        return len(text)

    plan = plan_prompt([BASE, PROJECT], max_tokens=len(BASE.text) + 5, token_counter=characters)
    assert plan.included == ("base",)
    assert plan.used_tokens == len(BASE.text)
    assert plan.decision("project").tokens == len(PROJECT.text)
    assert plan.decision("project").reason == "token_budget_exceeded"


def test_a_custom_separator_is_rendered_and_counted():
    plan = plan_prompt([BASE, PROJECT], separator="\n---\n")
    assert plan.text == BASE.text + "\n---\n" + PROJECT.text
    assert plan.used_tokens == estimate_context_tokens(plan.text)


def test_no_segments_give_an_empty_prompt():
    plan = plan_prompt([])
    assert (plan.text, plan.used_chars, plan.used_tokens, plan.decisions, plan.included) == ("", 0, 0, (), ())


def test_the_planner_needs_nothing_but_the_standard_library():
    import powercontext_client.prompt as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    absolute = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    absolute |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0
    }
    relative = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level > 0}
    assert absolute <= set(sys.stdlib_module_names) | {"__future__"}
    assert relative == {"tokens"}  # the offline estimate, itself standard library only


# --- properties -----------------------------------------------------------------------------------------------

TEXT = st.text(alphabet=st.sampled_from("ab 中文,.\n"), max_size=30)


@st.composite
def segment_lists(draw) -> list[PromptSegment]:
    names = draw(st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=8))
    return [
        PromptSegment(
            name,
            draw(TEXT),
            required=draw(st.booleans()),
            priority=draw(st.integers(0, 3)),
            budget_priority=draw(st.integers(0, 3)),
        )
        for name in names
    ]


def valid(segments: list[PromptSegment]) -> list[PromptSegment]:
    """Drop required segments without text (refused by design) so that every drawn list plans."""
    return [segment for segment in segments if not (segment.required and segment.is_empty)]


BUDGET = st.none() | st.integers(0, 120)


def plan_or_error(segments, **budgets) -> PromptPlan | PromptBudgetError:
    try:
        return plan_prompt(segments, **budgets)
    except PromptBudgetError as error:
        return error


@settings(max_examples=300)
@given(segment_lists(), BUDGET, BUDGET)
def test_required_segments_are_always_rendered_or_the_plan_fails(segments, max_chars, max_tokens):
    segments = valid(segments)
    outcome = plan_or_error(segments, max_chars=max_chars, max_tokens=max_tokens)
    required = {segment.name for segment in segments if segment.required}
    if isinstance(outcome, PromptBudgetError):
        assert {decision.name for decision in outcome.decisions} == required
        over_chars = max_chars is not None and outcome.required_chars > max_chars
        over_tokens = max_tokens is not None and outcome.required_tokens > max_tokens
        assert over_chars or over_tokens
    else:
        assert required <= set(outcome.included)


@settings(max_examples=300)
@given(segment_lists(), BUDGET, BUDGET, st.randoms(use_true_random=False))
def test_the_plan_does_not_depend_on_the_input_order(segments, max_chars, max_tokens, random):
    segments = valid(segments)
    shuffled = list(segments)
    random.shuffle(shuffled)
    first = plan_or_error(segments, max_chars=max_chars, max_tokens=max_tokens)
    second = plan_or_error(shuffled, max_chars=max_chars, max_tokens=max_tokens)
    if isinstance(first, PromptBudgetError):
        assert isinstance(second, PromptBudgetError) and second.decisions == first.decisions
    else:
        assert second == first


@settings(max_examples=300)
@given(segment_lists(), BUDGET, BUDGET)
def test_rendering_follows_priority_and_the_budget_follows_budget_priority(segments, max_chars, max_tokens):
    segments = valid(segments)
    plan = plan_or_error(segments, max_chars=max_chars, max_tokens=max_tokens)
    if isinstance(plan, PromptBudgetError):
        return
    by_name = {segment.name: segment for segment in segments}
    rendered = [by_name[name] for name in plan.included]
    assert [(s.priority, s.name) for s in rendered] == sorted((s.priority, s.name) for s in rendered)
    assert plan.text == "\n\n".join(segment.text for segment in rendered)
    optional = [by_name[d.name] for d in plan.decisions if not d.required]
    assert [(s.budget_priority, s.name) for s in optional] == sorted((s.budget_priority, s.name) for s in optional)
    # Greedy by budget priority: a rejected non-empty optional segment would not have fitted next to the
    # segments chosen before it in budget order.
    chosen: list[PromptSegment] = [by_name[d.name] for d in plan.decisions if d.required]
    for decision in plan.decisions:
        if decision.required:
            continue
        segment = by_name[decision.name]
        trial = plan_prompt([*chosen, segment], max_chars=None, max_tokens=None)
        fits = (max_chars is None or trial.used_chars <= max_chars) and (
            max_tokens is None or trial.used_tokens <= max_tokens
        )
        assert decision.included == (fits and not segment.is_empty)
        if decision.included:
            chosen.append(segment)


@settings(max_examples=300)
@given(segment_lists(), BUDGET, BUDGET)
def test_used_measures_are_the_real_measures_of_the_rendered_text(segments, max_chars, max_tokens):
    plan = plan_or_error(valid(segments), max_chars=max_chars, max_tokens=max_tokens)
    if isinstance(plan, PromptBudgetError):
        return
    assert plan.used_chars == len(plan.text)
    assert plan.used_tokens == estimate_context_tokens(plan.text)
    assert max_chars is None or plan.used_chars <= max_chars
    assert max_tokens is None or plan.used_tokens <= max_tokens


def _odd_tokenizer(text: str) -> int:
    """Not additive over concatenation (like a real BPE tokenizer): one token per 3 characters, rounded up."""
    return -(-len(text) // 3)


@settings(max_examples=200)
@given(segment_lists(), BUDGET)
def test_a_custom_token_counter_decides_the_token_budget(segments, max_tokens):
    plan = plan_or_error(valid(segments), max_tokens=max_tokens, token_counter=_odd_tokenizer)
    if isinstance(plan, PromptBudgetError):
        assert plan.required_tokens > max_tokens
        return
    assert plan.used_tokens == _odd_tokenizer(plan.text)
    assert max_tokens is None or plan.used_tokens <= max_tokens
    assert all(d.tokens == _odd_tokenizer(next(s.text for s in segments if s.name == d.name)) for d in plan.decisions)
