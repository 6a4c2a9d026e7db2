"""The client's offline token estimate is the server's: a budget means the same on both sides.

The server does not install the client package and an installed host has no server to import, so each carries the
estimator (``vocabulary/tokens.py``, ``powercontext_client/tokens.py``): these tests hold the two modules' code equal
and compare their counts on generated text down every path (empty, the ASCII fast path, the character loop over
multibyte text, and text that mixes both)."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from powercontext_client import tokens as client_tokens
from powercontext_client.tokens import estimate_context_tokens as client_estimate

from vocabulary import tokens as server_tokens
from vocabulary.tokens import estimate_context_tokens as server_estimate

# Whitespace outside ASCII: it counts nothing, and text that holds it takes the character loop, never the fast path.
LOOP = "\u00a0"

ASCII_CLASSES = "aZ09 \t\n\x0b\x1c\x1f\x00.-_~\x7f"
"""One ASCII character of each kind the estimate tells apart: letters, digits, whitespace (``str.isspace`` includes
0x1C-0x1F), punctuation, controls."""
OTHER_CLASSES = (
    "é"  # a letter (Ll)
    "ǅ"  # a titlecase letter (Lt)
    "\u0301"  # a combining mark (Mn): part of a word
    "\u0663"  # an Arabic-Indic digit (Nd)
    "\u00b2"  # superscript two (No)
    "\u00a0\u3000\u2028"  # whitespace
    "\u200b"  # a format character (Cf): a unit
    "—«"  # punctuation
    "😀"  # a symbol outside the BMP
    "\ud800"  # a lone surrogate (Cs), which a str can hold
    "自ひ한"  # CJK: ideograph, kana, hangul
)
CJK_EDGES = "".join(chr(point) for low, high in client_tokens.CJK_RANGES for point in (low - 1, low, high, high + 1))
"""Each CJK range's first and last code point, and their neighbours outside it."""


def module_code(module) -> str:
    """The module's syntax tree without its docstring (each names where the other copy lives)."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    if isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        tree.body = tree.body[1:]
    return ast.dump(tree)


def generated_texts() -> list[str]:
    """Every text of up to three characters over one character of each kind (ASCII and not), every pair of ASCII
    characters, and each CJK range's edges alone and between words."""
    alphabet = ASCII_CLASSES + OTHER_CLASSES
    texts = ["".join(chars) for size in range(4) for chars in itertools.product(alphabet, repeat=size)]
    texts += [a + b for a, b in itertools.product(map(chr, range(128)), repeat=2)]
    texts += [edge for edge in CJK_EDGES] + [f"ab{edge}cd" for edge in CJK_EDGES]
    return texts


TEXTS = generated_texts()
KINDS = {
    "empty": [text for text in TEXTS if not text],
    "ascii": [text for text in TEXTS if text and text.isascii()],
    "multibyte": [text for text in TEXTS if text and not any(char.isascii() for char in text)],
    "mixed": [text for text in TEXTS if not text.isascii() and any(char.isascii() for char in text)],
}


def test_the_client_module_is_the_servers_code():
    assert module_code(client_tokens) == module_code(server_tokens)


@pytest.mark.parametrize("kind", KINDS)
def test_the_client_and_the_server_count_every_generated_text_alike(kind):
    texts = KINDS[kind]
    assert texts
    differing = [text for text in texts if client_estimate(text) != server_estimate(text)]
    assert differing == []


@pytest.mark.parametrize("estimate", [client_estimate, server_estimate], ids=["client", "server"])
def test_the_ascii_fast_path_counts_as_the_character_loop_counts(estimate):
    differing = [text for text in KINDS["ascii"] if estimate(text) != estimate(text + LOOP)]
    assert differing == []


@given(st.text(max_size=400))
def test_the_client_and_the_server_count_the_same_units(text):
    assert client_estimate(text) == server_estimate(text)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=400))
def test_the_client_and_the_server_count_the_same_units_of_ascii_text(text):
    assert client_estimate(text) == server_estimate(text)


def test_the_client_counts_the_chapter_example_like_the_server():
    example = "本轮指令：这次请用 Go 实现 (preference:automation-language)"
    assert client_estimate(example) == server_estimate(example) == 19
