"""The selection chapter's transparent offline token estimate (seeds/003 ``estimate_context_tokens``).

One unit per Latin word (a maximal run of letters, digits and combining marks), per CJK character and per
punctuation mark or symbol; whitespace counts nothing. It is a teaching unit for deterministic, offline budgets,
not any vendor's tokenizer: a host that needs the real count passes its tokenizer to the Python client.
The server computes the same units with the same code (``vocabulary.tokens`` of PowerContext, which an installed
host cannot import, and which cannot import this package): tests/client/test_tokens_parity.py holds the two
modules' code equal and compares their counts on generated text, down every path.
"""

from __future__ import annotations

import unicodedata

CJK_RANGES = (
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility jamo
    (0x31A0, 0x31FF),  # Bopomofo extended, CJK strokes, Katakana extensions
    (0x3400, 0x4DBF),  # CJK unified ideographs extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul jamo extended-A
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # halfwidth Katakana
    (0x20000, 0x3134F),  # CJK unified ideographs extensions B-G, compatibility supplement
)
"""Code points counted one unit each, never part of a word."""


def is_cjk(character: str) -> bool:
    """Whether one character is a CJK ideograph, kana, bopomofo or hangul (one unit on its own)."""
    point = ord(character)
    return any(low <= point <= high for low, high in CJK_RANGES)


_ASCII_ALNUM = bytes(c for c in range(128) if chr(c).isalnum())
_ASCII_SPACE = bytes(c for c in range(128) if chr(c).isspace())
_ASCII_WORD_OR_SPACE = _ASCII_ALNUM + _ASCII_SPACE
_ASCII_WORD_SHAPE = bytes.maketrans(
    bytes(range(128)), "".join("a" if chr(c).isalnum() else " " for c in range(128)).encode("ascii")
)
"""For ASCII text, the loop below in C: every character that is neither a letter, a digit nor whitespace
(``str.isspace``, which includes 0x1C-0x1F) is a unit, and a word starts at each letter or digit that follows any
other character (in the text's shape: ``a`` for a letter or digit, a space for anything else)."""


def estimate_context_tokens(text: str) -> int:
    """Teaching units of ``text``: Latin words + CJK characters + punctuation marks and symbols (linear)."""
    if text.isascii():  # most text; the character loop costs ~40 ns a character, this about 2
        encoded = text.encode("ascii")
        marks = len(encoded.translate(None, _ASCII_WORD_OR_SPACE))
        shape = encoded.translate(_ASCII_WORD_SHAPE)
        return marks + shape.count(b" a") + shape.startswith(b"a")
    units = 0
    in_word = False
    for character in text:
        if character.isspace():
            in_word = False
        elif character.isascii():
            if character.isalnum():
                if not in_word:
                    units += 1
                    in_word = True
            else:
                units += 1
                in_word = False
        elif is_cjk(character):
            units += 1
            in_word = False
        elif unicodedata.category(character)[0] in "LNM":
            if not in_word:
                units += 1
                in_word = True
        else:
            units += 1
            in_word = False
    return units
