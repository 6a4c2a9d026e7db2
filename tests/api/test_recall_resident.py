"""Small scopes ranked from a copy of their postings in process memory (artifacts/recall/resident.py).

Observed through ``POST /v1/context/prepare``: the answer with copies is byte-identical to the answer with
every ranking in SQL, a write is visible to the very next prepare, and a rolled-back write's copy is never used.
"""

from __future__ import annotations

import random

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from artifacts.recall import batch, resident
from tests.api.factories import (
    add_experience,
    add_memory,
    make_key,
    make_scope,
    ok_json,
    prepare,
    remove_memory,
    update_memory,
)

WORDS = [f"w{i}" for i in range(60)]


def _corpus(seed: int, count: int) -> dict[str, str]:
    generator = random.Random(seed)
    # Zipf-like: a few words in most entries, many rare ones, so that scores tie and differ.
    weights = [1 / (rank + 2) for rank in range(len(WORDS))]
    return {
        f"e{i:03d}": " ".join(generator.choices(WORDS, weights=weights, k=generator.randint(3, 12)))
        for i in range(count)
    }


@pytest.fixture
def scopes(db):
    references = [make_scope(f"team:{i}") for i in range(2)]
    current = make_scope("project:resident", references=references)
    add_memory(current, _corpus(1, 150))
    for index, reference in enumerate(references):
        add_memory(reference, _corpus(10 + index, 40))
    for i in range(20):
        add_experience(current, f"x{i}", " ".join(random.Random(i).choices(WORDS[:20], k=6)))
    return current, make_key(read=[current, *references])


BODY = {"scope_id": "project:resident", "assembly": {}, "max_bytes": 6000}


def _prepared(client, key, query: str) -> dict:
    return ok_json(prepare(client, key, {**BODY, "query": query}))


def _loads() -> float:
    from powercontext import metrics

    return metrics.RECALL_RESIDENT_LOADS._value.get()


def test_prepares_from_memory_are_byte_identical_to_prepares_in_sql(client, scopes, monkeypatch):
    _, key = scopes
    queries = [" ".join(random.Random(seed).choices(WORDS, k=random.Random(seed).randint(1, 6))) for seed in range(40)]
    monkeypatch.setattr(settings, "POWERCONTEXT_RESIDENT_POSTINGS", 0)
    in_sql = [_prepared(client, key, query) for query in queries]
    monkeypatch.undo()

    loads = _loads()
    for _ in range(2):  # the first prepare of a generation ranks in SQL, the second loads the copies
        _prepared(client, key, queries[0])
    assert _loads() - loads == 4  # memory in the three scopes, experience in the current one
    from_memory = [_prepared(client, key, query) for query in queries]
    assert _loads() - loads == 4
    assert from_memory == in_sql
    assert sum(response["status"] == "ready" for response in from_memory) > 30


def test_a_ranking_from_memory_runs_no_ranking_statement(client, scopes):
    _, key = scopes
    for _ in range(2):
        _prepared(client, key, "w1 w2 w3")
    with CaptureQueriesContext(connection) as captured:
        _prepared(client, key, "w4 w5 w1")
    statements = [query["sql"] for query in captured.captured_queries]
    assert not any("ROW_NUMBER()" in sql for sql in statements)
    assert not any("artifacts_recallposting" in sql for sql in statements)


def test_a_scope_read_once_is_not_copied(client, scopes):
    _, key = scopes
    loads = _loads()
    _prepared(client, key, "w1")
    assert _loads() == loads
    assert resident.COPIES.size == 0


def test_a_memory_write_is_visible_to_the_very_next_prepare(client, scopes):
    current, key = scopes
    for _ in range(3):
        _prepared(client, key, "w1 w2")
    add_memory(current, {"fresh": "zebra w1"})
    assert "zebra" in _prepared(client, key, "zebra")["content"]

    update_memory(current, "fresh", "okapi w1")
    for _ in range(2):
        content = _prepared(client, key, "zebra okapi")["content"]
        assert "okapi" in content and "zebra" not in content

    remove_memory(current, "fresh")
    assert _prepared(client, key, "zebra okapi")["status"] == "empty"


def test_an_experience_written_after_the_copy_is_recalled(client, scopes):
    current, key = scopes
    for _ in range(3):
        _prepared(client, key, "w1 w2")
    add_experience(current, "new", "quokka sighting")
    assert "quokka sighting" in _prepared(client, key, "quokka")["content"]


def test_a_copy_made_inside_a_rolled_back_write_is_never_used(client, scopes, monkeypatch):
    current, key = scopes

    def ranked() -> list:
        found = batch.bm25_ranked_documents(
            scope_pks_by_family={"memory": [current.pk]}, query="phantom w1", limits={"memory": 16}
        )
        return [(document.document_id, document.score) for document in found["memory"][current.pk]]

    with transaction.atomic():
        add_memory(current, {"ghost": "phantom w1"})
        for _ in range(3):  # the copy of this generation is loaded and used inside the transaction
            assert "phantom" in _prepared(client, key, "phantom")["content"]
        transaction.set_rollback(True)
    after_rollback = [ranked() for _ in range(3)]
    monkeypatch.setattr(settings, "POWERCONTEXT_RESIDENT_POSTINGS", 0)
    # The ghost would take the first of 16 places and be dropped when read: 15 documents instead of 16.
    assert after_rollback == [ranked()] * 3
    assert len(ranked()) == 16


def test_copies_beyond_the_budget_drop_the_least_recently_used(client, scopes, monkeypatch):
    _, key = scopes
    for _ in range(2):
        _prepared(client, key, "w1 w2")
    everything = resident.COPIES.size
    assert len(resident.COPIES.copies) == 4
    largest = max(copy.size for copy in resident.COPIES.copies.values())
    monkeypatch.setattr(settings, "POWERCONTEXT_RESIDENT_POSTINGS", everything - 1)
    resident.COPIES.clear()
    for _ in range(2):
        _prepared(client, key, "w1 w2")
    assert resident.COPIES.size <= everything - 1
    assert len(resident.COPIES.copies) < 4
    assert largest <= everything - 1


def test_a_scope_larger_than_the_pair_limit_stays_in_sql(client, scopes, monkeypatch):
    _, key = scopes
    monkeypatch.setattr(settings, "POWERCONTEXT_RESIDENT_PAIR_POSTINGS", 10)
    for _ in range(3):
        _prepared(client, key, "w1 w2")
    assert resident.COPIES.size == 0


def _statements_of(client, key, query: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        _prepared(client, key, query)
    return [query["sql"] for query in captured.captured_queries]


def test_a_copied_scope_reads_no_term_statistics(client, scopes):
    _, key = scopes
    cold = _statements_of(client, key, "w1 w2")
    _prepared(client, key, "w1 w2")  # loads the copies
    warm = _statements_of(client, key, "w3 w1")

    def term_statistics_read(statements: list[str]) -> int:
        return sum(sql.count("artifacts_recalltermstat") for sql in statements)

    assert term_statistics_read(cold) == 2  # memory and experience of every scope
    # Only the references' experiences are still looked up: they have none, so there is nothing to copy.
    assert term_statistics_read(warm) == 1
    assert len(warm) == len(cold)


def test_a_scope_written_before_every_prepare_costs_one_more_statement_once(client, scopes):
    current, key = scopes
    cold = len(_statements_of(client, key, "w1 w2"))
    _prepared(client, key, "w1 w2")  # loads the copies
    counts = []
    for i in range(3):
        add_memory(current, {f"new{i}": f"w1 yak{i}"})
        counts.append(len(_statements_of(client, key, f"yak{i} w1")))
    # The first prepare after a write reads the now stale copy's term statistics apart; the copy is dropped.
    assert counts == [cold + 1, cold, cold]
