"""Exact replay of a logged prepare: rebuild its candidates from the immutable revisions, run the same core.

``prepare_replay`` re-renders the content byte for byte and proves it against the logged SHA-256; a
mismatch (or a cited row that cannot be found) is reported, never hidden. The encoders here produce what
the prepare log stores of a request, so the log and its replay agree on one format.

A prepare under a selection policy also records, in its options, what replay could not find again: the policy,
the tier each scope read had at the time (an operator may change it later) and the evidence each candidate was
ranked by as the core got it: its score (a BM25 score depends on the corpus at the time), capture time and
conflict slot (a custom recall source may give them or not).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from artifacts import selectors
from artifacts.models import PrepareLog
from artifacts.recall.hybrid import (
    ABSTAINED,
    fused_by_citation,
    recall_abstained,
    recall_answered,
    recall_ranker,
)
from artifacts.recall.sources import RankedBy
from artifacts.selectors import RebuiltCandidates
from assembly.options import FORMAT_MARKDOWN
from assembly.policy import Selection, SelectionPolicy
from assembly.selection import assemble_legacy, assemble_markdown, empty_result
from assembly.types import AssemblyOptions, PreparedResult, SectionSpec
from vocabulary.citation import Candidate, Citation
from vocabulary.recall_modes import RECALL_MODE_HYBRID
from vocabulary.text import sha256_text

MODE_MARKDOWN = "markdown"
MODE_LEGACY = "legacy"
MODES = (MODE_MARKDOWN, MODE_LEGACY)
"""Every logged prepare's mode (a refused request logs none)."""


OptionsRecord = dict[str, Any]
"""A prepare's options as its log stores them: a JSON object (``options_record``), read back as JSON."""

RECORD_SECTIONS = "sections"
"""The options' key of the assembly's sections: present in every Markdown V1 record, absent from the legacy
envelope's."""
RECORD_SELECTION = "selection"
"""The options' key of a prepare under a selection policy (absent otherwise, so older records read the same)."""


def options_record(
    options: AssemblyOptions | None,
    selection: Selection | None = None,
    recalled: Mapping[str, Sequence[Sequence[Candidate]]] | None = None,
    recall: Sequence[RankedBy] = (),
) -> OptionsRecord | None:
    """The effective options as the log stores them. The legacy envelope has none: None, or only ``"recall"`` when
    hybrid recall is configured (what ranked its candidates is recorded whatever the format).

    With a policy: ``"selection": {"policy", "min_score", "max_tokens", "tiers": [the tier stored for each scope
    read, in the record's scope order], "evidence": {family: [[[score, captured_at, conflict_key] of each candidate,
    in recalled order] per scope]}}``.
    """
    hybrid = recall_record(recall, recalled or {})
    if options is None:
        return None if hybrid is None else {RECORD_RECALL: hybrid}
    record: OptionsRecord = {
        RECORD_SECTIONS: [[s.family, s.limit] for s in options.sections],
        "show": sorted(options.show),
    }
    if hybrid is not None:
        record[RECORD_RECALL] = hybrid
    if selection is not None:
        policy = selection.policy
        record[RECORD_SELECTION] = {
            "policy": policy.policy,
            "min_score": policy.min_score,
            "max_tokens": policy.max_tokens,
            "tiers": [selection.tiers.get(scope_id) for scope_id in selection.scopes],
            "evidence": {family: _evidence_record(per_scope) for family, per_scope in (recalled or {}).items()},
        }
    return record


RECORD_RECALL = "recall"
"""The options' key of what ranked a prepare's recall when hybrid recall is configured (absent: lexical by
configuration, so older records and lexical deployments read the same)."""


def recall_record(
    recall: Sequence[RankedBy], recalled: Mapping[str, Sequence[Sequence[Candidate]]]
) -> OptionsRecord | None:
    """``{"mode": "hybrid" | "lexical", "outcome", "model", "ranks": {family: [[[lexical rank, dense rank, fused or
    learned score, cosine, whether the learned ranker scored it] or None of each candidate, in recalled order] per
    scope]}}``, with ``"ranker"`` (``learned`` or ``hand``) when recall was hybrid and ``"abstained"`` ({family:
    [scope id, …]}: the scopes the abstention floor left without a candidate) when any was; None when recall is
    lexical by configuration. ``recall``: ``PrepareOutcome.recall``. Replay never reads it: it re-renders the logged
    candidates in their logged order (nothing is embedded again)."""
    if (hybrid := recall_answered(recall)) is None:
        return None
    ranks = fused_by_citation(recall)
    record: OptionsRecord = {
        "mode": hybrid.mode,
        "outcome": hybrid.outcome,
        "model": hybrid.model_id,
        "ranks": {
            family: [
                [
                    [fused.lexical_rank, fused.dense_rank, fused.score, fused.cosine, fused.learned]
                    if (fused := ranks.get(c.citation))
                    else None
                    for c in hits
                ]
                for hits in per_scope
            ]
            for family, per_scope in recalled.items()
            if any(c.citation in ranks for hits in per_scope for c in hits)
        },
    }
    if hybrid.mode == RECALL_MODE_HYBRID:
        record["ranker"] = recall_ranker(recall)
    if abstained := recall_abstained(recall):
        record[ABSTAINED] = abstained
    return record


def _evidence_record(per_scope: Sequence[Sequence[Candidate]]) -> list[list[list[float | str | None]]]:
    """``[score, captured_at, conflict_key]`` of each candidate, per scope, as the core got it: those that could enter
    the pool carry the evidence the policy read of them (``runtime``), the others what their source gave them."""
    return [[[c.score, c.captured_at, c.conflict_key] for c in hits] for hits in per_scope]


def options_from_record(raw: OptionsRecord | None) -> AssemblyOptions | None:
    """The inverse of ``options_record`` for the assembly options (None: the legacy envelope, whose record has no
    sections)."""
    if raw is None or RECORD_SECTIONS not in raw:
        return None
    sections = tuple(SectionSpec(family, limit) for family, limit in raw["sections"])
    return AssemblyOptions(format=FORMAT_MARKDOWN, sections=sections, show=frozenset(raw["show"]))


def selection_from_record(raw: OptionsRecord | None, scopes: Sequence[str]) -> Selection | None:
    """The selection policy as the logged prepare applied it (None: it asked for none)."""
    recorded = (raw or {}).get(RECORD_SELECTION)
    if recorded is None:
        return None
    policy = SelectionPolicy(recorded["policy"], recorded["min_score"], recorded["max_tokens"])
    return Selection(policy, tuple(scopes), dict(zip(scopes, recorded["tiers"], strict=True)))


def _with_evidence(
    recalled: dict[str, list[list[Candidate]]], raw: OptionsRecord | None
) -> dict[str, list[list[Candidate]]]:
    """The rebuilt candidates with the evidence the logged prepare ranked them by."""
    evidence = ((raw or {}).get(RECORD_SELECTION) or {}).get("evidence")
    if evidence is None:
        return recalled
    return {
        family: [
            [
                dataclasses.replace(candidate, score=score, captured_at=captured_at, conflict_key=conflict_key)
                for candidate, (score, captured_at, conflict_key) in zip(hits, evidence[family][at], strict=True)
            ]
            for at, hits in enumerate(per_scope)
        ]
        for family, per_scope in recalled.items()
    }


def assembly_request_json(raw: OptionsRecord | None) -> str | None:
    """The request's ``assembly`` object for recorded options, as JSON text (None: legacy)."""
    if raw is None or RECORD_SECTIONS not in raw:
        return None
    sections = [{"family": family, "limit": limit} for family, limit in raw["sections"]]
    return json.dumps({"sections": sections, "show": raw["show"]}, ensure_ascii=False)


def selection_request_json(raw: OptionsRecord | None) -> str | None:
    """The request's ``selection`` object for recorded options, as JSON text (None: it had none)."""
    recorded = (raw or {}).get(RECORD_SELECTION)
    if recorded is None:
        return None
    request: dict[str, object] = {"policy": recorded["policy"], "min_score": recorded["min_score"]}
    if recorded["max_tokens"] is not None:
        request["max_tokens"] = recorded["max_tokens"]
    return json.dumps(request, ensure_ascii=False)


def content_sha256(content: str | None) -> str:
    """What the log stores of the content: its SHA-256, empty for no content."""
    return "" if content is None else sha256_text(content)


@dataclass(frozen=True)
class Replay:
    """A logged prepare re-rendered: the result, whether it matches the log, and why not."""

    result: PreparedResult
    candidates: RebuiltCandidates
    content_sha256: str
    matches: bool
    problems: tuple[str, ...]


def _problems(log: PrepareLog, result: PreparedResult, digest: str, missing: tuple[Citation, ...]) -> list[str]:
    problems = [f"cited row not found: {citation.describe()}" for citation in missing]
    if digest != log.content_sha256:
        problems.append(f"content SHA-256 {digest or '(no content)'} differs from the logged {log.content_sha256}")
    if result.content_bytes != log.content_bytes:
        problems.append(f"content_bytes {result.content_bytes} differs from the logged {log.content_bytes}")
    if result.status != log.result_status:
        problems.append(f"status {result.status} differs from the logged {log.result_status}")
    return problems


ERASED_PROBLEM = "erased"
"""The one problem of a logged prepare that showed content erased since (``manage.py erase``, docs/erasure.md)."""


def prepare_replay(*, log: PrepareLog) -> Replay | None:
    """Re-render a logged prepare from its record; None when it has no record (an error response).

    A prepare that showed content erased since cannot be re-rendered (its text is gone, its query scrubbed): its
    replay matches nothing and says so, naming the erasure, instead of reporting a content mismatch."""
    if (erasure := log.erasure) is not None:  # no query when erasure_id is None
        rebuilt = RebuiltCandidates({}, {}, {}, ())
        problem = f"{ERASED_PROBLEM}: this prepare showed content that erasure #{erasure.sequence} removed"
        return Replay(empty_result(), rebuilt, "", matches=False, problems=(problem,))
    record = selectors.prepare_record_read(log=log)
    if record is None:
        return None
    query = log.query if selectors.prepare_log_query_kept(log=log) else None
    candidates = selectors.prepare_candidates_rebuild(record=record, query=query)
    options = options_from_record(record.options)
    selection = selection_from_record(record.options, record.scopes)
    max_bytes = log.max_bytes or 0
    if options is None:
        result = assemble_legacy(candidates.recalled, max_bytes=max_bytes)
    elif not options.sections:
        result = empty_result()
    else:
        recalled = _with_evidence(candidates.recalled, record.options)
        result = assemble_markdown(recalled, options, max_bytes=max_bytes, selection=selection)
    digest = content_sha256(result.content)
    problems = _problems(log, result, digest, candidates.missing)
    return Replay(result, candidates, digest, matches=not problems, problems=tuple(problems))
