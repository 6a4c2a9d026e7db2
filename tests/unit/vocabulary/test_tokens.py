"""The offline token estimate counts what the selection chapter says it counts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vocabulary.tokens import estimate_context_tokens


def test_a_latin_word_is_one_unit_whatever_its_length():
    assert estimate_context_tokens("automation") == 1
    assert estimate_context_tokens("use Python 3") == 3


def test_each_cjk_character_is_one_unit():
    assert estimate_context_tokens("自动化语言") == 5
    assert estimate_context_tokens("ひらがなカタカナ") == 8
    assert estimate_context_tokens("한국어") == 3


def test_each_punctuation_mark_or_symbol_is_one_unit():
    assert estimate_context_tokens("a, b.") == 4
    assert estimate_context_tokens("「好」。") == 4
    assert estimate_context_tokens("->") == 2


def test_whitespace_counts_nothing():
    assert estimate_context_tokens("") == 0
    assert estimate_context_tokens(" \n\t\u3000") == 0


def test_accented_latin_words_stay_one_word():
    assert estimate_context_tokens("café naïve") == 2
    assert estimate_context_tokens("cafe\u0301") == 1


def test_mixed_script_text_switches_between_words_and_characters():
    assert estimate_context_tokens("用Go实现") == 4


@given(st.text(max_size=200), st.text(max_size=200))
def test_joining_on_whitespace_adds_the_two_counts(left, right):
    joined = estimate_context_tokens(left + "\n" + right)
    assert joined == estimate_context_tokens(left) + estimate_context_tokens(right)


@given(st.text(max_size=300))
def test_the_count_never_exceeds_the_characters(text):
    assert 0 <= estimate_context_tokens(text) <= len(text)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_ascii_text_counts_as_the_character_by_character_rule_counts_it(text):
    # ASCII text is counted in C; a no-break space (whitespace, counts nothing) sends the same text down the loop.
    assert estimate_context_tokens(text) == estimate_context_tokens(text + "\u00a0")
