"""What a memory entry's conflict slot (``conflict_key``, seeds/003) may be when it is written.

A slot is the writer's explicit name for a fact (``preference:automation-language``): stored exactly as given, part
of the immutable entry version, never guessed from text. Normalizing it (case, spacing) is the selection policy's
job when it compares slots, not the writer's or storage's. One rule for every way in: the write API, the fixture
loader and the published pattern.
"""

from __future__ import annotations

import re

from vocabulary.limits import MAX_CONFLICT_KEY_CHARACTERS

_CONTROL = "\\u0000-\\u001f\\u007f-\\u009f"
"""Unicode's control characters (category Cc), as a character-class range."""

_CONTROL_CHARACTER = re.compile(f"[{_CONTROL}]")

_SPACE_NOT_CONTROL = "\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
"""The characters Python's ``str.isspace`` counts as whitespace that are not control characters."""

CONFLICT_KEY_PATTERN = f"^[{_SPACE_NOT_CONTROL}]*[^\\s{_CONTROL}][^{_CONTROL}]*$"
"""The rule of ``conflict_key_problem`` (but the length) as the one pattern the OpenAPI description publishes:
whitespace that is no control character, then a character that is neither, then anything but a control character
(unambiguous, so it matches in linear time)."""


def conflict_key_problem(value: str) -> str | None:
    """Why ``value`` cannot be a conflict slot, or None when it can: 1 to MAX_CONFLICT_KEY_CHARACTERS characters,
    no control character (U+0000 to U+001F, U+007F to U+009F), not only whitespace."""
    if not value:
        return "must not be empty"
    if len(value) > MAX_CONFLICT_KEY_CHARACTERS:
        return f"must be at most {MAX_CONFLICT_KEY_CHARACTERS} characters (it has {len(value)})"
    if (match := _CONTROL_CHARACTER.search(value)) is not None:
        return f"contains the control character U+{ord(match.group()):04X} at character {match.start()}"
    if value.isspace():
        return "must contain a character that is not whitespace"
    return None
