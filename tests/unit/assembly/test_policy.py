"""The ``selection`` request object: parsed strictly, every bad value a field error, all of them listed."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembly import policy as policy_module
from assembly.policy import POLICY_AUTHORITY_V1, SelectionPolicy, parse_selection_policy
from assembly.types import AssemblyValidationError
from vocabulary.limits import SELECTION_MAX_TOKENS_MAX


def errors_of(raw) -> list[tuple[str, str]]:
    with pytest.raises(AssemblyValidationError) as caught:
        parse_selection_policy(raw)
    return [(error.path, error.message) for error in caught.value.errors]


def test_the_policy_alone_turns_both_gates_of_numbers_off():
    assert parse_selection_policy({"policy": "authority-v1"}) == SelectionPolicy(POLICY_AUTHORITY_V1, 0.0, None)


def test_a_full_selection_is_parsed():
    parsed = parse_selection_policy({"policy": "authority-v1", "min_score": 0.35, "max_tokens": 800})
    assert parsed == SelectionPolicy(POLICY_AUTHORITY_V1, 0.35, 800)
    assert parse_selection_policy({"policy": "authority-v1", "min_score": 2}).min_score == 2.0


@pytest.mark.parametrize("raw", [None, [], "authority-v1", 1])
def test_a_selection_that_is_not_an_object_is_refused(raw):
    assert [path for path, _ in errors_of(raw)] == ["selection"]


def test_the_policy_is_required_and_must_be_known():
    assert errors_of({}) == [("selection.policy", "is required")]
    assert errors_of({"policy": "authority-v2"}) == [("selection.policy", 'must be one of "authority-v1"')]
    assert errors_of({"policy": None})[0][0] == "selection.policy"


@pytest.mark.parametrize("value", [-0.1, True, False, "0.3", None, float("nan"), float("inf"), 10**400, [0.3]])
def test_a_bad_min_score_is_refused(value):
    assert errors_of({"policy": "authority-v1", "min_score": value}) == [
        ("selection.min_score", "must be a number greater than or equal to 0")
    ]


@pytest.mark.parametrize("value", [0, -1, SELECTION_MAX_TOKENS_MAX + 1, 1.5, 800.0, True, "800", None])
def test_a_bad_max_tokens_is_refused(value):
    [(path, _)] = errors_of({"policy": "authority-v1", "max_tokens": value})
    assert path == "selection.max_tokens"


def test_unknown_keys_are_refused_and_every_error_is_listed():
    assert errors_of({"policy": "x", "min_score": -1, "max_tokens": 0, "authority": "current_turn"}) == [
        ("selection.authority", "unknown field"),
        ("selection.policy", 'must be one of "authority-v1"'),
        ("selection.min_score", "must be a number greater than or equal to 0"),
        ("selection.max_tokens", f"must be between 1 and {SELECTION_MAX_TOKENS_MAX}"),
    ]


def test_a_policy_that_only_compares_equal_to_a_known_one_is_refused():
    class LooksLikeThePolicy:
        def __eq__(self, other):
            return other == "authority-v1"

        __hash__ = object.__hash__

    with pytest.raises(AssemblyValidationError):
        parse_selection_policy({"policy": LooksLikeThePolicy()})


# --- the fast path agrees with the full check ------------------------------------------------------

_NUMBERS = (
    st.integers(-3, SELECTION_MAX_TOKENS_MAX + 3)
    | st.sampled_from([0, 1, 2**70, -(2**70), SELECTION_MAX_TOKENS_MAX])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 0.35, 1.0, 800.0, 1e308, float("inf"), float("nan")])
)
_VALUES = st.none() | st.booleans() | _NUMBERS | st.sampled_from(["authority-v1", "Authority-V1", "", "0.5", "800"])
_VALUES = _VALUES | st.lists(_VALUES, max_size=2) | st.dictionaries(st.text(max_size=3), _VALUES, max_size=2)
_SCALARS = _NUMBERS | st.booleans() | st.none()
_KEYS = st.sampled_from(["policy", "min_score", "max_tokens", "Policy", "extra", ""])


def _full_check(raw):
    """``parse_selection_policy`` with its fast path turned off: the policy, or the listed errors."""
    with mock.patch.object(policy_module, "_plainly_valid", lambda raw: None):
        return _outcome(raw)


def _outcome(raw):
    try:
        parsed = parse_selection_policy(raw)
    except AssemblyValidationError as refused:
        return "refused", [(error.path, error.message) for error in refused.errors]
    return "parsed", (parsed, type(parsed.min_score), type(parsed.max_tokens))


@settings(max_examples=int(os.environ.get("POWERCONTEXT_PROPERTY_EXAMPLES", "200")) * 5, deadline=None, database=None)
@given(
    st.dictionaries(_KEYS, _VALUES, max_size=4)
    | st.fixed_dictionaries(
        {"policy": st.just("authority-v1")},
        optional={"min_score": _SCALARS, "max_tokens": _SCALARS},
    )
    | _VALUES
)
def test_the_fast_path_decides_every_selection_as_the_full_check_does(raw):
    # A request's selection is parsed by a fast path first (a plainly valid object) and by the full check otherwise:
    # both must give the same policy (same number types) or the same listed errors, whatever the object.
    assert _outcome(raw) == _full_check(raw)
