"""What the recall sources note beside their candidates for the selection policy (``sources.Evidence``).

No database: ranked documents and candidates built by hand, as the BM25 sources hand them over.
"""

from __future__ import annotations

import dataclasses

import pytest

from artifacts.recall.documents import DocumentRow, RankedDocument
from artifacts.recall.sources import Evidence
from artifacts.recall.tokenize import SCORE_SCALE
from vocabulary.citation import Candidate, Citation


def _noted(entry: str, score: int, captured: str) -> tuple[Candidate, RankedDocument]:
    row = DocumentRow("memory", 1, entry, f"{entry}-v1", f"body {entry}", None, None, captured, None)
    candidate = Candidate(Citation("user:1", "memory", "memory", 1, entry, f"{entry}-v1"), row.body)
    return candidate, RankedDocument(len(entry), score, row)


def test_a_noted_candidate_gets_its_documents_score_and_capture_time():
    first, first_document = _noted("a", 3 * SCORE_SCALE, "2026-01-02 03:04:05.000006")
    second, second_document = _noted("b", SCORE_SCALE // 2, "2026-01-02 03:04:05")
    evidence = Evidence()
    evidence.note([first], [first_document])
    evidence.note([second], [second_document])
    assert evidence.scores_of([second, first]) == [0.5, 3.0]
    assert evidence.completed([second, first]) == (
        [0.5, 3.0],
        ["2026-01-02T03:04:05.000000Z", "2026-01-02T03:04:05.000006Z"],
    )


def test_a_copy_is_found_by_its_citation_and_its_own_fields_come_first():
    candidate, document = _noted("a", 2 * SCORE_SCALE, "2026-01-02 03:04:05.000006")
    evidence = Evidence()
    evidence.note([candidate], [document])
    copy = dataclasses.replace(candidate)  # what a reranker may return
    own = dataclasses.replace(candidate, score=9.0, captured_at="2027-01-01T00:00:00.000000Z")
    assert evidence.scores_of([copy, own]) == [2.0, 9.0]
    assert evidence.completed([copy, own]) == ([2.0, 9.0], ["2026-01-02T03:04:05.000006Z", own.captured_at])


def test_a_candidate_no_source_noted_has_no_evidence():
    candidate, _ = _noted("a", SCORE_SCALE, "2026-01-02 03:04:05")
    evidence = Evidence()
    assert evidence.scores_of([candidate]) == [None]
    assert evidence.completed([candidate]) == ([None], [None])


def test_a_note_read_before_the_next_one_does_not_hide_it():
    first, first_document = _noted("a", SCORE_SCALE, "2026-01-02 03:04:05")
    second, second_document = _noted("b", 2 * SCORE_SCALE, "2026-01-02 03:04:05")
    evidence = Evidence()
    evidence.note([first], [first_document])
    assert evidence.scores_of([first, second]) == [1.0, None]
    evidence.note([second], [second_document])
    assert evidence.scores_of([first, second]) == [1.0, 2.0]


def test_a_note_for_another_number_of_candidates_is_refused():
    candidate, document = _noted("a", SCORE_SCALE, "2026-01-02 03:04:05")
    with pytest.raises(ValueError, match="another number of candidates"):
        Evidence().note([candidate], [document, document])


def test_a_list_reordered_or_extended_in_place_after_its_note_keeps_each_candidates_evidence():
    weak, weak_document = _noted("weak", SCORE_SCALE // 10, "2026-01-02 03:04:05")
    strong, strong_document = _noted("strong", 3 * SCORE_SCALE, "2026-01-02 03:04:05")
    pinned, pinned_document = _noted("pinned", 5 * SCORE_SCALE, "2026-01-02 03:04:05")
    evidence = Evidence()
    hits = [weak, strong]
    evidence.note(hits, [weak_document, strong_document])  # the source hands this same list on...
    evidence.note([pinned], [pinned_document])
    hits.reverse()  # ...to a reranker that reorders it in place
    hits.append(pinned)  # and a wrapper that extends it
    assert evidence.scores_of(hits) == [3.0, 0.1, 5.0]
    assert evidence.completed(hits)[0] == [3.0, 0.1, 5.0]
