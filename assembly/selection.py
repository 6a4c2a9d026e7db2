"""Selection and ordering (RFC steps 4-8) and the two assembly entry points (pure Python, no Django).

    pools:    per family, round-robin over scopes -> cap -> drop bodiless -> exact dedupe -> recall_rank
    markdown: families in sections order, each up to its limit, every entry fitted by the budget engine
    legacy:   memory, topic_memory, experience interleaved by recall rank, limits 6 / 2 / 2

Within a family, retrieval order (a reranker's order included) is the input order and is never re-sorted.
Every candidate considered gets exactly one `Decision`; decisions are listed family by family (visited
families first, in visiting order, then unselected ones), each family's candidates in merged pool order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from vocabulary.families import ASSEMBLED_FAMILIES, LEGACY_FAMILIES, LEGACY_LIMITS, POOL_CAP

from .budget import Packer, fit_entry
from .rendering import (
    LEGACY_PREFIX,
    LEGACY_SUFFIX,
    MARKDOWN_PREFIX,
    MARKDOWN_SUFFIX,
    EntryForm,
    legacy_entry,
    markdown_entry,
)
from .types import (
    OUTCOME_INCLUDED,
    OUTCOME_INCLUDED_TRUNCATED,
    OUTCOME_SKIPPED,
    REASON_DUPLICATE,
    REASON_FAMILY_LIMIT_REACHED,
    REASON_FAMILY_NOT_SELECTED,
    REASON_NO_BODY,
    REASON_POOL_CAP,
    STATUS_EMPTY,
    STATUS_READY,
    AssemblyOptions,
    Candidate,
    Decision,
    Origin,
    PreparedResult,
    Recalled,
)

__all__ = [
    "Pool",
    "Ranked",
    "assemble_legacy",
    "assemble_markdown",
    "build_pool",
    "empty_result",
    "interleave",
]


class Ranked:
    """A pool candidate that survived steps 4-5, with its family-local recall rank (step 6)."""

    __slots__ = ("candidate", "recall_rank", "decision")

    def __init__(self, candidate: Candidate, recall_rank: int) -> None:
        self.candidate = candidate
        self.recall_rank = recall_rank
        self.decision: Decision | None = None


class Pool:
    """One family's merged candidates: `ranked` in recall order, `log` (all of them) in merged order."""

    __slots__ = ("ranked", "log")

    def __init__(self, ranked: list[Ranked], log: list[Ranked | Decision]) -> None:
        self.ranked = ranked
        self.log = log

    def decisions(self) -> Iterable[Decision]:
        for item in self.log:
            decision = item.decision if isinstance(item, Ranked) else item
            assert decision is not None, "every ranked candidate is decided before the log is read"
            yield decision


_T = TypeVar("_T")


def interleave(per_scope: Sequence[Sequence[_T]]) -> list[_T]:
    """Round-robin over lists in their order: s1[0], s2[0], ..., s1[1], s2[1], ..."""
    if len(per_scope) == 1:
        return list(per_scope[0])
    merged: list[_T] = []
    depth = max((len(hits) for hits in per_scope), default=0)
    for index in range(depth):
        for hits in per_scope:
            if index < len(hits):
                merged.append(hits[index])
    return merged


def _dropped(candidate: Candidate, reason: str) -> Decision:
    return Decision(candidate.citation, None, OUTCOME_SKIPPED, reason, None)


def build_pool(family: str, per_scope: Sequence[Sequence[Candidate]]) -> Pool:
    """RFC steps 4-6 for one family."""
    merged = interleave(per_scope)
    cap = POOL_CAP.get(family)
    ranked: list[Ranked] = []
    log: list[Ranked | Decision] = []
    seen = set()
    for position, candidate in enumerate(merged):
        if candidate.citation.family != family:
            raise ValueError(f"a {candidate.citation.family} candidate was recalled as {family}")
        if cap is not None and position >= cap:
            log.append(_dropped(candidate, REASON_POOL_CAP))
        elif not candidate.body:
            log.append(_dropped(candidate, REASON_NO_BODY))
        elif candidate.citation in seen:
            log.append(_dropped(candidate, REASON_DUPLICATE))
        else:
            seen.add(candidate.citation)
            item = Ranked(candidate, len(ranked) + 1)
            ranked.append(item)
            log.append(item)
    return Pool(ranked, log)


def _not_selected(recalled: Recalled, visited: Iterable[str]) -> list[Decision]:
    """family_not_selected for every candidate of a family present in `recalled` but not visited."""
    skip = set(visited)
    order = {family: index for index, family in enumerate(ASSEMBLED_FAMILIES)}
    others = [family for family in recalled if family not in skip]
    others.sort(key=lambda family: (order.get(family, len(order)), family))
    return [
        _dropped(candidate, REASON_FAMILY_NOT_SELECTED)
        for family in others
        for candidate in interleave(recalled[family])
    ]


def _skipped(item: Ranked, reason: str, size: int | None = None) -> None:
    item.decision = Decision(item.candidate.citation, item.recall_rank, OUTCOME_SKIPPED, reason, size)


def _try_entry(packer: Packer, item: Ranked, form: EntryForm) -> bool | None:
    """Fit one entry and record its decision: None = skipped, else appended and whether truncated."""
    fit = fit_entry(
        form.body,
        complete_overhead=form.complete_overhead,
        truncated_overhead=form.truncated_overhead,
        room=packer.room,
    )
    if not fit.included:
        _skipped(item, fit.reason, fit.bytes)
        return None
    packer.append(form.render(fit.cut), fit.bytes)
    truncated = fit.cut is not None
    outcome = OUTCOME_INCLUDED_TRUNCATED if truncated else OUTCOME_INCLUDED
    item.decision = Decision(item.candidate.citation, item.recall_rank, outcome, None, fit.bytes)
    return truncated


def _result(packer: Packer, origins: list[Origin], decisions: list[Decision]) -> PreparedResult:
    content = packer.content()
    if content is None:
        return PreparedResult(STATUS_EMPTY, None, 0, (), tuple(decisions))
    return PreparedResult(STATUS_READY, content, packer.size, tuple(origins), tuple(decisions))


def empty_result() -> PreparedResult:
    """The normal empty result: no content, no origins, nothing considered."""
    return PreparedResult(STATUS_EMPTY, None, 0, (), ())


def assemble_markdown(recalled: Recalled, options: AssemblyOptions, *, max_bytes: int) -> PreparedResult:
    """Markdown V1: sections in `options.sections` order, each up to its limit, under `max_bytes`."""
    if not options.sections:
        return empty_result()
    packer = Packer(MARKDOWN_PREFIX, MARKDOWN_SUFFIX, max_bytes)
    origins: list[Origin] = []
    decisions: list[Decision] = []
    for spec in options.sections:
        pool = build_pool(spec.family, recalled.get(spec.family, ()))
        number = 0
        for item in pool.ranked:
            if number == spec.limit:
                _skipped(item, REASON_FAMILY_LIMIT_REACHED)
                continue
            citation = item.candidate.citation
            form = markdown_entry(
                citation,
                item.candidate.body,
                section_family=spec.family,
                number=number + 1,
                recall_rank=item.recall_rank,
                show=options.show,
                opens_section=number == 0,
            )
            truncated = _try_entry(packer, item, form)
            if truncated is not None:
                number += 1
                origins.append(Origin(citation, spec.family, number, item.recall_rank, truncated))
        decisions.extend(pool.decisions())
    decisions.extend(_not_selected(recalled, (spec.family for spec in options.sections)))
    return _result(packer, origins, decisions)


def assemble_legacy(recalled: Recalled, *, max_bytes: int) -> PreparedResult:
    """Legacy envelope V1: m1, t1, e1, m2, t2, e2, ... with output limits 6 / 2 / 2 under `max_bytes`."""
    pools = [build_pool(family, recalled.get(family, ())) for family in LEGACY_FAMILIES]
    packer = Packer(LEGACY_PREFIX, LEGACY_SUFFIX, max_bytes)
    origins: list[Origin] = []
    included = dict.fromkeys(LEGACY_FAMILIES, 0)
    for item in interleave([pool.ranked for pool in pools]):
        citation = item.candidate.citation
        family = citation.family
        if included[family] == LEGACY_LIMITS[family]:
            _skipped(item, REASON_FAMILY_LIMIT_REACHED)
            continue
        form = legacy_entry(citation, item.candidate.body, first=packer.empty)
        truncated = _try_entry(packer, item, form)
        if truncated is not None:
            included[family] += 1
            origins.append(Origin(citation, family, len(origins) + 1, item.recall_rank, truncated))
    decisions = [decision for pool in pools for decision in pool.decisions()]
    decisions.extend(_not_selected(recalled, LEGACY_FAMILIES))
    return _result(packer, origins, decisions)
