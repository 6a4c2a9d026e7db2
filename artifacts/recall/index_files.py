"""What this machine's two on-disk indexes of the large scopes share: the lexical engine's (``engine``, tantivy) and the
dense index's (``vectors.ann``, usearch).

The two rankers never import each other (``tests/unit/recall/test_layering.py``), so the pieces they would otherwise
each write again live here, below both: why a reader does not use an index, how a build reports its progress and
what one update did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class IndexUnusable(Exception):
    """An index cannot answer; ``reason`` labels its fallback metric. Each index raises its own subclass (its
    ``store.IndexUnusable``, with its own set of reasons), so that one index's failure is never caught as the
    other's."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Refused:
    """An index this process found unusable, kept in place of what it would have opened until the index changes
    (``stamp``, of its metadata file), with why: opening a damaged index again at every query would cost more than
    the fallback."""

    stamp: tuple[int, int, int]
    reason: str
    detail: str


Progress = Callable[[int, int], None]
"""``progress(done, total)``: the items (documents, vectors) added so far out of those an update adds."""


@dataclass(frozen=True, kw_only=True)
class UpdateResult:
    """What one update did to one scope and family's index, as both indexes report it; each index's own result adds
    what it counts (what it removed and what it holds). Keyword-only, so no field is ever given by position."""

    scope_pk: int
    family: str
    rebuilt: bool
    added: int
    watermark: int
    seconds: float
