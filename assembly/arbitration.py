"""The selection policy's rules (seeds/003), as pure functions over one family's pool (no Django).

In a fixed order, each gate deciding only what the ones before it let through:

    scope gate     a candidate from a scope this prepare did not read          -> scope_mismatch
    confidence     score below min_score (no score fails when min_score > 0)   -> low_confidence
                   not applied to a family with no recall score (a profile): noted gate_not_applicable
    authority      its scope's tier is not one of vocabulary.authority's tiers -> unknown_authority
    order          tier (current_turn first), score desc (none last), source rank asc, captured_at desc, identity asc
    exact dedupe   same normalized slot and text as one earlier in that order  -> duplicate_content (names it)
    conflict       same normalized slot, other text, after the slot's winner   -> authority_loser (other tier) or
                                                                                  conflict_loser (same tier)

What survives goes to packing (``assembly.selection``) in that order; the losers are decided here, so no budget
outcome can bring one back. Authority never bypasses the scope or confidence gate: they come first. A profile
snapshot is requested by its section, not ranked by the query: it has no score to gate, so under ``min_score`` > 0
it passes the confidence gate untested, with a note that says so, and the other gates and packing decide it.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

from vocabulary.authority import AUTHORITY_DEFAULT, AUTHORITY_TIERS
from vocabulary.citation import Citation
from vocabulary.families import UNSCORED_FAMILIES

from .memo import remembered
from .types import (
    REASON_AUTHORITY_LOSER,
    REASON_CONFLICT_LOSER,
    REASON_DUPLICATE_CONTENT,
    REASON_LOW_CONFIDENCE,
    REASON_SCOPE_MISMATCH,
    REASON_UNKNOWN_AUTHORITY,
)

_TIER_ORDER = {tier: position for position, tier in enumerate(AUTHORITY_TIERS)}


CACHED_TEXT_MAX_CHARACTERS = 2000
"""Texts up to this long keep their normalized form in a small cache (slots, most bodies); longer bodies (up to
65,536 characters) are normalized each time, so that the cache's memory stays bounded whatever is stored."""


def _normalized(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


NORMALIZED_MEMO_SIZE = 4096
"""How many normalized texts and slots a process keeps (emptied when full): the same entries come back prepare after
prepare, and a plain dict lookup costs a fraction of normalizing (or of ``lru_cache``'s bookkeeping)."""
_normalized_memo: dict[str, str] = {}
_slot_memo: dict[str | None, str | None] = {None: None}


def normalized_text(text: str) -> str:
    """What exact dedupe compares: NFKC, case folded, whitespace runs collapsed to one space, trimmed."""
    if (known := _normalized_memo.get(text)) is not None:
        return known
    if len(text) > CACHED_TEXT_MAX_CHARACTERS:
        return _normalized(text)
    return remembered(_normalized_memo, NORMALIZED_MEMO_SIZE, text, _normalized(text))


def normalized_slot(conflict_key: str | None) -> str | None:
    """A conflict slot as the policy compares it (``normalized_text``); None when absent or blank."""
    if conflict_key in _slot_memo:
        return _slot_memo[conflict_key]
    if conflict_key is None:
        return None
    return remembered(_slot_memo, NORMALIZED_MEMO_SIZE, conflict_key, normalized_text(conflict_key) or None)


def usable_score(score: float | None) -> float | None:
    """A score the policy can order by: None for none or NaN (NaN would make any order depend on the input's)."""
    return None if score is None or math.isnan(score) else score


def usable_scores(scores: Sequence[float | None]) -> list[float | None]:
    """A pool's scores, each a ``usable_score`` (``s == s`` is false for NaN alone: one comparison instead of a call
    per candidate)."""
    return [score if score == score else None for score in scores]


CitationOrder = tuple[str, str, str, int, str, str]
"""A citation's identity as a sort key (``citation_order``)."""

OrderKey = tuple[int, bool, float, int, int]
"""The policy's sort key as far as the source rank, then the contender's index (``_order_key``)."""


def citation_order(citation: Citation) -> CitationOrder:
    """The last tie-break: a citation's identity, field by field (absent entry fields first)."""
    return (
        citation.scope_id,
        citation.family,
        citation.artifact_id,
        citation.revision,
        citation.entry_id or "",
        citation.entry_version or "",
    )


def scope_tier(scope_id: str, tiers: Mapping[str, str | None]) -> str:
    """The tier of a scope read: as the operator stored it, the default when not configured (maybe not a tier)."""
    stored = tiers.get(scope_id)
    return AUTHORITY_DEFAULT if stored is None else stored


class Contender(NamedTuple):
    """One pool candidate as the policy sees it: its identity, its text and the evidence it is ranked by.

    Immutable tuples rather than frozen dataclasses: a prepare builds dozens per family (a frozen dataclass sets
    each field through ``object.__setattr__``)."""

    citation: Citation
    text: str
    score: float | None
    source_rank: int
    captured_at: str | None = None
    conflict_key: str | None = None


class Contenders(NamedTuple):
    """A pool's contenders as columns, contender i at index i of each: what the rules read.

    Columns rather than a tuple per contender: a prepare's pool comes as columns already (its candidates, the
    evidence noted of them, their recall ranks), and reading a column costs less than building a tuple per member
    and reading it back field by field."""

    citations: Sequence[Citation]
    texts: Sequence[str]
    scores: Sequence[float | None]
    source_ranks: Sequence[int]
    """A ``range`` when the ranks are the positions (a prepare's pool): then they never tie, and the capture times
    (which only break ties) are never read."""
    captured_at: Sequence[str | None]
    conflict_keys: Sequence[str | None]

    @classmethod
    def of(cls, contenders: Sequence[Contender]) -> Contenders:
        """The columns of a sequence of ``Contender``s."""
        if not contenders:
            return cls((), (), (), (), (), ())
        return cls(*zip(*contenders, strict=True))


class Verdict(NamedTuple):
    """One contender's outcome here: ``reason`` None means it goes on to packing; ``ungated``: the confidence gate
    did not apply to it (``gate_not_applicable``)."""

    authority: str | None
    slot: str | None
    reason: str | None = None
    winner: Citation | None = None
    ungated: bool = False


class Arbitration(NamedTuple):
    """The outcome over one pool, by contender index.

    ``authorities[i]`` and ``slots[i]``: contender i's tier (None when the scope gate rejected it) and normalized
    slot; ``rejected``: the index of each contender a gate decided, with its reason and the winner it lost to
    (None: no winner); ``ungated``: the indices the confidence gate did not apply to (a family with no recall score,
    under ``min_score`` > 0); ``order``: the indices that go on to packing, in packing order. Survivors get no object of
    their own: a prepare arbitrates dozens of candidates, most of them survivors. A named tuple of plain lists, like
    ``Contender``: built once per pool on a prepare's path.
    """

    authorities: Sequence[str | None]
    slots: Sequence[str | None]
    rejected: Mapping[int, tuple[str, Citation | None]]
    order: Sequence[int]
    ungated: Collection[int] = frozenset()

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """Every contender's outcome as one ``Verdict`` each (built on demand: for tests and tools)."""
        rejected, ungated = self.rejected, self.ungated
        verdicts = []
        for index, (authority, slot) in enumerate(zip(self.authorities, self.slots, strict=True)):
            reason, winner = rejected.get(index, (None, None))
            verdicts.append(Verdict(authority, slot, reason, winner, index in ungated))
        return tuple(verdicts)


def policy_order(contenders: Contenders, indices: Sequence[int], tiers: Sequence[str]) -> list[int]:
    """``indices`` by tier, score desc (none last), source rank asc, captured_at desc (none last), identity asc.

    ``tiers[i]`` is contender i's (a known tier). One sort on a total key: the order depends on the contenders alone,
    never on the order they came in (identities are unique in a pool).
    """
    order, scores, ranks = _TIER_ORDER, contenders.scores, contenders.source_ranks
    return _sorted(contenders, [_order_key(order[tiers[i]], scores[i], ranks[i], i) for i in indices])


def _order_key(tier_position: int, score: float | None, rank: int, index: int) -> OrderKey:
    """The policy's sort key as far as the source rank (``_sorted`` adds capture time and identity when ranks repeat).

    ``arbitrate_columns`` builds the same tuple inline, without a call per contender."""
    return (tier_position, score is None, 0.0 if score is None else -score, rank, index)


def _sorted(contenders: Contenders, decorated: list[OrderKey]) -> list[int]:
    """The indices of ``_order_key`` tuples in policy order. Capture time and identity join the key only when source
    ranks repeat, which never happens within one family's pool (its ranks are its positions, given as a ``range``):
    building them for every contender cost more than the rest of the order."""
    ranks = contenders.source_ranks
    if not isinstance(ranks, range) and len({entry[3] for entry in decorated}) < len(decorated):
        captured, citations = contenders.captured_at, contenders.citations
        times = sorted({when for entry in decorated if (when := captured[entry[4]]) is not None}, reverse=True)
        newest_first: dict[str | None, int] = {when: position for position, when in enumerate(times)}
        latest = len(times)
        tie_broken: list[tuple[int, bool, float, int, int, CitationOrder, int]] = [
            (*entry[:4], newest_first.get(captured[i := entry[4]], latest), citation_order(citations[i]), i)
            for entry in decorated
        ]
        tie_broken.sort()
        return [entry[-1] for entry in tie_broken]
    decorated.sort()
    return [entry[-1] for entry in decorated]


def arbitrate(
    contenders: Sequence[Contender],
    *,
    scopes: Collection[str],
    tiers: Mapping[str, str | None],
    min_score: float,
) -> Arbitration:
    """Every gate before packing, in order, over one family's pool (see the module docstring).

    ``scopes``: the scopes the prepare read for this family; ``tiers``: the operator's tier per scope as stored;
    ``min_score`` 0 turns the confidence gate off (a family with no recall score never meets it). Scores must already
    be ``usable_score``s.
    """
    return arbitrate_columns(Contenders.of(contenders), scopes=scopes, tiers=tiers, min_score=min_score)


def arbitrate_columns(
    contenders: Contenders,
    *,
    scopes: Collection[str],
    tiers: Mapping[str, str | None],
    min_score: float,
) -> Arbitration:
    """``arbitrate`` over a pool given as columns (what a prepare has).

    Two passes over the pool: the gates with each admitted contender's sort key, then (after the sort) dedupe and
    conflict, with the per-scope facts looked up once per scope. A prepare arbitrates a pool or two on every request:
    this measured about a tenth faster than a pass per gate over the same pools (same outcome, to the index).
    """
    citations, scores, ranks = contenders.citations, contenders.scores, contenders.source_ranks
    slots = list(map(normalized_slot, contenders.conflict_keys))
    gated = min_score > 0
    tier_order = _TIER_ORDER
    per_scope: dict[str, tuple[str | None, int | None]] = {}
    tier_of: list[str | None] = []
    rejected: dict[int, tuple[str, Citation | None]] = {}
    ungated: list[int] = []
    decorated: list[OrderKey] = []
    for index, citation in enumerate(citations):
        if (known := per_scope.get(scope := citation.scope_id)) is None:
            if scope in scopes:
                read_tier = scope_tier(scope, tiers)
                known = per_scope[scope] = (read_tier, tier_order.get(read_tier))
            else:
                known = per_scope[scope] = (None, None)
        tier, position = known
        tier_of.append(tier)
        if tier is None:  # the scope gate: this prepare did not read that scope for this family
            rejected[index] = (REASON_SCOPE_MISMATCH, None)
            continue
        score = scores[index]
        if gated:  # the confidence gate
            if citation.family in UNSCORED_FAMILIES:
                ungated.append(index)  # no score to test: noted, and the authority gate decides next
            elif score is None or score < min_score:
                rejected[index] = (REASON_LOW_CONFIDENCE, None)
                continue
        if position is None:
            rejected[index] = (REASON_UNKNOWN_AUTHORITY, None)
        else:  # _order_key, inline
            decorated.append((position, score is None, 0.0 if score is None else -score, ranks[index], index))
    survivors = _deduplicated_and_arbitrated(contenders, _sorted(contenders, decorated), tier_of, slots, rejected)
    return new_tuple(Arbitration, (tier_of, slots, rejected, survivors, ungated))


def _deduplicated_and_arbitrated(
    contenders: Contenders,
    ordered: list[int],
    tier_of: list[str | None],
    slots: list[str | None],
    rejected: dict[int, tuple[str, Citation | None]],
) -> list[int]:
    """Exact dedupe then conflict over the admitted, in policy order: the survivors, the losers decided."""
    # Exact dedupe (the same text in the same slot, slot-less with slot-less only; the first in policy order
    # stays), then conflict (the first of a slot wins it; every other text of that slot loses to it).
    first_of: dict[tuple[str | None, str], int] = {}
    slot_winner: dict[str, int] = {}
    survivors: list[int] = []
    claim_text, claim_slot = first_of.setdefault, slot_winner.setdefault
    texts, citations = contenders.texts, contenders.citations
    known = _normalized_memo.get  # normalized_text's own memo first, without a call per contender that hits it
    for index in ordered:
        slot, text = slots[index], texts[index]
        if (kept := claim_text((slot, known(text) or normalized_text(text)), index)) != index:
            rejected[index] = (REASON_DUPLICATE_CONTENT, citations[kept])
        elif slot is not None and (won := claim_slot(slot, index)) != index:
            reason = REASON_CONFLICT_LOSER if tier_of[won] == tier_of[index] else REASON_AUTHORITY_LOSER
            rejected[index] = (reason, citations[won])
        else:
            survivors.append(index)
    return survivors


new_tuple = tuple.__new__
"""``new_tuple(Contender, (every field))`` builds a named tuple in a quarter of the time its constructor takes (no
keyword handling): the policy builds a contender per pool member."""
