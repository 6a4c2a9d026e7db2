"""Escaping rules for identities and bodies, defined once (pure Python, no Django).

Prepared content, the citation parser, the admin and the fixture loader all print identities the same
way: a one-line JSON string literal whose remaining Cc, Cf, U+2028 and U+2029 characters are escaped
too (`json_literal`). Markdown bodies make every Cc/Cf character but LF visible
(`escape_body_controls`); operator pages additionally escape every character a reader cannot see
(`escape_invisible`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from functools import cache

# --- Unicode control and format characters -------------------------------------------------------

# Code point ranges of general categories Cc and Cf in Unicode 15.0.0 (Python 3.12's unicodedata).
# Computing them takes ~0.4 s, so the table is precomputed; a different unicodedata version recomputes
# it so the escaping always agrees with `unicodedata.category`.
_CONTROL_RANGES_VERSION = "15.0.0"
_CONTROL_RANGES_15_0 = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)


def control_ranges() -> tuple[tuple[int, int], ...]:
    """Inclusive code point ranges whose Unicode general category is Cc or Cf."""
    if unicodedata.unidata_version == _CONTROL_RANGES_VERSION:
        return _CONTROL_RANGES_15_0
    ranges: list[tuple[int, int]] = []
    for code in range(0x110000):
        if unicodedata.category(chr(code)) in ("Cc", "Cf"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return tuple(ranges)


def _char_class(ranges: tuple[tuple[int, int], ...], extra: str = "") -> re.Pattern[str]:
    parts = []
    for low, high in ranges:
        parts.append(re.escape(chr(low)) if low == high else f"{re.escape(chr(low))}-{re.escape(chr(high))}")
    return re.compile("([" + "".join(parts) + re.escape(extra) + "])")


def _without(ranges: tuple[tuple[int, int], ...], code: int) -> tuple[tuple[int, int], ...]:
    kept: list[tuple[int, int]] = []
    for low, high in ranges:
        if low <= code <= high:
            kept += [piece for piece in ((low, code - 1), (code + 1, high)) if piece[0] <= piece[1]]
        else:
            kept.append((low, high))
    return tuple(kept)


class CharClass:
    """A character class of Cc/Cf characters (plus a few printable ones), scanned as fast as `re` allows.

    `str.isprintable()` is False for every Cc/Cf character, so a text without the class's printable
    members that is printable once its common unprintable non-members (LF for bodies) are replaced has
    no member at all: checked in C, several times faster than a regex scan. Otherwise `re` scans it:
    a class of BMP characters costs one table lookup per character, but a class that also holds
    astral ranges is tested range by range, so texts without astral characters use the BMP part.
    """

    __slots__ = ("_bmp", "_full", "_printable", "_newline_member")

    def __init__(self, ranges: tuple[tuple[int, int], ...], extra: str = "", printable: str = "") -> None:
        self._bmp = _char_class(tuple(r for r in ranges if r[1] <= 0xFFFF), extra)
        self._full = _char_class(ranges, extra)
        self._printable = printable  # members that str.isprintable() accepts
        self._newline_member = self._full.search("\n") is not None

    def _absent(self, text: str) -> bool:
        """True when `text` certainly holds no member of the class (False: it may)."""
        for char in self._printable:
            if char in text:
                return False
        return (text if self._newline_member else text.replace("\n", " ")).isprintable()

    def _pattern(self, text: str) -> re.Pattern[str]:
        astral = not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)
        return self._full if astral else self._bmp

    def sub(self, escape: Callable[[str], str], text: str) -> str:
        """`text` with each character of the class replaced by escape(character)."""
        if self._absent(text):
            return text
        return self._pattern(text).sub(lambda match: escape(match.group()), text)

    def split(self, text: str) -> list[str]:
        """[plain, character, plain, character, ..., plain]: the class's characters and the text between."""
        if self._absent(text):
            return [text]
        return self._pattern(text).split(text)


_RANGES = control_ranges()
# Markdown bodies: every Cc/Cf character but LF becomes a visible escape; LF stays a line separator.
BODY_ESCAPES = CharClass(_without(_RANGES, 0x0A))
# JSON strings: what json.dumps(ensure_ascii=False) escapes (C0 controls, quote, backslash) plus every
# other Cc/Cf character, U+2028 and U+2029.
JSON_ESCAPES = CharClass(_RANGES, '"\\\u2028\u2029', printable='"\\')
# What json.dumps leaves unescaped of those.
_JSON_EXTRA = CharClass(_RANGES, "\u2028\u2029")
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


@cache
def body_escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


@cache
def json_escape(char: str) -> str:
    short = _JSON_SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_literal(value: str) -> str:
    """One-line JSON string literal: what json.dumps(value, ensure_ascii=False) writes, with every
    remaining Cc, Cf, U+2028 and U+2029 character escaped the JSON way too (lowercase hex)."""
    return '"' + JSON_ESCAPES.sub(json_escape, value) + '"'


def legacy_json(value: object) -> str:
    """Compact one-line JSON as the legacy envelope writes it (same extra escaping as identities)."""
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _JSON_EXTRA.sub(json_escape, compact)


def escape_body_controls(text: str) -> str:
    """Every Cc/Cf character except LF becomes a visible \\uXXXX or \\UXXXXXXXX (uppercase hex)."""
    return BODY_ESCAPES.sub(body_escape, text)


# --- identities as operators read them -------------------------------------------------------------

# What json.dumps leaves unescaped, except LF (outside strings it is indentation), plus lone surrogates, which
# a client can send as JSON escapes and no page could encode.
_DISPLAY_EXTRA = CharClass((*_without(_RANGES, 0x0A), (0xD800, 0xDFFF)), "\u2028\u2029")
_PLAIN_IDENTITY_RE = re.compile(r"[A-Za-z0-9_.:@/+\-]+")


def visible_json(value: object, *, indent: int | None = None) -> str:
    """JSON with non-ASCII kept and every Cc, Cf, U+2028, U+2029 inside strings escaped (for display).

    ``json.dumps`` already escapes line breaks inside strings, so a raw LF is indentation.
    """
    return _DISPLAY_EXTRA.sub(json_escape, json.dumps(value, ensure_ascii=False, indent=indent))


def short_identity(value: str) -> str:
    """Plain identities (``entry-1-v2``, ``project:demo``) as they are, anything else as a JSON literal."""
    return value if _PLAIN_IDENTITY_RE.fullmatch(value) else json_literal(value)


def artifact_label(family: str, artifact_id: str) -> str:
    """``memory:memory``; an unusual id is shown as a JSON literal (``memory:"a \\"b\\""``)."""
    return f"{family}:{short_identity(artifact_id)}"


# --- stored text on operator pages ----------------------------------------------------------------

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cn"})


def is_invisible(char: str) -> bool:
    """Characters a reader cannot see or that change how the text around them displays (LF excepted)."""
    if char == "\n":
        return False
    category = unicodedata.category(char)
    return category in _INVISIBLE_CATEGORIES or (category == "Zs" and char != " ")


def escape_invisible(text: str) -> str:
    """``text`` with every invisible character (see ``is_invisible``) as \\uXXXX or \\UXXXXXXXX."""
    return "".join(
        (f"\\u{ord(char):04X}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08X}") if is_invisible(char) else char
        for char in text
    )


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8 cannot encode) written as its ``\\udXXX`` escape.

    For text that echoes client input into a response (error paths, operator pages): it can always be sent.
    """
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")
