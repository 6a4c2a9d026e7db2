"""Rules every stored string obeys, and the content hashes of stored text."""

from __future__ import annotations

import hashlib
import json
import re

_FORBIDDEN = re.compile("[\x00\ud800-\udfff]")


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


def sha256_text(value: str) -> str:
    """SHA-256 hex of a string's UTF-8 bytes (content hashes; API keys are stored this way too)."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def canonical_json(value: object) -> str:
    """The JSON that content hashes are computed over: sorted keys, no spaces, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def text_problem(value: object, *, max_length: int, allow_empty: bool = False) -> str | None:
    """Why ``value`` cannot be stored as a text of at most ``max_length`` characters, or None.

    The one rule for stored strings at every boundary: the services, the fixture loader and the
    strict request fields (which check type and length themselves, then ``stored_text_problem``).
    """
    if not isinstance(value, str):
        return "must be a string"
    if not value and not allow_empty:
        return "must not be empty"
    if len(value) > max_length:
        return f"must be at most {max_length} characters"
    return stored_text_problem(value)
