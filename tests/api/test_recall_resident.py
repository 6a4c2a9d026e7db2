"""Small scopes ranked from a copy of their postings in process memory (artifacts/recall/resident.py).

Observed through ``POST /v1/context/prepare`` (and, for full rankings with scores, ``bm25_ranked_documents``):
the answer with copies is the answer with every ranking in SQL, a write is visible to the very next prepare, a
rolled-back write's copy is never used, and statistics are always of one snapshot.
"""

from __future__ import annotations

import random

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from artifacts.models import RecallCorpusStat, RecallDocument, Scope
from artifacts.recall import bm25, planner, resident, tables
from infrastructure import metrics
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
from tests.conftest import patch_setting

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
    return metrics.RECALL_RESIDENT_LOADS._value.get()


def _warm(client, key, query: str = "w1 w2") -> None:
    """Prepare until every copy is loaded (one per prepare, from the second request of a generation)."""
    for _ in range(8):
        loads = _loads()
        _prepared(client, key, query)
        if _loads() == loads and resident.COPIES.copies:
            return


def _sql_only(monkeypatch) -> None:
    patch_setting(monkeypatch, "POWERCONTEXT_RESIDENT_MEMORY_MB", 0)


def _ranked(scope_pks_by_family: dict, query: str, limits: dict) -> dict:
    found = planner.bm25_ranked_documents(scope_pks_by_family=scope_pks_by_family, query=query, limits=limits).documents
    return {
        (family, scope_pk): [(d.document_id, d.score) for d in documents]
        for family, per_scope in found.items()
        for scope_pk, documents in per_scope.items()
    }


def test_prepares_from_memory_are_byte_identical_to_prepares_in_sql(client, scopes, monkeypatch):
    _, key = scopes
    queries = [" ".join(random.Random(seed).choices(WORDS, k=random.Random(seed).randint(1, 6))) for seed in range(40)]
    _sql_only(monkeypatch)
    in_sql = [_prepared(client, key, query) for query in queries]
    monkeypatch.undo()

    loads = _loads()
    _warm(client, key)
    assert _loads() - loads == 4  # memory in the three scopes, experience in the current one
    from_memory = [_prepared(client, key, query) for query in queries]
    assert _loads() - loads == 4
    assert from_memory == in_sql
    assert sum(response["status"] == "ready" for response in from_memory) > 30


@pytest.mark.parametrize("seed", range(4))
def test_full_rankings_from_memory_equal_sql_with_scores_and_ties(db, monkeypatch, seed):
    generator = random.Random(seed)
    vocabulary = [f"t{i}" for i in range(120)]
    scopes = [make_scope(f"project:r{seed}-{i}") for i in range(3)]
    for scope in scopes:
        entries = {}
        for i in range(generator.randint(30, 90)):
            # Long and short entries, words repeated many times in some, so that frequencies and lengths vary.
            words = generator.choices(vocabulary[: generator.randint(5, 120)], k=generator.randint(1, 80))
            words += [generator.choice(vocabulary)] * generator.choice((0, 0, 5, 30))
            entries[f"e{i}"] = " ".join(words)
        add_memory(scope, entries)
    pairs = {"memory": [scope.pk for scope in scopes]}
    limits = {"memory": 40}
    queries = [" ".join(generator.sample(vocabulary, generator.randint(1, 8))) for _ in range(25)]
    queries.append(" ".join(vocabulary[:100]))  # more present terms than RECALL_MAX_QUERY_TERMS: the rarest count
    _sql_only(monkeypatch)
    in_sql = [_ranked(pairs, query, limits) for query in queries]
    monkeypatch.undo()
    for _ in range(4):
        _ranked(pairs, queries[0], limits)
    assert len(resident.COPIES.copies) == 3
    assert [_ranked(pairs, query, limits) for query in queries] == in_sql
    assert sum(len(ranked) for ranked in in_sql[-1].values()) > 60


def test_documents_tied_across_the_limit_are_kept_by_document_id_as_in_sql(db, monkeypatch):
    scope = make_scope("project:ties")
    # Equal scores straddle the limit: 10 documents score higher, 30 tie below them, 20 of the ties are cut.
    add_memory(scope, {f"e{i:02d}": "tie tie other" if i % 4 == 0 else "tie other" for i in range(40)})
    pairs, limits = {"memory": [scope.pk]}, {"memory": 20}
    _sql_only(monkeypatch)
    in_sql = _ranked(pairs, "tie", limits)
    monkeypatch.undo()
    for _ in range(2):
        _ranked(pairs, "tie", limits)
    assert len(resident.COPIES.copies) == 1
    assert _ranked(pairs, "tie", limits) == in_sql
    scores = [score for _, score in in_sql[("memory", scope.pk)]]
    assert len(scores) == 20 and len(set(scores)) == 2 and scores.count(scores[-1]) == 10


def test_a_ranking_from_memory_runs_no_ranking_statement(client, scopes):
    _, key = scopes
    _warm(client, key)
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


def test_at_most_one_copy_is_loaded_per_prepare(client, scopes):
    _, key = scopes
    _prepared(client, key, "w1 w2")
    counts = []
    for _ in range(4):
        loads = _loads()
        _prepared(client, key, "w1 w2")
        counts.append(_loads() - loads)
    assert counts == [1, 1, 1, 1]


def test_a_pair_being_loaded_by_another_thread_is_not_read_again(client, scopes, monkeypatch):
    """A threaded worker: a prepare that arrives while another loads the same pair ranks it in SQL instead."""
    _, key = scopes
    _prepared(client, key, "w1 w2")  # the first request of this generation: nothing is loaded
    original, reads, nested = resident._load, [], []

    def load(family: str, scope_pk: int):
        reads.append((family, scope_pk))
        if len(reads) == 1:  # another request arrives while this first pair's postings are being read
            nested.append(_prepared(client, key, "w1 w2")["content"])
        return original(family, scope_pk)

    monkeypatch.setattr(resident, "_load", load)
    content = _prepared(client, key, "w1 w2")["content"]
    assert len(reads) == len(set(reads)) == 2  # the outer and the nested prepare each loaded another pair
    assert nested == [content]


def test_a_memory_write_is_visible_to_the_very_next_prepare(client, scopes):
    current, key = scopes
    _warm(client, key)
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
    _warm(client, key)
    add_experience(current, "new", "quokka sighting")
    assert "quokka sighting" in _prepared(client, key, "quokka")["content"]


def test_a_copy_made_inside_a_rolled_back_write_is_never_used(client, scopes, monkeypatch):
    current, key = scopes
    pairs, limits = {"memory": [current.pk]}, {"memory": 16}

    with transaction.atomic():
        add_memory(current, {"ghost": "phantom w1"})
        for _ in range(3):  # the copy of this generation is loaded and used inside the transaction
            assert "phantom" in _prepared(client, key, "phantom")["content"]
        transaction.set_rollback(True)
    after_rollback = [_ranked(pairs, "phantom w1", limits) for _ in range(3)]
    _sql_only(monkeypatch)
    # The ghost would take the first of 16 places and be dropped when read: 15 documents instead of 16.
    assert after_rollback == [_ranked(pairs, "phantom w1", limits)] * 3
    assert len(after_rollback[0][("memory", current.pk)]) == 16


def test_statistics_of_a_stale_copy_are_read_again_in_one_snapshot(client, scopes, monkeypatch):
    """A write lands between the statistics statement and the one that re-reads a stale copy's pair: the
    document count and the term frequencies must both be from after it."""
    current, key = scopes
    # A scope this worker holds no copy of: the statistics are read first (no ranking from the copies alone).
    uncopied = make_scope("team:uncopied")
    add_memory(uncopied, {"u": "w1 w3 yak"})
    pairs, limits = {"memory": [current.pk, uncopied.pk]}, {"memory": 16}
    _warm(client, key)
    add_memory(current, {"first": "w1 w3"})  # the copy is stale from here on
    original = bm25.fetch
    statistics_reads = []

    def fetch_with_a_write_in_between(sql, params):
        if "artifacts_recallcorpusstat" in sql:
            statistics_reads.append(sql)
            if len(statistics_reads) == 2:  # as if another worker committed right now
                add_memory(current, {f"burst{i}": "w3 yak" for i in range(5)})
        return original(sql, params)

    monkeypatch.setattr(bm25, "fetch", fetch_with_a_write_in_between)
    ranked = _ranked(pairs, "yak w3 w1", limits)
    monkeypatch.undo()
    assert len(statistics_reads) == 2
    _sql_only(monkeypatch)
    assert ranked == _ranked(pairs, "yak w3 w1", limits)


def test_a_stale_copy_is_dropped_even_when_no_ranking_uses_it(client, scopes, monkeypatch):
    current, key = scopes
    _warm(client, key)
    held = len(resident.COPIES.copies)
    # The current scope grows past the pair limit: it is ranked in SQL from now on, its copy is useless.
    patch_setting(monkeypatch, "POWERCONTEXT_RESIDENT_PAIR_POSTINGS", 1_000)
    add_memory(current, {"more": "w1 w2 w3"})
    counts = [len(_statements_of(client, key, "w1 w2")) for _ in range(3)]
    assert len(resident.COPIES.copies) == held - 1
    assert counts[1] == counts[2] == counts[0] - 1  # the stale copy's extra statistics statement, once


def test_copies_beyond_the_budget_drop_the_least_recently_used():
    copies = resident._Copies()
    made = {name: resident._Copy(1, {"t": ([], [], [])}, 100, documents=10, total_length=100) for name in "abcd"}
    size = made["a"].size
    for name in "abc":
        copies.put(name, made[name], budget=3 * size)
    assert copies.get("a", 1) is made["a"]  # "b" is now the least recently used
    copies.put("d", made["d"], budget=3 * size)
    assert set(copies.copies) == {"a", "c", "d"}
    assert copies.size == 3 * size
    assert copies.get("a", 2) is None  # another generation: not this copy


def test_a_scope_larger_than_the_pair_limit_stays_in_sql(client, scopes, monkeypatch):
    _, key = scopes
    patch_setting(monkeypatch, "POWERCONTEXT_RESIDENT_PAIR_POSTINGS", 10)
    for _ in range(3):
        _prepared(client, key, "w1 w2")
    assert resident.COPIES.size == 0


def _statements_of(client, key, query: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        _prepared(client, key, query)
    return [query["sql"] for query in captured.captured_queries]


def test_a_prepare_over_copied_and_empty_pairs_reads_its_statistics_with_its_documents(client, scopes):
    _, key = scopes
    cold = _statements_of(client, key, "w1 w2")
    _warm(client, key)
    warm = _statements_of(client, key, "w3 w1")

    def term_statistics_read(statements: list[str]) -> int:
        return sum(sql.count("artifacts_recalltermstat") for sql in statements)

    assert term_statistics_read(cold) == 2  # memory and experience of every scope
    # Every pair is copied, or known to have no documents (the references' experiences): the copies' generations
    # and the emptiness are confirmed by the statement that reads the ranked documents.
    assert term_statistics_read(warm) == 0
    corpus_reads = [sql for sql in warm if "artifacts_recallcorpusstat" in sql]
    assert len(corpus_reads) == 1 and "artifacts_recalldocument" in corpus_reads[0]
    assert len(warm) == len(cold) - 1


def test_an_experience_written_to_a_scope_known_to_have_none_is_recalled_by_the_next_prepare(client, scopes):
    _, key = scopes
    reference = Scope.objects.get(scope_id="team:0")
    _warm(client, key)
    assert "narwhal" not in _prepared(client, key, "narwhal w1")["content"]
    add_experience(reference, "sea", "narwhal sighting")
    for _ in range(2):
        assert "narwhal sighting" in _prepared(client, key, "narwhal w1")["content"]


def test_an_experience_rolled_back_leaves_the_scope_without_experiences_again(client, scopes, monkeypatch):
    _, key = scopes
    _warm(client, key)
    with transaction.atomic():
        add_experience(Scope.objects.get(scope_id="team:0"), "sea", "narwhal sighting")
        assert "narwhal sighting" in _prepared(client, key, "narwhal w1")["content"]
        transaction.set_rollback(True)
    answers = [_prepared(client, key, "narwhal w1")["content"] for _ in range(3)]
    _sql_only(monkeypatch)
    assert answers == [_prepared(client, key, "narwhal w1")["content"]] * 3
    assert "narwhal" not in answers[0]


def test_a_scope_written_before_every_prepare_costs_one_more_statement_once(client, scopes):
    current, key = scopes
    cold = len(_statements_of(client, key, "w1 w2"))
    _warm(client, key)
    counts = []
    for i in range(3):
        add_memory(current, {f"new{i}": f"w1 yak{i}"})
        counts.append(len(_statements_of(client, key, f"yak{i} w1")))
    # The first prepare after a write reads the now stale copy's statistics apart; the copy is dropped.
    assert counts == [cold + 1, cold, cold]


def _generation(scope, family: str = "memory") -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT generation FROM {tables.CORPUS_TABLE} WHERE scope_id = %s AND family = %s", [scope.pk, family]
        )
        return cursor.fetchone()[0]


def test_a_corpus_row_changed_without_naming_the_generation_gets_a_new_one(scopes):
    """A worker of a version before the column, a shell or raw SQL: the database renews the token anyway."""
    current, _ = scopes
    seen = {_generation(current)}
    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {tables.CORPUS_TABLE} SET documents = documents WHERE scope_id = %s AND family = 'memory'",
                [current.pk],
            )
        seen.add(_generation(current))
    assert len(seen) == 4 and 0 not in seen


def test_a_corpus_row_inserted_without_a_generation_gets_one(db):
    scope = make_scope("project:fresh")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {tables.CORPUS_TABLE} (scope_id, family, documents, total_length) "
            "VALUES (%s, 'memory', 0, 0)",
            [scope.pk],
        )
    assert _generation(scope) > 0


def test_a_token_written_back_by_a_stale_writer_is_replaced(scopes):
    """A model instance saved from a shell with the token it read earlier: the database chooses a new one."""
    current, _ = scopes
    earlier = _generation(current)
    stale = RecallCorpusStat.objects.get(scope=current, family="memory")
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {tables.CORPUS_TABLE} SET documents = documents WHERE id = %s", [stale.pk])
    between = _generation(current)
    stale.save()
    assert len({earlier, between, _generation(current)}) == 3


def test_a_copy_is_not_used_after_a_write_by_a_worker_that_does_not_know_the_generation(client, scopes):
    """An older worker's removal, statement by statement as it wrote them (postings, statistics, corpus row
    without the token): the next prepare no longer finds the entry."""
    current, key = scopes
    add_memory(current, {"elder": "walrus w1"})
    _warm(client, key, "walrus")
    assert "walrus" in _prepared(client, key, "walrus")["content"]
    document, length = RecallDocument.objects.filter(scope=current, entry_version__entry_id="elder").values_list(
        "pk", "length"
    )[0]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {tables.TERM_STATS_TABLE} SET documents = documents - 1 WHERE scope_id = %s AND family = "
            f"'memory' AND term IN (SELECT term FROM {tables.POSTINGS_TABLE} WHERE document_id = %s)",
            [current.pk, document],
        )
        cursor.execute(f"DELETE FROM {tables.POSTINGS_TABLE} WHERE document_id = %s", [document])
        cursor.execute(
            f"UPDATE {tables.CORPUS_TABLE} SET documents = documents - 1, total_length = total_length - %s "
            "WHERE scope_id = %s AND family = 'memory'",
            [length, current.pk],
        )
    assert "walrus" not in (_prepared(client, key, "walrus")["content"] or "")
