"""Bounds on JSON a client sends, checked before anything recursive touches it (pure Python).

A JSON document nested a thousand levels deep costs nothing to send, but every recursive reader of it
(the decoder, validation, error reporting) would hit the interpreter's recursion limit; so nesting is
counted first, on the raw text, in one linear pass.
"""

from __future__ import annotations

import re

MAX_JSON_DEPTH = 32
"""The deepest nesting of arrays and objects a request body (or an operator's pasted JSON) may have."""

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (brackets inside strings do not count).

    For text that is not valid JSON the number is approximate; the decoder then refuses it anyway.
    """
    depth = deepest = 0
    for match in _BRACKETS.finditer(_STRINGS.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def json_depth_problem(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why ``text`` is nested too deeply to be read, or None."""
    if json_depth(text) > max_depth:
        return f"JSON nested deeper than {max_depth} levels is refused"
    return None
