"""What recall returns beside its candidates (``sources.RecallResult``): the evidence the selection policy ranks by.

No database: candidates and columns built by hand, as the BM25 batch hands them over.
"""

from __future__ import annotations

import dataclasses

from artifacts.recall.sources import RecallResult
from vocabulary.citation import Candidate, Citation


def _candidate(entry: str, **own) -> Candidate:
    return Candidate(Citation("user:1", "memory", "memory", 1, entry, f"{entry}-v1"), f"body {entry}", **own)


def _result(*noted: tuple[Candidate, float | None, object]) -> RecallResult:
    return RecallResult(
        {"memory": [[c for c, _, _ in noted]]},
        {"memory": [[score for _, score, _ in noted]]},
        {"memory": [[captured for _, _, captured in noted]]},
    )


def test_a_candidate_gets_its_sources_score_and_capture_time_as_text():
    first, second = _candidate("a"), _candidate("b")
    result = _result((first, 3.0, "2026-01-02 03:04:05.000006"), (second, 0.5, "2026-01-02 03:04:05"))
    assert result.evidence("memory", 0, 0) == (3.0, "2026-01-02T03:04:05.000006Z")
    assert result.evidence("memory", 0, 1) == (0.5, "2026-01-02T03:04:05.000000Z")
    assert [(c.score, c.captured_at) for c in result.with_evidence("memory")[0]] == [
        (3.0, "2026-01-02T03:04:05.000006Z"),
        (0.5, "2026-01-02T03:04:05.000000Z"),
    ]


def test_a_candidates_own_fields_come_before_its_sources():
    own = _candidate("a", score=9.0, captured_at="2027-01-01T00:00:00.000000Z")
    result = _result((own, 2.0, "2026-01-02 03:04:05"))
    assert result.evidence("memory", 0, 0) == (9.0, "2027-01-01T00:00:00.000000Z")
    assert result.with_evidence("memory")[0] == [own]


def test_only_the_positions_asked_for_carry_evidence_and_the_stored_candidates_stay_as_they_were():
    first, second = _candidate("a"), _candidate("b")
    result = _result((first, 1.0, "2026-01-02 03:04:05"), (second, 2.0, "2026-01-02 03:04:05"))
    (carried,) = result.with_evidence("memory", [(0, 1)])
    assert carried[0] is first
    assert carried[1].score == 2.0
    assert result.candidates["memory"][0][1].score is None, "a source's kept candidate is never changed"


def test_a_candidate_without_evidence_has_none():
    result = _result((_candidate("a"), None, None))
    assert result.evidence("memory", 0, 0) == (None, None)
    assert result.lexical_scores() == {}


def test_a_reranked_list_keeps_each_candidates_evidence_by_citation():
    weak, strong = _candidate("weak"), _candidate("strong")
    result = _result((weak, 0.1, "2026-01-02 03:04:05"), (strong, 3.0, "2026-01-02 03:04:06"))
    made = _candidate("made", score=5.0)  # a reranker may add a candidate of its own
    copy = dataclasses.replace(weak)  # or return a copy
    reranked = result.reordered("memory", [[strong, copy, made]])
    assert [reranked.evidence("memory", 0, i)[0] for i in range(3)] == [3.0, 0.1, 5.0]
    assert reranked.evidence("memory", 0, 0)[1] == "2026-01-02T03:04:06.000000Z"


def test_merged_results_keep_both_families_and_every_ranking():
    memory = _result((_candidate("a"), 1.0, None))
    profile = RecallResult.of_candidates(
        "profile", [[Candidate(Citation("user:1", "profile", "profile", 2), "likes tea")]]
    )
    merged = memory.merged(profile)
    assert set(merged.candidates) == {"memory", "profile"}
    assert merged.evidence("profile", 0, 0) == (None, None)
    assert merged.lexical_scores() == {memory.candidates["memory"][0][0].citation: 1.0}
