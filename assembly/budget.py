"""The one budget engine both formats use (pure Python, no Django).

An entry is fitted as if it were the last one: the room it may use is `max_bytes` minus everything
already in the content minus the closing suffix (end marker). The entry's own bytes are its overhead
(section heading when it opens one, numbered heading, metadata, citation, separators) plus its body.

Bodies are measured, not rendered, while fitting. A cut is a UTF-8 byte offset into the text the
format truncates; valid cuts are its code point boundaries. A `Body` exposes two measures that never
decrease as the cut grows:

- `cap(cut)`: the bytes the per-entry cap and the truncation minimum count (Markdown: the normalized,
  escaped prefix; legacy: the stored prefix's own UTF-8 bytes);
- `cost(cut)`: the bytes the rendered prefix adds to the content, without the ellipsis.

The longest admissible prefix is found by binary search over byte offsets, then moved back to the
code point boundary at or before it (the largest valid cut that satisfies both limits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .types import REASON_BUDGET, REASON_TRUNCATION_BELOW_MINIMUM

BODY_CAP_BYTES = 2000
"""Per-entry cap on a body (normalized and escaped for Markdown), ellipsis included."""
MIN_TRUNCATED_BODY_BYTES = 64
"""A truncated body, ellipsis included, must have at least this many bytes."""
ELLIPSIS = "\u2026"
ELLIPSIS_BYTES = len(ELLIPSIS.encode("utf-8"))


class Body(Protocol):
    units: int
    """Bytes of the text; a cut is a byte offset in 0..units on a code point boundary."""
    fixed_cost: int
    """Bytes the rendered body adds whatever the cut (e.g. the first quote prefix and final LF)."""
    complete_cap: int
    complete_cost: int
    """Bytes the complete rendered body adds to the content (fixed_cost included)."""

    def boundary(self, cut: int) -> int:
        """The largest valid cut at or before `cut`."""
        ...

    def cap(self, cut: int) -> int: ...

    def cost(self, cut: int) -> int:
        """Bytes the rendered truncated body adds, fixed_cost included, ellipsis excluded."""
        ...

    def render(self, cut: int | None) -> str:
        """The complete body (None) or its prefix up to `cut` plus the ellipsis."""
        ...

    def unquoted(self, cut: int | None) -> str:
        """What `render` writes, without the quote prefixes of a Markdown body (what a token budget counts)."""
        ...


@dataclass(frozen=True, slots=True)
class Fit:
    """The engine's verdict: `cut` None = complete body, an int = truncated there; `reason` = skipped."""

    cut: int | None
    bytes: int
    reason: str | None = None

    @property
    def included(self) -> bool:
        return self.reason is None


def fit_entry(body: Body, *, complete_overhead: int, truncated_overhead: int, room: int) -> Fit:
    """Fit one entry into `room` bytes: complete if possible, else the longest admissible truncation.

    Skips report `bytes` = what the complete form would have added. The skip reason is `budget` when
    the room cannot hold even a minimal truncated form (a 64-byte body on one line), and
    `truncation_below_minimum` when it could, but this body's longest fitting prefix (line breaks,
    multibyte characters and escapes cost more than one byte each) stays below 64 bytes.
    """
    complete_bytes = complete_overhead + body.complete_cost
    if body.complete_cap <= BODY_CAP_BYTES and complete_bytes <= room:
        return Fit(None, complete_bytes)

    cost_room = room - truncated_overhead - ELLIPSIS_BYTES
    cap_room = BODY_CAP_BYTES - ELLIPSIS_BYTES
    # cost(cut) >= fixed_cost + cap(cut), and an admissible prefix has cap >= MIN - ELLIPSIS.
    if cost_room < body.fixed_cost + MIN_TRUNCATED_BODY_BYTES - ELLIPSIS_BYTES:
        return Fit(None, complete_bytes, REASON_BUDGET)

    # Largest offset with both measures in room; offset 0 always qualifies. Every byte costs at least
    # one cap byte, and the complete body is already known not to fit.
    low, high = 0, max(0, min(body.units - 1, cap_room))
    while low < high:
        middle = (low + high + 1) // 2
        if body.cap(middle) <= cap_room and body.cost(middle) <= cost_room:
            low = middle
        else:
            high = middle - 1
    low = body.boundary(low)
    if body.cap(low) + ELLIPSIS_BYTES < MIN_TRUNCATED_BODY_BYTES:
        return Fit(None, complete_bytes, REASON_TRUNCATION_BELOW_MINIMUM)
    return Fit(low, truncated_overhead + body.cost(low) + ELLIPSIS_BYTES)


class Packer:
    """Accumulates content between a fixed prefix and suffix, tracking its UTF-8 size arithmetically."""

    __slots__ = ("_prefix", "_suffix", "_parts", "_max_bytes", "size")

    def __init__(self, prefix: str, suffix: str, max_bytes: int) -> None:
        self._prefix = prefix
        self._suffix = suffix
        self._parts: list[str] = []
        self._max_bytes = max_bytes
        self.size = len(prefix.encode("utf-8")) + len(suffix.encode("utf-8"))

    @property
    def empty(self) -> bool:
        return not self._parts

    @property
    def room(self) -> int:
        """Bytes the next entry may add if it is the last one."""
        return self._max_bytes - self.size

    def append(self, text: str, size: int) -> None:
        self._parts.append(text)
        self.size += size

    def content(self) -> str | None:
        """The final content, or None when nothing was appended."""
        if not self._parts:
            return None
        content = self._prefix + "".join(self._parts) + self._suffix
        if len(content.encode("utf-8")) != self.size or self.size > self._max_bytes:
            raise AssertionError("assembly size accounting diverged from the rendered content")
        return content
