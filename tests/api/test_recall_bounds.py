"""What one query may cost: long queries are answered within a bounded number of terms and statements,
and the exact pruning returns exactly the full ranking. Observed through prepare and the recall sources."""

import io
import random

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts import selectors, services
from artifacts.models import ContextReference
from artifacts.recall import bm25, planner, ranking, resident, sources, tables
from infrastructure import metrics
from tests.api.factories import add_experience, add_memory, auth, make_key, make_scope, markdown_of, ok_json, prepare
from tests.conftest import patch_setting
from vocabulary.errors import InvalidInput
from vocabulary.limits import (
    MAX_SCOPE_REFERENCES,
    QUERY_MAX_CHARACTERS,
    RECALL_MAX_PREPARE_TERMS,
    RECALL_MAX_QUERY_TERMS,
)

CJK = "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自可去之过家学"


@pytest.fixture
def scope(db):
    return make_scope("project:bounds")


def cjk_text(seed: int, length: int) -> str:
    generator = random.Random(seed)
    return "".join(generator.choice(CJK) for _ in range(length))


def memory_prepare(client, key, query):
    body = {"scope_id": "project:bounds", "query": query, "assembly": {"sections": [{"family": "memory", "limit": 16}]}}
    return prepare(client, key, body)


def test_a_query_of_8192_cjk_characters_is_answered_with_a_bounded_number_of_terms(client, scope, settings):
    settings.POWERCONTEXT_PREPARE_LOG = False  # recall's statements alone (the log is one more, tested on its own)
    add_memory(scope, {f"zh-{i}": cjk_text(i, 400) for i in range(6)})
    query = cjk_text(99, QUERY_MAX_CHARACTERS)
    key = make_key(read=[scope])
    with CaptureQueriesContext(connection) as queries:
        response = memory_prepare(client, key, query)
    document = markdown_of(response)
    assert len(document.of("Memory")) == 6
    # Thousands of distinct bigrams cost the same few statements as a short query.
    assert len(queries.captured_queries) <= 8


def test_the_rarest_present_terms_are_kept_ties_by_first_appearance():
    frequencies = {f"t{i}": 5 for i in range(RECALL_MAX_QUERY_TERMS + 10)}
    frequencies["rare"] = 1
    first_seen = {term: position for position, term in enumerate(frequencies)}
    kept = bm25.most_distinctive_terms(frequencies, first_seen)
    assert len(kept) == RECALL_MAX_QUERY_TERMS
    assert "rare" in kept
    assert [term for term in kept if term != "rare"] == [f"t{i}" for i in range(RECALL_MAX_QUERY_TERMS - 1)]


def test_a_query_of_more_terms_than_the_cap_answers_exactly_like_its_rarest_terms(client, scope):
    words = [f"w{i}" for i in range(RECALL_MAX_QUERY_TERMS + 6)]
    # Word i is in the first 1 + i // 10 documents: the later the word, the more common.
    entries = {f"d{j}": " ".join(w for i, w in enumerate(words) if j < 1 + i // 10) for j in range(7)}
    # The most common words alone make this document: once they are capped away, it cannot be found.
    entries["only-common"] = " ".join(words[RECALL_MAX_QUERY_TERMS:] * 5)
    add_memory(scope, entries)
    key = make_key(read=[scope])
    everything = ok_json(memory_prepare(client, key, " ".join(words)))
    rarest = ok_json(memory_prepare(client, key, " ".join(words[:RECALL_MAX_QUERY_TERMS])))
    assert everything == rarest
    assert "only-common" not in everything["content"]


def _ranked_both_ways(monkeypatch, scope, query):
    patch_setting(monkeypatch, "POWERCONTEXT_RESIDENT_MEMORY_MB", 0)  # SQL's rankings, not memory's
    calls = []
    original = ranking._ranked_candidates

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ranking, "_ranked_candidates", counting)
    monkeypatch.setattr(ranking, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(ranking, "ESSENTIAL_POSTINGS", 10_000)
    pruned = sources.recall_memory(scopes=[scope], query=query)
    monkeypatch.setattr(ranking, "PRUNE_MIN_POSTINGS", 10**9)
    full = sources.recall_memory(scopes=[scope], query=query)
    return pruned, full, len(calls)


def test_the_pruned_ranking_is_exactly_the_full_ranking(monkeypatch, scope):
    generator = random.Random(7)
    rare = [f"r{i}" for i in range(12)]
    entries = {}
    for i in range(400):
        # Short documents sharing one very common word: the shape where pruning pays.
        words = ["common"] + generator.choices(rare, weights=range(1, 13), k=2)
        entries[f"doc-{i:03d}"] = " ".join(words)
    add_memory(scope, entries)
    for query in ("common r0", "common r1 r11", "r0 r2 common r5"):
        pruned, full, pruned_calls = _ranked_both_ways(monkeypatch, scope, query)
        assert pruned_calls > 0, "the pruning path did not run"
        assert pruned == full
        assert len(full[0]) == 16


def test_a_long_english_query_answers_the_same_entries_as_its_rarest_words(client, scope):
    add_memory(scope, {"deploy": "deploy the release on friday", "rollback": "rollback steps for the api"})
    key = make_key(read=[scope])
    filler = " ".join(f"word{i}" for i in range(900))
    response = ok_json(memory_prepare(client, key, f"rollback {filler}"[:QUERY_MAX_CHARACTERS]))
    assert response["status"] == "ready"
    assert "rollback steps" in response["content"]


def _write_statements(client, key, body: str) -> int:
    request = {"scope_id": "project:bounds", "artifact_id": f"x{len(body)}", "body": body}
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/v1/experiences/revisions", request, content_type="application/json", **auth(key))
    assert response.status_code == 201
    return len(queries.captured_queries)


def test_a_65536_character_cjk_write_indexes_in_as_many_statements_as_a_small_one(client, scope):
    key = make_key(read=[scope], write=[scope])
    _write_statements(client, key, "the first write of a scope also creates its statistics rows")
    small = _write_statements(client, key, "deploy the release on friday")
    large_body = cjk_text(5, 65_536)
    assert len(set(large_body[i : i + 2] for i in range(len(large_body) - 1))) > 1000
    assert _write_statements(client, key, large_body) == small
    found = memory_prepare(client, key, large_body[:40])
    assert found.status_code == 200


def _many_references(count: int, words: list[str]):
    references = []
    for i in range(count):
        reference = make_scope(f"team:{i:03d}")
        add_memory(reference, {f"e{i}": " ".join(words[i % 7 :])})
        add_experience(reference, f"x{i}", " ".join(words[: 20 + i % 30]))
        references.append(reference)
    project = make_scope("project:many", references=references)
    add_memory(project, {"own": " ".join(words[3:40])})
    return make_key(read=[project, *references])


def test_a_prepare_over_the_most_references_with_a_long_query_answers(client, db):
    # 65 scopes × 2 families × 64 terms: more bound values than one SQLite statement may carry.
    words = [f"word{i}" for i in range(RECALL_MAX_QUERY_TERMS + 16)]
    key = _many_references(MAX_SCOPE_REFERENCES, words)
    body = {"scope_id": "project:many", "query": " ".join(words), "assembly": {}}
    document = markdown_of(prepare(client, key, body))
    assert {entry.family for entry in document.entries} == {"memory", "experience"}


class _BoundValues:
    """Every value the prepare binds to its statements, as text (JSON arrays and array literals included)."""

    def __init__(self):
        self.values: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        self.values += [str(value) for value in (params or ())]
        return execute(sql, params, many, context)

    def words_of(self, words: list[str]) -> list[str]:
        bound = "\n".join(self.values)
        return [word for word in words if word in bound]


def test_a_prepare_over_the_most_references_binds_only_the_first_terms_of_a_long_query(client, db, settings):
    settings.POWERCONTEXT_PREPARE_LOG = False  # the log keeps the whole query: recall's statements alone here
    settings.POWERCONTEXT_RESIDENT_MEMORY_MB = 0  # every pair's statistics read in SQL
    words = [f"q{i:04d}" for i in range(QUERY_MAX_CHARACTERS // 6)]  # 1,365 distinct words of 5 characters
    key = _many_references(MAX_SCOPE_REFERENCES, words[: RECALL_MAX_QUERY_TERMS + 16])
    body = {"scope_id": "project:many", "query": " ".join(words), "assembly": {}}
    bound = _BoundValues()
    with connection.execute_wrapper(bound):
        document = markdown_of(prepare(client, key, body))
    # 65 scopes and two families: the statistics look up the first RECALL_MAX_PREPARE_TERMS terms, no other.
    assert bound.words_of(words) == words[:RECALL_MAX_PREPARE_TERMS]
    assert {entry.family for entry in document.entries} == {"memory", "experience"}


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's planner; SQLite looks terms up by the index"
)
def test_the_statistics_of_a_long_query_over_many_references_are_read_by_index_before_any_analyze(client, db, settings):
    # A new database's tables have no statistics until autovacuum's ANALYZE: the statement once scanned the whole
    # term statistics table for every query term there.
    settings.POWERCONTEXT_RESIDENT_MEMORY_MB = 0
    references = []
    for i in range(MAX_SCOPE_REFERENCES):
        references.append(make_scope(f"team:{i:03d}"))
        add_memory(references[-1], {f"e{j}": cjk_text(i * 10 + j, 50) for j in range(2)})
    project = make_scope("project:many", references=references)
    key = make_key(read=[project, *references])
    body = {"scope_id": "project:many", "query": cjk_text(99, QUERY_MAX_CHARACTERS), "assembly": {}}
    with CaptureQueriesContext(connection) as captured:
        ok_json(prepare(client, key, body))
    (statistics,) = [q["sql"] for q in captured.captured_queries if tables.TERM_STATS_TABLE in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {statistics}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"Seq Scan on {tables.TERM_STATS_TABLE}" not in plan, plan


@pytest.mark.parametrize("path", ["sql", "resident copies", "search index"])
def test_a_word_past_the_first_terms_of_a_query_is_not_looked_up(client, scope, settings, tmp_path, path):
    """The same terms on every path: the first RECALL_MAX_PREPARE_TERMS of the query, whatever they hold."""
    settings.POWERCONTEXT_RESIDENT_MEMORY_MB = 32 if path == "resident copies" else 0
    settings.POWERCONTEXT_SEARCH_INDEX_DIR = str(tmp_path / "search") if path == "search index" else None
    settings.POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS = 5
    add_memory(scope, {"needle": "needle in the haystack", **{f"hay{i}": f"only hay here {i}" for i in range(5)}})
    if path == "search index":
        call_command("recall_index_build", "--settle", "0", stdout=io.StringIO(), stderr=io.StringIO())
    key = make_key(read=[scope])
    absent = [f"absent{i}" for i in range(RECALL_MAX_PREPARE_TERMS)]
    last_looked_up = " ".join([*absent[:-1], "needle", *absent])
    past_the_bound = " ".join([*absent, "needle"])
    for _ in range(3):  # the copy of the scope loads at its second prepare
        ok_json(memory_prepare(client, key, "hay"))
    assert len(resident.COPIES.copies) == (1 if path == "resident copies" else 0)
    answers = metrics.RECALL_INDEX_ANSWERS._value.get()
    found = ok_json(memory_prepare(client, key, last_looked_up))
    assert "needle in the haystack" in found["content"]
    assert ok_json(memory_prepare(client, key, past_the_bound))["status"] == "empty"
    if path == "search index":
        assert metrics.RECALL_INDEX_ANSWERS._value.get() > answers


def test_a_scope_may_not_reference_more_scopes_than_one_prepare_reads(db):
    project = make_scope("project:many")
    targets = [make_scope(f"team:{i}") for i in range(MAX_SCOPE_REFERENCES + 1)]
    services.scope_references_set(scope=project, targets=targets[:2])
    with pytest.raises(InvalidInput, match=f"at most {MAX_SCOPE_REFERENCES} scopes, not {MAX_SCOPE_REFERENCES + 1}"):
        services.scope_references_set(scope=project, targets=targets)
    assert [scope.scope_id for scope in selectors.scope_references_list(scope=project)] == ["team:0", "team:1"]


def test_a_scope_stored_with_more_references_than_the_limit_is_refused_whole(client, db):
    """Written before the limit, or around the services: prepare answers 409 after reading one reference more
    than the limit, never a prepare of all of them or of some."""
    project = make_scope("project:legacy")
    targets = [make_scope(f"team:{i}") for i in range(MAX_SCOPE_REFERENCES + 5)]
    ContextReference.objects.bulk_create(
        ContextReference(scope=project, target=target, position=position) for position, target in enumerate(targets)
    )
    add_memory(targets[-1], {"far": "alpha"})
    key = make_key(read=[project, *targets])
    with CaptureQueriesContext(connection) as captured:
        refused = prepare(client, key, {"scope_id": "project:legacy", "assembly": {}})
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "conflict"
    assert f"more than {MAX_SCOPE_REFERENCES} scopes" in error["message"]
    assert not any(tables.POSTINGS_TABLE in query["sql"] for query in captured.captured_queries)


def test_a_scope_stored_with_more_references_still_prepares_what_reads_no_reference(client, db):
    project = make_scope("project:legacy")
    targets = [make_scope(f"team:{i}") for i in range(MAX_SCOPE_REFERENCES + 1)]
    ContextReference.objects.bulk_create(
        ContextReference(scope=project, target=target, position=position) for position, target in enumerate(targets)
    )
    key = make_key(read=[project])
    topics_only = {"scope_id": "project:legacy", "assembly": {"sections": [{"family": "topic_memory", "limit": 4}]}}
    assert ok_json(prepare(client, key, topics_only))["status"] == "empty"


def test_a_scope_stored_with_more_references_is_not_found_for_a_key_that_may_not_read_it(client, db):
    project = make_scope("project:legacy")
    targets = [make_scope(f"team:{i}") for i in range(MAX_SCOPE_REFERENCES + 1)]
    ContextReference.objects.bulk_create(
        ContextReference(scope=project, target=target, position=position) for position, target in enumerate(targets)
    )
    answer = prepare(client, make_key(read=targets), {"scope_id": "project:legacy"})
    assert answer.status_code == 404


@pytest.mark.parametrize("ranked_in_memory", [0, 4], ids=["every ranking in SQL", "some scopes ranked in memory"])
def test_rankings_split_over_several_statements_answer_exactly_like_one(client, db, monkeypatch, ranked_in_memory):
    words = [f"word{i}" for i in range(40)]
    key = _many_references(12, words)
    body = {
        "scope_id": "project:many",
        "query": " ".join(words),
        "assembly": {"sections": [{"family": "memory", "limit": 12}, {"family": "experience", "limit": 8}]},
    }
    if ranked_in_memory:
        for _ in range(ranked_in_memory + 1):  # a copy loads at a scope's second request, one per prepare
            ok_json(prepare(client, key, body))
        assert len(resident.COPIES.copies) == ranked_in_memory
    else:
        patch_setting(monkeypatch, "POWERCONTEXT_RESIDENT_MEMORY_MB", 0)
    whole = ok_json(prepare(client, key, body))
    monkeypatch.setattr(planner, "SQLITE_PARAMETERS_MAX", 350)
    with CaptureQueriesContext(connection) as split_queries:
        split = ok_json(prepare(client, key, body))
    assert split == whole
    if connection.vendor == "sqlite":
        assert sum("ROW_NUMBER()" in query["sql"] for query in split_queries.captured_queries) > 3
