"""Markdown V1 under a selection policy: the gates' losers never packed, top-k and both budgets in policy order."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembly.policy import Selection, SelectionPolicy
from assembly.rendering import MARKDOWN_PREFIX, MARKDOWN_SUFFIX
from assembly.selection import assemble_markdown, interleave, pool_positions
from assembly.types import (
    NOTE_GATE_NOT_APPLICABLE,
    OUTCOME_INCLUDED,
    OUTCOME_SKIPPED,
    REASON_AUTHORITY_LOSER,
    REASON_BUDGET,
    REASON_CONFLICT_LOSER,
    REASON_DUPLICATE_CONTENT,
    REASON_FAMILY_LIMIT_REACHED,
    REASON_LOW_CONFIDENCE,
    REASON_NO_BODY,
    REASON_POOL_CAP,
    REASON_TOKEN_BUDGET_EXCEEDED,
    REASON_TRUNCATION_BELOW_MINIMUM,
    Candidate,
    Citation,
)
from vocabulary.authority import AUTHORITY_CURRENT_TURN, AUTHORITY_USER_DEFAULT, AUTHORITY_WORKSPACE_OVERRIDE
from vocabulary.tokens import estimate_context_tokens

from .helpers import options, parse_markdown, utf8

TURN, WORKSPACE, USER = "turn:1", "workspace:the-long-name-of-this-workspace", "user:1"
SCOPES = (TURN, WORKSPACE, USER)
TIERS = {TURN: AUTHORITY_CURRENT_TURN, WORKSPACE: AUTHORITY_WORKSPACE_OVERRIDE, USER: AUTHORITY_USER_DEFAULT}


def memory(entry, body, *, scope, slot=None, score=0.5):
    citation = Citation(scope, "memory", "memory", 1, entry, f"{entry}-v1")
    return Candidate(citation, body, score=score, conflict_key=slot, captured_at="2026-01-01T00:00:00.000000Z")


def chapter_pool():
    """seeds/003: A = this turn's "Use Python" (analysis), B = the workspace's "Use Python" (automation),
    C = the user's default "Use Bash" (automation), each from its own scope."""
    a = memory("a", "Use Python", scope=TURN, slot="analysis-language")
    b = memory("b", "Use Python", scope=WORKSPACE, slot="automation-language")
    c = memory("c", "Use Bash", scope=USER, slot="automation-language", score=9.0)
    return {"memory": [[a], [b], [c]]}


def selection(*, min_score=0.0, max_tokens=None, tiers=TIERS):
    return Selection(SelectionPolicy(min_score=min_score, max_tokens=max_tokens), SCOPES, tiers)


def decided(result):
    return {d.citation.entry_id: d for d in result.decisions}


def included(result):
    return [origin.citation.entry_id for origin in result.origins]


def test_the_chapters_example_selects_a_and_b_and_c_loses_to_b():
    result = assemble_markdown(chapter_pool(), options(("memory", 5)), max_bytes=8000, selection=selection())
    assert included(result) == ["a", "b"]
    c = decided(result)["c"]
    assert (c.reason, c.winner.entry_id, c.authority) == (REASON_AUTHORITY_LOSER, "b", AUTHORITY_USER_DEFAULT)
    assert decided(result)["b"].conflict_slot == "automation-language"
    assert [entry.number for entry in parse_markdown(result.content)] == [1, 2]


def _entry_bytes(pool, entry, *, policy):
    result = assemble_markdown(pool, options(("memory", 5)), max_bytes=8000, selection=policy)
    return decided(result)[entry].bytes


def test_when_the_winner_does_not_fit_the_bytes_its_loser_still_does_not_backfill():
    pool = chapter_pool()
    a_bytes = _entry_bytes(pool, "a", policy=selection())
    b_bytes = _entry_bytes(pool, "b", policy=selection())
    without_b = {"memory": [pool["memory"][0], pool["memory"][2]]}
    c_bytes = _entry_bytes(without_b, "c", policy=selection())
    assert c_bytes < b_bytes  # C would fit where B does not
    max_bytes = utf8(MARKDOWN_PREFIX + MARKDOWN_SUFFIX) + a_bytes + c_bytes
    result = assemble_markdown(pool, options(("memory", 5)), max_bytes=max_bytes, selection=selection())
    assert included(result) == ["a"]
    assert decided(result)["b"].reason in (REASON_BUDGET, REASON_TRUNCATION_BELOW_MINIMUM)
    assert decided(result)["c"].reason == REASON_AUTHORITY_LOSER
    # Without the policy the same budget takes C in B's place: the policy is what keeps it out.
    plain = assemble_markdown(pool, options(("memory", 5)), max_bytes=max_bytes)
    assert "c" in included(plain)


def test_when_the_winner_does_not_fit_the_tokens_its_loser_still_does_not_backfill():
    pool = chapter_pool()
    a_and_c = {"memory": [pool["memory"][0], pool["memory"][2]]}
    # The units A and C would take together (C as Memory 2): room for C, not for B's longer citation.
    room = estimate_context_tokens(
        assemble_markdown(a_and_c, options(("memory", 5)), max_bytes=8000, selection=selection()).content
    )
    limited = selection(max_tokens=room)
    result = assemble_markdown(pool, options(("memory", 5)), max_bytes=8000, selection=limited)
    assert included(result) == ["a"]
    assert decided(result)["b"].reason == REASON_TOKEN_BUDGET_EXCEEDED
    assert decided(result)["c"].reason == REASON_AUTHORITY_LOSER
    assert estimate_context_tokens(result.content) <= room


def test_the_token_budget_counts_the_whole_content_wrappers_included():
    pool = chapter_pool()
    exact = estimate_context_tokens(
        assemble_markdown(pool, options(("memory", 5)), max_bytes=8000, selection=selection()).content
    )
    assert included(
        assemble_markdown(pool, options(("memory", 5)), max_bytes=8000, selection=selection(max_tokens=exact))
    ) == ["a", "b"]
    fewer = assemble_markdown(pool, options(("memory", 5)), max_bytes=8000, selection=selection(max_tokens=exact - 1))
    assert included(fewer) == ["a"]


@pytest.mark.parametrize("show", [(), ("recall_rank",), ("confidence",), ("confidence", "recall_rank")])
def test_the_token_budget_counts_every_shown_line_and_repeated_entries_alike(show):
    # The same entries twice in a row (the second time every wrapper text is one the process has counted before), with
    # the optional lines shown and a body in CJK and emoji: the budget that fits the content exactly takes it all.
    pool = {
        "memory": [
            [memory("a", "记住：用 Python 写分析脚本 🐍", scope=TURN), memory("b", "Use Bash, then rest", scope=TURN)],
            [memory("c", "工作区的备注", scope=WORKSPACE)],
        ]
    }
    layout = options(("memory", 5), show=show)
    exact = estimate_context_tokens(assemble_markdown(pool, layout, max_bytes=8000, selection=selection()).content)
    for _ in range(2):
        assert included(assemble_markdown(pool, layout, max_bytes=8000, selection=selection(max_tokens=exact))) == [
            "a",
            "b",
            "c",
        ]
        fewer = assemble_markdown(pool, layout, max_bytes=8000, selection=selection(max_tokens=exact - 1))
        assert included(fewer) == ["a", "b"]


def test_the_units_a_process_keeps_stay_bounded_and_are_counted_alike_after():
    from assembly import token_budget

    def fitted(number):
        body = f"note number {number}, kept"
        pool = {"memory": [[memory(f"e{number}", body, scope=TURN)]]}
        result = assemble_markdown(pool, options(("memory", 1)), max_bytes=8000, selection=selection(max_tokens=10**6))
        return estimate_context_tokens(result.content), result

    for number in range(token_budget.WRAPPER_MEMO_SIZE + 50):
        fitted(number)
    assert len(token_budget._text_memo) <= token_budget.WRAPPER_MEMO_SIZE
    assert len(token_budget._quoted_body_memo) <= token_budget.BODY_MEMO_SIZE
    exact, _ = fitted(3)
    body = "note number 3, kept"
    pool = {"memory": [[memory("e3", body, scope=TURN)]]}
    for most, kept in ((exact, ["e3"]), (exact - 1, [])):
        assert (
            included(
                assemble_markdown(pool, options(("memory", 1)), max_bytes=8000, selection=selection(max_tokens=most))
            )
            == kept
        )


def test_the_section_limit_is_the_top_k_in_policy_order():
    pool = {"memory": [[memory("u", "user note", scope=USER, score=5.0)], [memory("t", "turn note", scope=TURN)]]}
    result = assemble_markdown(pool, options(("memory", 1)), max_bytes=8000, selection=selection())
    assert included(result) == ["t"]
    assert decided(result)["u"].reason == REASON_FAMILY_LIMIT_REACHED


def test_a_token_budget_skips_a_long_entry_and_takes_a_later_short_one():
    long_text = " ".join(["word"] * 200)
    pool = {"memory": [[memory("long", long_text, scope=TURN), memory("short", "short note", scope=TURN)]]}
    wrappers = estimate_context_tokens(MARKDOWN_PREFIX + MARKDOWN_SUFFIX)
    result = assemble_markdown(
        pool, options(("memory", 5)), max_bytes=8000, selection=selection(max_tokens=wrappers + 60)
    )
    assert included(result) == ["short"]
    assert decided(result)["long"].reason == REASON_TOKEN_BUDGET_EXCEEDED
    assert decided(result)["long"].bytes is not None


def test_a_token_budget_below_the_wrappers_gives_the_empty_result():
    result = assemble_markdown(
        chapter_pool(), options(("memory", 5)), max_bytes=8000, selection=selection(max_tokens=1)
    )
    assert result.content is None
    assert {d.reason for d in result.decisions} == {REASON_TOKEN_BUDGET_EXCEEDED, REASON_AUTHORITY_LOSER}


def test_decisions_of_candidates_dropped_by_the_pool_carry_the_policys_fields_beyond_the_cap_none():
    hits = [
        memory(f"m{i}", f"note {i}", scope=TURN, score=float(i), slot="s" if i in (3, 20) else None) for i in range(21)
    ]
    hits[3] = Candidate(hits[3].citation, "", score=3.0, conflict_key="S")
    result = assemble_markdown({"memory": [hits]}, options(("memory", 16)), max_bytes=32768, selection=selection())
    bodiless = decided(result)["m3"]
    assert (bodiless.reason, bodiless.authority, bodiless.conflict_slot, bodiless.score) == (
        REASON_NO_BODY,
        AUTHORITY_CURRENT_TURN,
        "s",
        3.0,
    )
    capped = decided(result)["m20"]  # beyond the pool: dropped before the policy reads anything of it
    assert (capped.reason, capped.authority, capped.conflict_slot, capped.score) == (REASON_POOL_CAP, None, None, None)


def test_without_a_policy_decisions_carry_no_policy_fields():
    result = assemble_markdown(chapter_pool(), options(("memory", 5)), max_bytes=8000)
    assert included(result) == ["a", "b", "c"]
    assert all((d.authority, d.conflict_slot, d.winner, d.score) == (None, None, None, None) for d in result.decisions)


def profile(body, *, scope):
    return Candidate(Citation(scope, "profile", "profile", 1), body)


def test_a_profile_under_an_active_confidence_gate_is_packed_and_its_decision_says_the_gate_did_not_apply():
    recalled = {
        "memory": [[memory("weak", "Use Python", scope=TURN, score=0.1)], [], []],
        "profile": [[profile("Works on the nightly ETL.", scope=TURN)], [], [profile("Prefers Go.", scope=USER)]],
    }
    result = assemble_markdown(
        recalled, options(("memory", 5), ("profile", 1)), max_bytes=8000, selection=selection(min_score=0.5)
    )
    by_scope = {(d.citation.family, d.citation.scope_id): d for d in result.decisions}
    # A memory below min_score still fails it; no note.
    assert (by_scope["memory", TURN].reason, by_scope["memory", TURN].note) == (REASON_LOW_CONFIDENCE, None)
    # Both profiles skip the gate and say so; the section's limit (the top-k) decides between them, by tier.
    assert [origin.citation for origin in result.origins] == [recalled["profile"][0][0].citation]
    assert (by_scope["profile", TURN].outcome, by_scope["profile", TURN].reason) == (OUTCOME_INCLUDED, None)
    assert by_scope["profile", USER].reason == REASON_FAMILY_LIMIT_REACHED
    assert by_scope["profile", TURN].note == by_scope["profile", USER].note == NOTE_GATE_NOT_APPLICABLE
    assert by_scope["profile", USER].score is None


def test_decisions_carry_no_note_when_the_confidence_gate_is_off_or_no_policy_is_asked_for():
    recalled = {"profile": [[profile("Works on the nightly ETL.", scope=TURN)]]}
    for policy in (selection(min_score=0.0), None):
        result = assemble_markdown(recalled, options(("profile", 1)), max_bytes=8000, selection=policy)
        assert [(d.outcome, d.note) for d in result.decisions] == [(OUTCOME_INCLUDED, None)]


# --- properties ----------------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(
    max_examples=int(os.environ.get("POWERCONTEXT_PROPERTY_EXAMPLES", "200")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
LOSERS = (REASON_AUTHORITY_LOSER, REASON_CONFLICT_LOSER, REASON_DUPLICATE_CONTENT)


@st.composite
def pools(draw):
    per_scope = []
    for scope_index, scope in enumerate(SCOPES):
        hits = []
        for i in range(draw(st.integers(0, 5))):
            text = draw(st.sampled_from(["Use Python", "use python", "Use Bash", "Use Go " * 40, "Use Go"]))
            slot = draw(st.sampled_from([None, "lang", "LANG ", "other"]))
            score = draw(st.none() | st.floats(0, 3))
            hits.append(memory(f"s{scope_index}e{i}", text, scope=scope, slot=slot, score=score))
        per_scope.append(hits)
    return {"memory": per_scope}


@PROPERTY_SETTINGS
@given(
    pools(),
    st.integers(600, 4000),
    st.none() | st.integers(50, 600),
    st.integers(1, 16),
    st.sampled_from([0.0, 0.5]),
)
def test_losers_are_never_packed_whatever_the_budgets(pool, max_bytes, max_tokens, limit, min_score):
    policy = selection(min_score=min_score, max_tokens=max_tokens)
    result = assemble_markdown(pool, options(("memory", limit)), max_bytes=max_bytes, selection=policy)
    losers = {d.citation for d in result.decisions if d.reason in LOSERS}
    assert not losers & {origin.citation for origin in result.origins}
    assert len(result.decisions) == sum(len(hits) for hits in pool["memory"])
    assert all(d.winner is not None for d in result.decisions if d.reason in LOSERS)
    assert all(d.outcome == OUTCOME_SKIPPED for d in result.decisions if d.reason is not None)
    if result.content is not None:
        assert utf8(result.content) == result.content_bytes <= max_bytes
        if max_tokens is not None:
            assert estimate_context_tokens(result.content) <= max_tokens
    # Packing follows the policy's order: a higher tier is never placed after a lower one.
    tiers = [TIERS[origin.citation.scope_id] for origin in result.origins]
    order = [AUTHORITY_CURRENT_TURN, AUTHORITY_WORKSPACE_OVERRIDE, AUTHORITY_USER_DEFAULT]
    assert tiers == sorted(tiers, key=order.index)


@PROPERTY_SETTINGS
@given(st.lists(st.integers(0, 6), max_size=5), st.none() | st.integers(0, 20))
def test_pool_positions_are_the_first_of_the_round_robin(lengths, cap):
    lists = [[(at, i) for i in range(length)] for at, length in enumerate(lengths)]
    expected = interleave(lists)
    assert pool_positions(lengths, cap) == (expected if cap is None else expected[:cap])


@PROPERTY_SETTINGS
@given(
    st.lists(
        st.text(alphabet=st.sampled_from("ab Z9\n\t,.>#中文\u2028\u200b\r-_'é"), min_size=1, max_size=120),
        min_size=1,
        max_size=6,
    ),
    st.integers(700, 3000),
)
def test_the_token_budget_counts_exactly_what_the_content_holds(bodies, max_bytes):
    hits = [memory(f"e{i}", body, scope=TURN) for i, body in enumerate(bodies)]
    pool = {"memory": [hits]}
    unlimited = assemble_markdown(pool, options(("memory", 16)), max_bytes=max_bytes, selection=selection())
    if unlimited.content is None:
        return
    exact = estimate_context_tokens(unlimited.content)
    at_exact = assemble_markdown(
        pool, options(("memory", 16)), max_bytes=max_bytes, selection=selection(max_tokens=exact)
    )
    assert at_exact.content == unlimited.content
    below = assemble_markdown(
        pool, options(("memory", 16)), max_bytes=max_bytes, selection=selection(max_tokens=exact - 1)
    )
    assert below.content != unlimited.content
    assert below.content is None or estimate_context_tokens(below.content) <= exact - 1
