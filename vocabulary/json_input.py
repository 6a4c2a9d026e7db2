"""Bounds on JSON a client sends, checked before anything recursive touches it (pure Python).

A JSON document nested a thousand levels deep costs nothing to send, but every recursive reader of it
(the decoder, validation, error reporting) would hit the interpreter's recursion limit; so nesting is
counted first, on the raw text, in one linear pass.

The pass finds tokens (a string, or a run of brackets) left to right and never goes back. That rests on
one property of the token pattern, tested directly: a match that starts at a quote or a bracket always
succeeds, and one that starts anywhere else fails at its first character. A string with no closing quote
is therefore one token running to the end of the text (the decoder refuses that document, and it cannot
recurse past the point where the string started, so brackets after it need no counting). An earlier
pattern failed at an unterminated string only after reading to its end, then was tried again at every
later quote: 20 KB of ``\\"`` pairs cost about a second, 80 KB sixteen.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

MAX_JSON_DEPTH = 32
"""The deepest nesting of arrays and objects a request body (or an operator's pasted JSON) may have."""

TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)|[\[\]{}]+', re.DOTALL)
"""A string (runs of plain characters and escapes, never backtracking; to the end of the text when nothing
closes it), or a run of brackets. Public so the tests can check the property the linear bound rests on
(module docstring)."""

_LEVEL_CHANGE = {"[": 1, "{": 1, "]": -1, "}": -1}

PASSES_PER_CHARACTER = 4
"""The most times the scan reads one character: once while finding tokens, and a character of a run of
two or more brackets three more times (levels accumulated, closers counted twice)."""


@dataclass(frozen=True)
class NestingScan:
    """The deepest nesting found in a text, with the work the scan took to find it."""

    deepest: int
    steps: int
    """Tokens the scan's loop handled (strings and runs of brackets): at most one per character."""
    characters_read: int
    """Characters read, summed over every pass: at most PASSES_PER_CHARACTER times the text's length."""


def scan_json_nesting(text: str) -> NestingScan:
    """The deepest nesting of arrays and objects in ``text``, and the work it took.

    Brackets inside strings do not count. For text that is not valid JSON the number is approximate (the
    decoder then refuses it anyway), but never below the depth the decoder reaches before it refuses.
    """
    depth = deepest = steps = 0
    read = len(text)  # the token search's one pass (see the module docstring)
    for token in TOKEN.finditer(text):
        steps += 1
        run = token[0]
        if run[0] == '"':
            continue
        if len(run) == 1:  # the common case, kept cheap
            depth += _LEVEL_CHANGE[run]
            deepest = max(deepest, depth)
            continue
        read += 3 * len(run)
        deepest = max(deepest, max(accumulate(map(_LEVEL_CHANGE.__getitem__, run), initial=depth)))
        depth += len(run) - 2 * (run.count("]") + run.count("}"))
    return NestingScan(deepest=deepest, steps=steps, characters_read=read)


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (brackets inside strings do not count).

    For text that is not valid JSON the number is approximate; the decoder then refuses it anyway.
    """
    return scan_json_nesting(text).deepest


def json_depth_problem(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why ``text`` is nested too deeply to be read, or None."""
    if json_depth(text) > max_depth:
        return f"JSON nested deeper than {max_depth} levels is refused"
    return None


def repeated_keys(pairs: Sequence[tuple[str, object]]) -> tuple[str, ...]:
    """The keys given more than once among one JSON object's ``pairs`` (``json.loads`` would keep only the last
    value of each), in the order they are first repeated; () when every key is given once."""
    if len(pairs) == len({key for key, _ in pairs}):
        return ()
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for key, _ in pairs:
        if key in seen:
            repeated[key] = None
        seen.add(key)
    return tuple(repeated)
