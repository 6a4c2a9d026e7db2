"""What this machine's two on-disk indexes of the large scopes share: the lexical engine's (``engine``, tantivy) and the
dense index's (``vectors.ann``, usearch).

The two rankers never import each other (``tests/unit/recall/test_layering.py``), so the pieces they would otherwise
each write again live here, below both: how a build reports its progress and what one update did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
