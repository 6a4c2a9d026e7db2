"""The selection policy's rules (seeds/003) as pure functions: gates, order, exact dedupe and conflict slots."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembly.arbitration import (
    CACHED_TEXT_MAX_CHARACTERS,
    NORMALIZED_MEMO_SIZE,
    Contender,
    Contenders,
    arbitrate,
    arbitrate_columns,
    normalized_slot,
    normalized_text,
    policy_order,
)
from assembly.types import (
    REASON_AUTHORITY_LOSER,
    REASON_CONFLICT_LOSER,
    REASON_DUPLICATE_CONTENT,
    REASON_LOW_CONFIDENCE,
    REASON_SCOPE_MISMATCH,
    REASON_UNKNOWN_AUTHORITY,
)
from vocabulary.authority import (
    AUTHORITY_CURRENT_TURN,
    AUTHORITY_TIERS,
    AUTHORITY_USER_DEFAULT,
    AUTHORITY_WORKSPACE_OVERRIDE,
)
from vocabulary.citation import Citation

TIERS = {"turn:1": AUTHORITY_CURRENT_TURN, "workspace:1": AUTHORITY_WORKSPACE_OVERRIDE, "user:1": None}
SCOPES = ("turn:1", "workspace:1", "user:1")


def contender(entry, text, *, scope="user:1", score=0.5, rank=1, captured=None, slot=None) -> Contender:
    citation = Citation(scope, "memory", "memory", 1, entry, f"{entry}-v1")
    return Contender(citation, text, score, rank, captured, slot)


def run(contenders, *, min_score=0.0, tiers=TIERS, scopes=SCOPES):
    result = arbitrate(contenders, scopes=scopes, tiers=tiers, min_score=min_score)
    reasons = {c.citation.entry_id: v.reason for c, v in zip(contenders, result.verdicts, strict=True)}
    winners = {
        c.citation.entry_id: v.winner.entry_id if v.winner else None
        for c, v in zip(contenders, result.verdicts, strict=True)
    }
    order = [contenders[i].citation.entry_id for i in result.order]
    return reasons, winners, order


def test_text_is_normalized_by_nfkc_case_folding_and_whitespace():
    assert normalized_text("  Use\u3000ＰＹＴＨＯＮ\n\tnow ") == "use python now"
    assert normalized_text("Straße") == normalized_text("STRASSE")


def test_long_texts_are_normalized_alike_without_being_kept():
    long_text = "Ｕｓｅ  Python " * 400
    assert len(long_text) > CACHED_TEXT_MAX_CHARACTERS
    assert normalized_text(long_text) == normalized_text(long_text.upper()) == ("use python " * 400).strip()


def test_normalized_texts_and_slots_kept_by_a_process_stay_bounded():
    from assembly import arbitration

    for number in range(NORMALIZED_MEMO_SIZE + 50):
        assert normalized_text(f"Text {number}") == f"text {number}"
        assert normalized_slot(f"Slot:{number}") == f"slot:{number}"
    assert len(arbitration._normalized_memo) <= NORMALIZED_MEMO_SIZE
    assert len(arbitration._slot_memo) <= NORMALIZED_MEMO_SIZE
    # Emptied when full, never wrong: what comes back after is normalized again.
    assert normalized_slot(" Preference:X ") == "preference:x"
    assert normalized_slot(None) is None


def test_a_blank_slot_is_no_slot():
    assert normalized_slot(None) is None
    assert normalized_slot(" \t") is None
    assert normalized_slot(" Preference:Automation-Language ") == "preference:automation-language"


def test_the_chapters_same_text_in_two_slots_is_not_a_duplicate():
    a = contender("a", "Use Python", scope="turn:1", slot="analysis-language")
    b = contender("b", "Use Python", scope="workspace:1", slot="automation-language")
    c = contender("c", "Use Bash", scope="user:1", slot="automation-language", score=0.99, rank=0)
    reasons, winners, order = run([c, b, a])
    assert reasons == {"a": None, "b": None, "c": REASON_AUTHORITY_LOSER}
    assert winners["c"] == "b"
    assert order == ["a", "b"]


def test_a_lower_tier_never_wins_whatever_its_score_rank_or_age():
    high = contender(
        "high", "TypeScript", scope="workspace:1", score=0.01, rank=9, captured="2020-01-01T00:00:00.000000Z", slot="S "
    )
    low = contender(
        "low", "Python", scope="user:1", score=99.0, rank=1, captured="2030-01-01T00:00:00.000000Z", slot="s"
    )
    reasons, winners, order = run([low, high])
    assert reasons == {"low": REASON_AUTHORITY_LOSER, "high": None}
    assert winners["low"] == "high"
    assert order == ["high"]


def test_within_a_tier_the_slot_goes_by_score_then_rank_then_age_then_identity():
    def two(first, second):
        reasons, winners, _ = run([first, second])
        return [entry for entry, reason in reasons.items() if reason is None], winners

    by_score = two(contender("x", "one", score=0.2, slot="s"), contender("y", "two", score=0.9, slot="s"))
    assert by_score == (["y"], {"x": "y", "y": None})
    by_rank = two(contender("x", "one", rank=2, slot="s"), contender("y", "two", rank=1, slot="s"))
    assert by_rank[0] == ["y"]
    by_age = two(
        contender("x", "one", captured="2026-01-01T00:00:00.000000Z", slot="s"),
        contender("y", "two", captured="2026-01-02T00:00:00.000000Z", slot="s"),
    )
    assert by_age[0] == ["y"]
    by_identity = two(contender("y", "two", slot="s"), contender("x", "one", slot="s"))
    assert by_identity[0] == ["x"]
    reasons, _, _ = run([contender("x", "one", slot="s"), contender("y", "two", slot="s")])
    assert reasons["y"] == REASON_CONFLICT_LOSER


def test_no_score_ranks_after_every_score_and_fails_an_active_confidence_gate():
    reasons, _, order = run([contender("none", "a", score=None, rank=1), contender("low", "b", score=0.1, rank=2)])
    assert order == ["low", "none"]
    reasons, _, _ = run([contender("none", "a", score=None)], min_score=0.05)
    assert reasons == {"none": REASON_LOW_CONFIDENCE}


def test_authority_bypasses_neither_the_scope_gate_nor_the_confidence_gate():
    outside = contender("outside", "a", scope="user:2", score=100.0)
    weak_turn = contender("weak", "b", scope="turn:1", score=0.1)
    reasons, _, order = run([outside, weak_turn], min_score=0.35)
    assert reasons == {"outside": REASON_SCOPE_MISMATCH, "weak": REASON_LOW_CONFIDENCE}
    assert order == []


def profile(text, *, scope="user:1", score=None, rank=1) -> Contender:
    return Contender(Citation(scope, "profile", "profile", 1), text, score, rank)


def test_a_profile_has_no_score_to_gate_so_an_active_confidence_gate_lets_it_through_and_notes_it():
    snapshot = profile("Ada automates the nightly ETL.", scope="user:1")
    weak = contender("weak", "b", scope="turn:1", score=0.1, rank=2)
    unscored = contender("unscored", "c", scope="turn:1", score=None, rank=3)
    result = arbitrate([snapshot, weak, unscored], scopes=SCOPES, tiers=TIERS, min_score=0.35)
    assert [(v.reason, v.ungated) for v in result.verdicts] == [
        (None, True),
        (REASON_LOW_CONFIDENCE, False),  # a memory below min_score, or with no score, still fails it
        (REASON_LOW_CONFIDENCE, False),
    ]
    assert list(result.order) == [0]


def test_a_profile_past_the_confidence_gate_is_still_decided_by_the_scope_and_authority_gates():
    outside = profile("outside", scope="user:2")
    odd = profile("odd", scope="user:1")
    result = arbitrate([outside, odd], scopes=SCOPES, tiers={"user:1": "system_override"}, min_score=0.35)
    # The scope gate comes first (the confidence gate never saw it); the authority gate decides after the note.
    assert [(v.reason, v.ungated) for v in result.verdicts] == [
        (REASON_SCOPE_MISMATCH, False),
        (REASON_UNKNOWN_AUTHORITY, True),
    ]
    assert list(result.order) == []


def test_with_the_confidence_gate_off_a_profile_carries_no_note():
    result = arbitrate([profile("Ada")], scopes=SCOPES, tiers=TIERS, min_score=0.0)
    assert [(v.reason, v.ungated) for v in result.verdicts] == [(None, False)]


def test_an_unknown_stored_tier_fails_closed():
    reasons, _, _ = run([contender("x", "a", scope="user:1")], tiers={"user:1": "system_override"})
    assert reasons == {"x": REASON_UNKNOWN_AUTHORITY}


def test_a_scope_nobody_configured_is_a_user_default():
    result = arbitrate([contender("x", "a", scope="user:1")], scopes=SCOPES, tiers={}, min_score=0)
    assert result.verdicts[0].authority == AUTHORITY_USER_DEFAULT


def test_exact_duplicates_keep_the_stronger_and_name_it():
    strong = contender("strong", "Deploy on  FRIDAYS", scope="workspace:1", slot="s")
    weak = contender("weak", "deploy on fridays", scope="turn:1", slot=" S")
    loose = contender("loose", "deploy on fridays", scope="turn:1")
    reasons, winners, order = run([strong, weak, loose])
    assert reasons == {"strong": REASON_DUPLICATE_CONTENT, "weak": None, "loose": None}
    assert winners["strong"] == "weak"
    assert order == ["loose", "weak"] or order == ["weak", "loose"]


# --- properties ----------------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(
    max_examples=int(os.environ.get("POWERCONTEXT_PROPERTY_EXAMPLES", "200")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
_SCOPE_POOL = ("turn:1", "workspace:1", "user:1", "user:2", "odd:1")
_TIER_VALUES = (*AUTHORITY_TIERS, None, "system_override")


@st.composite
def pools(draw):
    count = draw(st.integers(0, 12))
    contenders = [
        Contender(
            Citation(draw(st.sampled_from(_SCOPE_POOL)), "memory", "memory", 1, f"e{i}", f"e{i}-v1"),
            draw(st.sampled_from(["Use Python", "use  PYTHON", "Use Bash", "Use Go", ""])),
            draw(st.none() | st.sampled_from([0.0, 0.1, 0.35, 0.5, 2.0])),
            draw(st.integers(1, 4)),
            draw(st.none() | st.sampled_from(["2026-01-01T00:00:00.000000Z", "2026-06-01T00:00:00.000000Z"])),
            draw(st.sampled_from([None, "slot-a", " SLOT-A", "slot-b", "  "])),
        )
        for i in range(count)
    ]
    tiers = {scope: draw(st.sampled_from(_TIER_VALUES)) for scope in _SCOPE_POOL}
    scopes = tuple(draw(st.sets(st.sampled_from(_SCOPE_POOL))))
    min_score = draw(st.sampled_from([0.0, 0.0, 0.35]))
    return contenders, tiers, scopes, min_score


def _by_identity(contenders, result):
    verdicts = {c.citation: v for c, v in zip(contenders, result.verdicts, strict=True)}
    return verdicts, [contenders[i].citation for i in result.order]


@PROPERTY_SETTINGS
@given(pools(), st.randoms(use_true_random=False))
def test_the_outcome_does_not_depend_on_input_order(pool, random):
    contenders, tiers, scopes, min_score = pool
    shuffled = list(contenders)
    random.shuffle(shuffled)
    first = _by_identity(contenders, arbitrate(contenders, scopes=scopes, tiers=tiers, min_score=min_score))
    second = _by_identity(shuffled, arbitrate(shuffled, scopes=scopes, tiers=tiers, min_score=min_score))
    assert first == second


@PROPERTY_SETTINGS
@given(pools())
def test_no_lower_tier_ever_beats_a_higher_one_in_the_same_slot(pool):
    contenders, tiers, scopes, min_score = pool
    result = arbitrate(contenders, scopes=scopes, tiers=tiers, min_score=min_score)
    rank = {tier: position for position, tier in enumerate(AUTHORITY_TIERS)}
    passed = [
        (c, v)
        for c, v in zip(contenders, result.verdicts, strict=True)
        if v.authority in rank
        and v.reason in (None, REASON_DUPLICATE_CONTENT, REASON_AUTHORITY_LOSER, REASON_CONFLICT_LOSER)
    ]
    for _contender, verdict in passed:
        if verdict.reason is None and verdict.slot is not None:
            for _other, other_verdict in passed:
                if other_verdict.slot == verdict.slot:
                    assert rank[verdict.authority] <= rank[other_verdict.authority]
        if verdict.reason in (REASON_AUTHORITY_LOSER, REASON_CONFLICT_LOSER):
            winner = next(v for c, v in passed if c.citation == verdict.winner)
            assert winner.reason is None and winner.slot == verdict.slot
            assert rank[winner.authority] <= rank[verdict.authority]
            expected = REASON_CONFLICT_LOSER if winner.authority == verdict.authority else REASON_AUTHORITY_LOSER
            assert verdict.reason == expected


@PROPERTY_SETTINGS
@given(pools())
def test_the_gates_decide_in_their_fixed_order(pool):
    contenders, tiers, scopes, min_score = pool
    result = arbitrate(contenders, scopes=scopes, tiers=tiers, min_score=min_score)
    for contender, verdict in zip(contenders, result.verdicts, strict=True):
        in_scope = contender.citation.scope_id in scopes
        confident = min_score == 0 or (contender.score is not None and contender.score >= min_score)
        if not in_scope:
            assert verdict.reason == REASON_SCOPE_MISMATCH
        elif not confident:
            assert verdict.reason == REASON_LOW_CONFIDENCE
        elif verdict.authority not in AUTHORITY_TIERS:
            assert verdict.reason == REASON_UNKNOWN_AUTHORITY
        else:
            assert verdict.reason in (None, REASON_DUPLICATE_CONTENT, REASON_AUTHORITY_LOSER, REASON_CONFLICT_LOSER)
    survivors = [contenders[i] for i in result.order]
    assert len({c.citation for c in survivors}) == len(survivors)
    assert all(result.verdicts[i].reason is None for i in result.order)
    assert sum(v.reason is None for v in result.verdicts) == len(result.order)
    tiers_of = [result.verdicts[i].authority for i in result.order]
    assert tiers_of == sorted(tiers_of, key=AUTHORITY_TIERS.index)


def test_policy_order_is_tier_then_score_then_rank_then_age_then_identity():
    contenders = [
        contender("e", "x", score=0.5, rank=1),
        contender("d", "x", score=0.9, rank=3),
        contender("c", "x", score=0.9, rank=2, captured="2026-01-01T00:00:00.000000Z"),
        contender("b", "x", score=0.9, rank=2, captured="2026-02-01T00:00:00.000000Z"),
        contender("a", "x", score=0.9, rank=2, captured="2026-02-01T00:00:00.000000Z"),
        contender("t", "x", score=None, rank=9),
    ]
    tiers = [AUTHORITY_USER_DEFAULT] * 5 + [AUTHORITY_CURRENT_TURN]
    order = policy_order(Contenders.of(contenders), range(len(contenders)), tiers)
    assert [contenders[i].citation.entry_id for i in order] == ["t", "a", "b", "c", "d", "e"]


def _arbitrated_as_written(contenders, *, scopes, tiers, min_score):
    """The module docstring's rules, one contender and one gate at a time (no columns, no shortcuts): what
    ``arbitrate`` must agree with. Returns {entry: (tier, reason, winner entry)} and the survivors' order."""
    outcome, admitted = {}, []
    for contender in contenders:
        scope = contender.citation.scope_id
        tier = (tiers.get(scope) or AUTHORITY_USER_DEFAULT) if scope in scopes else None
        if tier is None:
            reason = REASON_SCOPE_MISMATCH
        elif min_score > 0 and (contender.score is None or contender.score < min_score):
            reason = REASON_LOW_CONFIDENCE
        elif tier not in AUTHORITY_TIERS:
            reason = REASON_UNKNOWN_AUTHORITY
        else:
            reason = None
            admitted.append(contender)
        outcome[contender.citation.entry_id] = (tier, reason, None)

    def key(c):
        newest_first = "".join(chr(0x10FFFF - ord(ch)) for ch in c.captured_at) if c.captured_at else "\U0010ffff"
        tier = outcome[c.citation.entry_id][0]
        score = (1, 0.0) if c.score is None else (0, -c.score)
        cited = c.citation
        identity = (
            cited.scope_id,
            cited.family,
            cited.artifact_id,
            cited.revision,
            cited.entry_id,
            cited.entry_version,
        )
        return (AUTHORITY_TIERS.index(tier), score, c.source_rank, newest_first, identity)

    seen, slot_winner, order = {}, {}, []
    for c in sorted(admitted, key=key):
        tier = outcome[c.citation.entry_id][0]
        slot = normalized_slot(c.conflict_key)
        text = (slot, normalized_text(c.text))
        if text in seen:  # the same as one earlier in the order, whatever became of that one
            outcome[c.citation.entry_id] = (tier, REASON_DUPLICATE_CONTENT, seen[text].citation.entry_id)
            continue
        seen[text] = c
        if slot is not None and slot in slot_winner:
            winner = slot_winner[slot]
            same_tier = outcome[winner.citation.entry_id][0] == tier
            reason = REASON_CONFLICT_LOSER if same_tier else REASON_AUTHORITY_LOSER
            outcome[c.citation.entry_id] = (tier, reason, winner.citation.entry_id)
        else:
            if slot is not None:
                slot_winner[slot] = c
            order.append(c.citation.entry_id)
    return outcome, order


@PROPERTY_SETTINGS
@given(pools())
def test_arbitration_agrees_with_the_rules_applied_one_contender_at_a_time(pool):
    contenders, tiers, scopes, min_score = pool
    result = arbitrate(contenders, scopes=scopes, tiers=tiers, min_score=min_score)
    outcome = {
        c.citation.entry_id: (v.authority, v.reason, v.winner.entry_id if v.winner else None)
        for c, v in zip(contenders, result.verdicts, strict=True)
    }
    order = [contenders[i].citation.entry_id for i in result.order]
    assert (outcome, order) == _arbitrated_as_written(contenders, scopes=scopes, tiers=tiers, min_score=min_score)


class _Unreadable(list):
    def __getitem__(self, index):
        raise AssertionError("capture times were read")


def test_a_pools_capture_times_are_not_read_when_its_ranks_are_its_positions():
    pool = [contender(f"e{i}", f"text {i % 3}", score=0.5, slot="slot-a" if i % 2 else None) for i in range(6)]
    columns = Contenders.of(pool)
    as_positions = columns._replace(source_ranks=range(1, 7), captured_at=_Unreadable([None] * 6))
    expected = arbitrate_columns(columns._replace(source_ranks=tuple(range(1, 7))), **_GATES)
    assert arbitrate_columns(as_positions, **_GATES) == expected
    with_ties = columns._replace(source_ranks=(1,) * 6, captured_at=_Unreadable([None] * 6))
    try:
        arbitrate_columns(with_ties, **_GATES)
    except AssertionError as read:
        assert "capture times were read" in str(read)
    else:
        raise AssertionError("ranks that tie must be broken by capture time")


_GATES = {"scopes": SCOPES, "tiers": TIERS, "min_score": 0.0}
