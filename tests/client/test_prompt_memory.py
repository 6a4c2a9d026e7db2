"""Recalled memory is held for one (scope, query): another question or another scope never sees it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from powercontext_client import PromptSegment, RecalledMemory, plan_prompt

MEMORY = "## Memory\n\nReleases tag main; CI publishes."


def test_the_installed_memory_is_an_optional_segment_for_its_scope_and_query():
    recalled = RecalledMemory(priority=20, budget_priority=30)
    recalled.install("project:demo", "How do we release?", MEMORY)
    assert recalled.segment("project:demo", "How do we release?") == PromptSegment(
        "recalled_memory", MEMORY, required=False, priority=20, budget_priority=30, source="powercontext:project:demo"
    )
    assert recalled.key == ("project:demo", "How do we release?")


def test_another_query_gets_nothing_and_clears_the_memory():
    recalled = RecalledMemory()
    recalled.install("project:demo", "How do we release?", MEMORY)
    assert recalled.segment("project:demo", "Who is on call?") == PromptSegment("recalled_memory", "")
    assert recalled.key is None
    assert recalled.segment("project:demo", "How do we release?").is_empty  # gone, not merely hidden


def test_another_scope_gets_nothing_and_clears_the_memory():
    recalled = RecalledMemory()
    recalled.install("project:demo", "How do we release?", MEMORY)
    assert recalled.segment("user:bob", "How do we release?").is_empty
    assert recalled.segment("project:demo", "How do we release?").is_empty


def test_retain_keeps_the_same_question_and_clears_any_other():
    recalled = RecalledMemory()
    recalled.install("project:demo", "q1", MEMORY)
    recalled.retain("project:demo", "q1")
    assert recalled.segment("project:demo", "q1").text == MEMORY
    recalled.retain("project:demo", "q2")
    assert recalled.key is None


def test_clear_ends_the_question():
    recalled = RecalledMemory()
    recalled.install("project:demo", "q", MEMORY)
    recalled.clear()
    assert recalled.segment("project:demo", "q").is_empty


def test_an_empty_prepare_yields_an_empty_segment_that_the_planner_logs_and_does_not_render():
    recalled = RecalledMemory()
    recalled.install("project:demo", "q", None)
    assert recalled.key == ("project:demo", "q")
    plan = plan_prompt([PromptSegment("base", "Rules.", required=True), recalled.segment("project:demo", "q")])
    assert plan.text == "Rules."
    assert (plan.decision("recalled_memory").status, plan.decision("recalled_memory").reason) == ("rejected", "empty")


def test_a_new_install_replaces_the_previous_question():
    recalled = RecalledMemory(name="memory")
    recalled.install("project:demo", "q1", "old memory")
    recalled.install("project:demo", "q2", "new memory", source="powercontext:test")
    assert recalled.segment("project:demo", "q2") == PromptSegment("memory", "new memory", source="powercontext:test")


def test_the_memory_segment_can_be_dropped_whole_by_the_planner_but_never_becomes_required():
    recalled = RecalledMemory()
    recalled.install("project:demo", "q", MEMORY)
    base = PromptSegment("base", "Follow the rules.", required=True)
    plan = plan_prompt([base, recalled.segment("project:demo", "q")], max_chars=len(base.text) + 5)
    assert plan.included == ("base",)
    assert plan.decision("recalled_memory").reason == "char_budget_exceeded"


def test_invalid_arguments_are_refused():
    with pytest.raises(ValueError):
        RecalledMemory(name="")
    with pytest.raises(TypeError):
        RecalledMemory().install("project:demo", "q", b"bytes")


@given(st.lists(st.tuples(st.sampled_from(["project:a", "project:b"]), st.sampled_from(["q1", "q2"])), max_size=6))
def test_memory_is_only_ever_handed_to_the_question_it_was_installed_for(asks):
    recalled = RecalledMemory()
    recalled.install("project:a", "q1", MEMORY)
    installed = True
    for scope_id, query in asks:
        segment = recalled.segment(scope_id, query)
        same = (scope_id, query) == ("project:a", "q1")
        assert (segment.text == MEMORY) == (installed and same)
        assert segment.is_empty != (installed and same)
        installed = installed and same
