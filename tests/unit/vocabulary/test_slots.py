"""A conflict slot's rule has one home (vocabulary.slots): the function the server and the fixture loader call, and
the pattern the OpenAPI description publishes (which the client validates with), accept exactly the same text."""

import re

from hypothesis import given
from hypothesis import strategies as st

from vocabulary.limits import MAX_CONFLICT_KEY_CHARACTERS
from vocabulary.slots import CONFLICT_KEY_PATTERN, conflict_key_problem

# ECMAScript's "$" is the end of the text; Python's also matches before a final newline, so match the whole text.
PATTERN = re.compile(CONFLICT_KEY_PATTERN.removeprefix("^").removesuffix("$"))


def test_slots_as_writers_name_them_are_accepted_as_given():
    for slot in ["preference:automation-language", " Preference: X ", "偏好:自动化语言", "a\u00a0b", "x" * 200]:
        assert conflict_key_problem(slot) is None
        assert PATTERN.fullmatch(slot)


def test_each_refusal_says_why():
    assert conflict_key_problem("") == "must not be empty"
    assert (
        conflict_key_problem("x" * (MAX_CONFLICT_KEY_CHARACTERS + 1)) == "must be at most 200 characters (it has 201)"
    )
    assert conflict_key_problem("a\tb") == "contains the control character U+0009 at character 1"
    assert conflict_key_problem("ab\x9f") == "contains the control character U+009F at character 2"
    assert conflict_key_problem(" \u3000") == "must contain a character that is not whitespace"


@given(st.text(max_size=12) | st.text(alphabet=st.characters(max_codepoint=0x3000), max_size=6))
def test_the_published_pattern_accepts_exactly_what_the_rule_accepts(slot):
    assert (PATTERN.fullmatch(slot) is not None) == (conflict_key_problem(slot) is None)


def test_every_single_character_is_judged_alike_by_the_pattern_and_the_rule():
    for code in range(0x10000):
        if 0xD800 <= code < 0xE000:
            continue  # lone surrogates: the strict string fields refuse them before this rule
        for slot in (chr(code), f" {chr(code)}", f"a{chr(code)}"):
            assert (PATTERN.fullmatch(slot) is not None) == (conflict_key_problem(slot) is None), hex(code)
