"""Selection and ordering (RFC steps 4-8) and the two assembly entry points (pure Python, no Django).

    pools:    per family, round-robin over scopes -> cap -> drop bodiless -> exact dedupe -> recall_rank
    markdown: families in sections order, each up to its limit, every entry fitted by the budget engine
    legacy:   memory, topic_memory, experience interleaved by recall rank, limits 6 / 2 / 2

Within a family, retrieval order (a reranker's order included) is the input order and is never re-sorted,
unless the request asks for a selection policy (``assembly.policy``): then each family's pool, built exactly as
above, goes through the policy's gates (``assembly.arbitration``) and is packed in the policy's order, under the
section's limit (the chapter's top-k), the byte budget and, if given, the token budget.
Every candidate considered gets exactly one `Decision`; decisions are listed family by family (visited
families first, in visiting order, then unselected ones), each family's candidates in merged pool order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TypedDict, TypeVar

from vocabulary.families import (
    ASSEMBLED_FAMILIES,
    CURRENT_SCOPE_ONLY_FAMILIES,
    LEGACY_FAMILIES,
    LEGACY_LIMITS,
    POOL_CAP,
)

from .arbitration import (
    Contenders,
    arbitrate_columns,
    new_tuple,
    normalized_slot,
    scope_tier,
    usable_score,
    usable_scores,
)
from .budget import Packer, fit_entry
from .policy import Selection
from .rendering import (
    LEGACY_PREFIX,
    LEGACY_SUFFIX,
    MARKDOWN_PREFIX,
    MARKDOWN_SUFFIX,
    EntryForm,
    legacy_entry,
    markdown_entry,
)
from .token_budget import TokenBudget
from .types import (
    NOTE_GATE_NOT_APPLICABLE,
    OUTCOME_INCLUDED,
    OUTCOME_INCLUDED_TRUNCATED,
    OUTCOME_SKIPPED,
    REASON_DUPLICATE,
    REASON_FAMILY_LIMIT_REACHED,
    REASON_FAMILY_NOT_SELECTED,
    REASON_NO_BODY,
    REASON_POOL_CAP,
    REASON_TOKEN_BUDGET_EXCEEDED,
    STATUS_EMPTY,
    STATUS_READY,
    AssemblyOptions,
    Candidate,
    Citation,
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
    """A pool candidate that survived steps 4-5, with its family-local recall rank (step 6): its position in the pool's
    ``ranked`` is ``recall_rank - 1``.

    ``verdict`` is what packing or a policy gate decided of it, ``(outcome, reason, bytes, winner)``; its ``Decision``
    is built when the pool's decisions are read, with what a selection policy found of it (``Pool.policy``).
    """

    __slots__ = ("candidate", "recall_rank", "verdict")

    def __init__(self, candidate: Candidate, recall_rank: int) -> None:
        self.candidate = candidate
        self.recall_rank = recall_rank
        self.verdict: tuple[str, str | None, int | None, Citation | None] | None = None

    def decide(self, outcome: str, reason: str | None, size: int | None, winner: Citation | None = None) -> None:
        self.verdict = (outcome, reason, size, winner)


class Pool:
    """One family's merged candidates: `ranked` in recall order, `log` (all of them) in merged order.

    ``policy``: under a selection policy, what it found of the ranked candidates, as columns by pool position
    (tiers, normalized slots, scores) and the positions the confidence gate did not apply to, read only when the
    decisions are: no write-back per candidate.
    """

    __slots__ = ("ranked", "log", "policy")

    def __init__(self, ranked: list[Ranked], log: list[Ranked | Decision]) -> None:
        self.ranked = ranked
        self.log = log
        self.policy: (
            tuple[Sequence[str | None], Sequence[str | None], Sequence[float | None], Collection[int]] | None
        ) = None

    def decisions(self) -> Iterable[Decision]:
        policy = self.policy
        for item in self.log:
            if not isinstance(item, Ranked):
                yield item
                continue
            assert item.verdict is not None, "every ranked candidate is decided before the log is read"
            outcome, reason, size, winner = item.verdict
            rank = item.recall_rank
            if policy is None:
                yield Decision(item.candidate.citation, rank, outcome, reason, size, None, None, winner, None)
            else:
                authorities, slots, scores, ungated = policy
                at = rank - 1
                note = NOTE_GATE_NOT_APPLICABLE if at in ungated else None
                yield Decision(
                    item.candidate.citation,
                    rank,
                    outcome,
                    reason,
                    size,
                    authorities[at],
                    slots[at],
                    winner,
                    scores[at],
                    note,
                )


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


class PolicyFields(TypedDict, total=False):
    """The ``Decision`` fields a selection policy fills in of a candidate dropped before its gates."""

    authority: str | None
    conflict_slot: str | None
    score: float | None


Annotate = Callable[[Candidate], PolicyFields]
"""What a selection policy adds to the decision of a candidate dropped before its gates."""


def pool_positions(lengths: Sequence[int], cap: int | None) -> list[tuple[int, int]]:
    """``(list index, position)`` of the first ``cap`` items (all when None) of ``interleave`` over lists of these
    lengths, in that order: which candidates can enter a pool, without building it."""
    positions: list[tuple[int, int]] = []
    depth = 0
    while cap is None or len(positions) < cap:
        row = [(at, depth) for at, length in enumerate(lengths) if depth < length]
        if not row:
            break
        positions += row
        depth += 1
    return positions if cap is None else positions[:cap]


def _dropped(candidate: Candidate, reason: str, annotate: Annotate | None = None) -> Decision:
    extra: PolicyFields = annotate(candidate) if annotate is not None else {}
    return Decision(candidate.citation, None, OUTCOME_SKIPPED, reason, None, **extra)


def build_pool(family: str, per_scope: Sequence[Sequence[Candidate]], annotate: Annotate | None = None) -> Pool:
    """RFC steps 4-6 for one family (``annotate``: a policy's fields for the pool candidates dropped here)."""
    merged = interleave(per_scope)
    cap = POOL_CAP.get(family)
    ranked: list[Ranked] = []
    log: list[Ranked | Decision] = []
    seen = set()
    for position, candidate in enumerate(merged):
        if candidate.citation.family != family:
            raise ValueError(f"a {candidate.citation.family} candidate was recalled as {family}")
        if cap is not None and position >= cap:
            # Beyond the pool: dropped before any policy reads it (its evidence is not even completed).
            log.append(_dropped(candidate, REASON_POOL_CAP))
        elif not candidate.body:
            log.append(_dropped(candidate, REASON_NO_BODY, annotate))
        elif candidate.citation in seen:
            log.append(_dropped(candidate, REASON_DUPLICATE, annotate))
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
    item.decide(OUTCOME_SKIPPED, reason, size)


def _try_entry(packer: Packer, item: Ranked, form: EntryForm, tokens: TokenBudget | None = None) -> bool | None:
    """Fit one entry and record its decision: None = skipped, else appended and whether truncated."""
    fit = fit_entry(
        form.body,
        complete_overhead=form.complete_overhead,
        truncated_overhead=form.truncated_overhead,
        room=packer.room,
    )
    if fit.reason is not None:  # not fit.included
        _skipped(item, fit.reason, fit.bytes)
        return None
    if tokens is not None and not tokens.take(form, fit.cut):
        _skipped(item, REASON_TOKEN_BUDGET_EXCEEDED, fit.bytes)
        return None
    packer.append(form.render(fit.cut), fit.bytes)
    truncated = fit.cut is not None
    item.decide(OUTCOME_INCLUDED_TRUNCATED if truncated else OUTCOME_INCLUDED, None, fit.bytes)
    return truncated


def _result(packer: Packer, origins: list[Origin], decisions: list[Decision]) -> PreparedResult:
    content = packer.content()
    if content is None:
        return PreparedResult(STATUS_EMPTY, None, 0, (), tuple(decisions))
    return PreparedResult(STATUS_READY, content, packer.size, tuple(origins), tuple(decisions))


def empty_result() -> PreparedResult:
    """The normal empty result: no content, no origins, nothing considered."""
    return PreparedResult(STATUS_EMPTY, None, 0, (), ())


def _policy_annotation(selection: Selection, family_scopes: Sequence[str]) -> Annotate:
    read = frozenset(family_scopes)

    def annotate(candidate: Candidate) -> PolicyFields:
        scope_id = candidate.citation.scope_id
        return {
            "authority": scope_tier(scope_id, selection.tiers) if scope_id in read else None,
            "conflict_slot": normalized_slot(candidate.conflict_key),
            "score": usable_score(candidate.score),
        }

    return annotate


def _arbitrated(pool: Pool, selection: Selection, family_scopes: Sequence[str]) -> list[Ranked]:
    """The policy's gates over a pool: losers decided, the rest returned in packing order."""
    ranked = pool.ranked
    candidates = [item.candidate for item in ranked]
    scores = usable_scores([c.score for c in candidates])
    contenders = new_tuple(
        Contenders,
        (
            [c.citation for c in candidates],
            [c.body or "" for c in candidates],
            scores,
            range(1, len(ranked) + 1),  # each one's recall rank: its position in the pool, from 1
            [c.captured_at for c in candidates],
            [c.conflict_key for c in candidates],
        ),
    )
    arbitration = arbitrate_columns(
        contenders, scopes=frozenset(family_scopes), tiers=selection.tiers, min_score=selection.policy.min_score
    )
    pool.policy = (arbitration.authorities, arbitration.slots, scores, arbitration.ungated)
    for index, (reason, winner) in arbitration.rejected.items():
        ranked[index].decide(OUTCOME_SKIPPED, reason, None, winner)
    return [ranked[index] for index in arbitration.order]


def assemble_markdown(
    recalled: Recalled, options: AssemblyOptions, *, max_bytes: int, selection: Selection | None = None
) -> PreparedResult:
    """Markdown V1: sections in `options.sections` order, each up to its limit, under `max_bytes`.

    With ``selection``, each section's pool goes through the policy first and is packed in its order (and under
    its token budget, if any); the rendering is the same.
    """
    if not options.sections:
        return empty_result()
    packer = Packer(MARKDOWN_PREFIX, MARKDOWN_SUFFIX, max_bytes)
    tokens = None
    if selection is not None and selection.policy.max_tokens is not None:
        tokens = TokenBudget(selection.policy.max_tokens, MARKDOWN_PREFIX, MARKDOWN_SUFFIX)
    origins: list[Origin] = []
    decisions: list[Decision] = []
    for spec in options.sections:
        if selection is None:
            pool = build_pool(spec.family, recalled.get(spec.family, ()))
            items = pool.ranked
        else:
            family_scopes = selection.scopes[:1] if spec.family in CURRENT_SCOPE_ONLY_FAMILIES else selection.scopes
            annotate = _policy_annotation(selection, family_scopes)
            pool = build_pool(spec.family, recalled.get(spec.family, ()), annotate)
            items = _arbitrated(pool, selection, family_scopes)
        number = 0
        for item in items:
            if number == spec.limit:
                _skipped(item, REASON_FAMILY_LIMIT_REACHED)
                continue
            citation = item.candidate.citation
            form = markdown_entry(
                citation,
                item.candidate.body or "",  # never empty in a pool: build_pool drops the bodiless
                section_family=spec.family,
                number=number + 1,
                recall_rank=item.recall_rank,
                show=options.show,
                opens_section=number == 0,
            )
            truncated = _try_entry(packer, item, form, tokens)
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
        form = legacy_entry(citation, item.candidate.body or "", first=packer.empty)  # as above: never empty
        truncated = _try_entry(packer, item, form)
        if truncated is not None:
            included[family] += 1
            origins.append(Origin(citation, family, len(origins) + 1, item.recall_rank, truncated))
    decisions = [decision for pool in pools for decision in pool.decisions()]
    decisions.extend(_not_selected(recalled, LEGACY_FAMILIES))
    return _result(packer, origins, decisions)
