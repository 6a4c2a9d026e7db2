"""Rules every stored string obeys, at every write boundary (API, fixtures, admin)."""

import re

_FORBIDDEN = re.compile("[\x00\ud800-\udfff]")


class StoredTextError(ValueError):
    """A string cannot be stored: it holds U+0000 or a lone surrogate."""


def stored_text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored, or None when it can.

    PostgreSQL cannot store U+0000 in text and no engine can store a lone surrogate as UTF-8; one
    rule for both engines keeps them equal. Every other character is kept exactly.
    """
    match = _FORBIDDEN.search(value)
    if match is None:
        return None
    char = match.group()
    position = match.start()
    if char == "\x00":
        return f"contains U+0000 (NUL) at character {position}"
    return f"contains a lone surrogate U+{ord(char):04X} at character {position}"


def require_storable(value: str, *, field: str) -> str:
    """Return ``value`` unchanged or raise StoredTextError naming ``field``."""
    problem = stored_text_problem(value)
    if problem:
        raise StoredTextError(f"{field} {problem}")
    return value
