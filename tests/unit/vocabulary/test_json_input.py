"""The nesting check every JSON body passes before the decoder: exact on valid JSON, and linear on anything.

Cost is counted as work (tokens the scan handles, characters it reads), never timed. The linear bound rests
on one property of the token pattern, checked here on its own: a match tried at a quote or a bracket always
succeeds, and one tried anywhere else fails at its first character, so the search never reads a character
twice. The pattern this replaced broke it: a match tried at an unterminated string read to the end of the
text and failed, then was tried again at the next quote.
"""

import json

from django.conf import settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from vocabulary.json_input import (
    MAX_JSON_DEPTH,
    PASSES_PER_CHARACTER,
    TOKEN,
    json_depth,
    json_depth_problem,
    repeated_keys,
    scan_json_nesting,
)

BODY_CAP = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
"""Django refuses larger bodies before any parser runs (tests/api/test_hostile_input.py)."""

ADVERSARIAL_PIECES = [
    '\\"',  # an unterminated string of escaped quotes: what stalled the old check
    "\\",  # runs of backslashes, in and out of strings
    "\\\\",
    '"',
    "[",
    "]",
    "{",
    "}",
    '"[[[[{{{{',  # brackets inside strings
    '"]]]]}}}}"',
    '["",',  # many short strings
    '{"a":',
    "\\u4e00",
    "x",
    " ",
]


def structural_depth(value) -> int:
    if isinstance(value, list):
        return 1 + max((structural_depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((structural_depth(item) for item in value.values()), default=0)
    return 0


tricky_text = st.text(alphabet=st.sampled_from('"\\[]{}ab\n\u4e00\u202e'), max_size=12) | st.text(max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | tricky_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(tricky_text, children, max_size=4),
    max_leaves=40,
)


@given(json_values, st.booleans(), st.sampled_from([None, 0, 2]))
def test_depth_of_any_valid_json_is_its_real_nesting(value, ensure_ascii, indent):
    text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)
    assert json_depth(text) == structural_depth(value)


@given(st.text(alphabet=st.sampled_from('"\\[]{}a\n'), max_size=60))
def test_a_token_match_succeeds_at_every_quote_and_bracket_and_nowhere_else(text):
    for index, character in enumerate(text):
        assert (TOKEN.match(text, index) is not None) == (character in '"[]{}'), (text, index)


def test_a_token_match_at_an_unterminated_string_runs_to_the_end_of_the_text():
    for text in ['"\\"\\"\\"', '"abc\\', '"\\\\\\', '"[[[{']:
        assert TOKEN.match(text).end() == len(text)


@st.composite
def adversarial_bodies(draw) -> str:
    """Bodies up to Django's size cap built from repeated hostile pieces (families, mixed or alone)."""
    parts = draw(
        st.lists(
            st.tuples(st.sampled_from(ADVERSARIAL_PIECES), st.integers(min_value=1, max_value=BODY_CAP)),
            min_size=1,
            max_size=4,
        )
    )
    prefix = draw(st.sampled_from(["", '{"scope_id": "project:demo", "query": "', "[" * 40]))
    text = prefix + "".join(piece * (count // len(piece) + 1) for piece, count in parts)
    return text[:BODY_CAP]


@hypothesis_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial_bodies())
def test_no_body_up_to_the_size_cap_costs_more_than_a_fixed_multiple_of_parsing_it(text):
    # Parsing reads each of a body's characters at least once: the check reads each a bounded number of times.
    scan = scan_json_nesting(text)
    assert scan.characters_read <= PASSES_PER_CHARACTER * len(text)
    assert scan.steps <= len(text)


def test_the_attack_body_at_the_size_cap_is_read_once():
    text = '{"scope_id": "project:demo", "query": "' + '\\"' * (BODY_CAP // 2)
    scan = scan_json_nesting(text)
    assert (scan.deepest, scan.steps, scan.characters_read) == (1, 5, len(text))


def test_brackets_before_an_unterminated_string_still_count():
    text = "[" * (MAX_JSON_DEPTH + 1) + '"\\"\\"\\"'
    assert json_depth_problem(text) == f"JSON nested deeper than {MAX_JSON_DEPTH} levels is refused"


def test_brackets_inside_an_unterminated_string_do_not_count():
    assert json_depth('{"a": "' + "[" * 100) == 1


def test_runs_of_brackets_are_counted_level_by_level():
    assert json_depth("[[[]]]{{}}[[[[[]]]]]") == 5
    assert json_depth("[[]][[]]") == 2
    assert json_depth_problem("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is None


def test_repeated_keys_are_named_once_each_in_the_order_first_repeated():
    pairs = [("a", 1), ("b", 2), ("b", 3), ("a", 4), ("b", 5), ("c", 6)]
    assert repeated_keys(pairs) == ("b", "a")
    assert repeated_keys([("a", 1), ("b", 2)]) == ()
