"""Per-process memos of the assembly core (pure Python, no Django): bounded, emptied when full.

The same entries come back prepare after prepare, so the core keeps what it derives from their texts (normalized
texts and slots, identity lines, token units) in plain dicts: a hit is one lookup, where ``functools.lru_cache``'s
bookkeeping on every hit cost a measurable share of a prepare. Emptied when full rather than evicting: never wrong
(what comes back after is derived again), and memory stays bounded whatever is stored.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


def remembered(memo: dict[_K, _V], size: int, key: _K, value: _V) -> _V:
    """``value``, kept in ``memo`` under ``key``; ``memo`` is emptied first when it holds ``size`` entries."""
    if len(memo) >= size:
        memo.clear()
    memo[key] = value
    return value
