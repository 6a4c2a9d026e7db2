"""The search-engine index for large scopes (artifacts/recall/engine): the same rankings as SQL, fresh
after every write, and a fallback to SQL, counted, whenever the index cannot answer.

A low POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS sends these small corpora through the engine.
"""

import io
import random

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts.models import RecallDocument
from artifacts.recall import sql, tokenize
from artifacts.recall.bm25 import bm25_queries
from artifacts.recall.engine import bounds, build, store
from artifacts.recall.engine import query as query_module
from bench import rankings
from tests.api.factories import (
    add_experience,
    add_memory,
    make_key,
    make_scope,
    markdown_of,
    ok_json,
    prepare,
    remove_memory,
    set_references,
)
from tests.api.search_index import all_fallbacks as _all_fallbacks
from tests.api.search_index import answers as _answers
from tests.api.search_index import build as _build
from tests.api.search_index import fallbacks as _fallbacks
from tests.recall_words import words_queries, words_text
from vocabulary.limits import RECALL_MAX_DOCUMENT_TOKENS


@pytest.fixture
def corpus(engine_corpus):
    return engine_corpus


def _ranking(scope, family: str, query: str, limit: int):
    return rankings.bm25_top_scored_by_scope(scope_pks=[scope.pk], family=family, query=query, limit=limit)[scope.pk]


def _sql_rankings(settings, scope, queries, family="memory", limit=16):
    directory, settings.POWERCONTEXT_SEARCH_INDEX_DIR = settings.POWERCONTEXT_SEARCH_INDEX_DIR, None
    try:
        return [_ranking(scope, family, query, limit) for query in queries]
    finally:
        settings.POWERCONTEXT_SEARCH_INDEX_DIR = directory


@pytest.mark.django_db
@pytest.mark.parametrize("family, limit", [("memory", 16), ("memory", 3), ("experience", 8)])
def test_engine_ranking_equals_the_sql_ranking(engine_on, corpus, family, limit):
    _build()
    queries = words_queries(40)
    expected = _sql_rankings(engine_on, corpus, queries, family, limit)
    before = _answers()

    got = [_ranking(corpus, family, query, limit) for query in queries]

    assert got == expected
    assert _answers() - before == len(queries)
    assert any(len(rows) == limit for rows in got)


@pytest.mark.django_db
def test_rebuild_shows_progress_and_gives_identical_results(engine_on, corpus):
    out, err = _build()
    assert "scope #" in out and "rebuilt" in out and "220 indexed" in out
    assert "(100%)" in err
    queries = words_queries(25, seed=3)
    first = [_ranking(corpus, "memory", q, 16) for q in queries]

    out, err = _build("--rebuild")

    assert "rebuilt" in out and "(100%)" in err
    assert [_ranking(corpus, "memory", q, 16) for q in queries] == first == _sql_rankings(engine_on, corpus, queries)


@pytest.mark.django_db
def test_an_update_adds_and_deletes_incrementally_and_readers_switch_to_it(engine_on, corpus):
    _build()
    _ranking(corpus, "memory", "deploy", 16)  # this process now holds a searcher of the first commit
    first = store.reader(corpus.pk, "memory").meta
    add_memory(corpus, {"fresh-1": "deploy verify archive", "fresh-2": "purge encrypt"}, removals=["m30", "m31"])

    out, _ = _build()

    assert "updated, 2 added, 2 deleted, 220 indexed" in out
    current = store.reader(corpus.pk, "memory").meta
    assert current.watermark > first.watermark and current.documents == first.documents == 220
    queries = words_queries(25, seed=4)
    before = _answers()
    assert [_ranking(corpus, "memory", q, 16) for q in queries] == _sql_rankings(engine_on, corpus, queries)
    assert _answers() - before == len(queries)


@pytest.mark.django_db
def test_a_write_after_the_build_is_in_the_very_next_prepare_and_a_retired_entry_is_gone(engine_on, corpus, client):
    key = make_key(read=[corpus])
    _build()
    body = {
        "scope_id": "project:demo",
        "max_bytes": 32768,
        "assembly": {"sections": [{"family": "memory", "limit": 16}]},
    }
    add_memory(corpus, {"zeta": "quasar nebula pulsar"})

    assert markdown_of(prepare(client, key, body, query="nebula pulsar")).entry_ids == ["zeta"]
    remove_memory(corpus, "zeta")
    assert ok_json(prepare(client, key, body, query="nebula pulsar"))["status"] == "empty"

    # A retired entry that the index still holds is never cited either: the hit is rescored against the database.
    target = "m50"
    _build()
    remove_memory(corpus, target)
    before = _answers()
    doc = markdown_of(prepare(client, key, body, query="deploy release database backup"))
    assert target not in doc.entry_ids and len(doc.entry_ids) == 16
    assert _answers() - before == 1


@pytest.mark.django_db
def test_a_write_after_a_prepare_that_counted_the_tail_is_in_the_very_next_prepare(engine_on, corpus, client):
    engine_on.POWERCONTEXT_PREPARE_LOG = False
    key = make_key(read=[corpus])
    _build()
    body = {
        "scope_id": "project:demo",
        "query": "nebula pulsar deploy",
        "max_bytes": 32768,
        "assembly": {"sections": [{"family": "memory", "limit": 16}]},
    }

    def prepared() -> tuple[list[str], int]:
        with CaptureQueriesContext(connection) as statements:
            entries = markdown_of(prepare(client, key, body)).entry_ids
        return entries, len(statements.captured_queries)

    first, counted = prepared()
    again, known = prepared()
    add_memory(corpus, {"zeta": "quasar nebula pulsar"})
    after_write, recounted = prepared()
    remove_memory(corpus, "zeta")
    after_removal, _ = prepared()

    assert again == first and "zeta" not in first and known == counted - 1
    assert after_write[0] == "zeta" and after_write[1:] == first[:15] and recounted == counted
    assert after_removal == first


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [3, 16])
def test_a_tail_longer_than_the_limit_is_ranked_exactly_beside_the_index(engine_on, corpus, limit):
    _build()
    watermark = store.reader(corpus.pk, "memory").meta.watermark
    rng = random.Random(21)
    # Half the written entries hold a word no indexed entry has: more than `limit` tail documents match it.
    late = {f"late-{i}": words_text(rng) + (" quasar" if i % 2 else "") for i in range(45)}
    add_memory(corpus, late, removals=["m40", "m41"])
    queries = [*words_queries(40, seed=13), "quasar", "quasar deploy backup"]
    expected = _sql_rankings(engine_on, corpus, queries, limit=limit)
    before = (_answers(), _all_fallbacks())

    got = [_ranking(corpus, "memory", query, limit) for query in queries]

    assert got == expected
    assert (_answers() - before[0], _all_fallbacks()) == (len(queries), before[1])
    assert sum(document > watermark for rows in got[:40] for document, _ in rows) >= 5
    assert len(got[-2]) == limit and all(document > watermark for document, _ in got[-2])


@pytest.mark.django_db
def test_a_missing_index_falls_back_to_sql_and_is_counted(engine_on, corpus):
    queries = words_queries(5)
    before = _fallbacks("missing")

    got = [_ranking(corpus, "memory", q, 16) for q in queries]

    assert got == _sql_rankings(engine_on, corpus, queries)
    assert _fallbacks("missing") - before == len(queries)


@pytest.mark.django_db
def test_a_corrupt_index_falls_back_to_sql_and_is_counted_and_a_build_repairs_it(engine_on, corpus):
    _build()
    (store.index_path(corpus.pk, "memory") / "meta.json").write_text("{not json")
    queries = words_queries(5)
    before = _fallbacks("corrupt")

    assert [_ranking(corpus, "memory", q, 16) for q in queries] == _sql_rankings(engine_on, corpus, queries)
    assert _fallbacks("corrupt") - before == len(queries)

    out, _ = _build()
    assert "rebuilt" in out
    before = _answers()
    assert [_ranking(corpus, "memory", q, 16) for q in queries] == _sql_rankings(engine_on, corpus, queries)
    assert _answers() - before == len(queries)


@pytest.mark.django_db
def test_an_index_too_far_behind_falls_back_to_sql_and_is_counted(engine_on, corpus):
    _build()
    engine_on.POWERCONTEXT_SEARCH_INDEX_MAX_LAG = 3
    add_memory(corpus, {f"late-{i}": "quasar nebula" for i in range(4)})
    before = _fallbacks("stale")

    rows = _ranking(corpus, "memory", "nebula", 16)

    assert len(rows) == 4
    assert rows == _sql_rankings(engine_on, corpus, ["nebula"])[0]
    assert _fallbacks("stale") - before == 1


@pytest.mark.django_db
def test_small_scopes_keep_the_sql_path(engine_on, corpus):
    _build()
    engine_on.POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS = 10_000
    before = (_answers(), _fallbacks("missing"))

    _ranking(corpus, "memory", "deploy", 16)

    assert (_answers(), _fallbacks("missing")) == before


@pytest.mark.django_db
def test_the_build_indexes_only_large_scopes(engine_on, corpus):
    small = make_scope("project:small")
    add_memory(small, {"a": "deploy"})

    targets = build.large_scopes(5)

    assert (corpus.pk, "memory", 220) in targets
    assert all(scope_pk != small.pk for scope_pk, _, _ in targets)


@pytest.mark.django_db
def test_an_engine_failure_falls_back_to_sql_and_is_counted(engine_on, corpus, monkeypatch):
    _build()

    def broken(*args, **kwargs):
        raise RuntimeError("engine down")

    monkeypatch.setattr(store, "search", broken)
    before = _fallbacks("error")

    assert _ranking(corpus, "memory", "deploy backup", 16) == _sql_rankings(engine_on, corpus, ["deploy backup"])[0]
    assert _fallbacks("error") - before == 1


@pytest.mark.django_db
def test_the_command_refuses_without_a_directory_or_with_an_unknown_scope(settings, engine_on, corpus):
    with pytest.raises(CommandError, match="unknown scope"):
        _build("--scope", "project:nope")
    settings.POWERCONTEXT_SEARCH_INDEX_DIR = None
    with pytest.raises(CommandError, match="POWERCONTEXT_SEARCH_INDEX_DIR"):
        _build()


@pytest.mark.django_db
def test_follow_updates_again_after_each_pause(engine_on, corpus, monkeypatch):
    from artifacts.management import index_builds

    pauses = []

    class Stop(Exception):
        pass

    def pause(seconds):
        pauses.append(seconds)
        if len(pauses) == 1:
            add_memory(corpus, {"late": "quasar"})
            return
        raise Stop

    monkeypatch.setattr(index_builds.time, "sleep", pause)
    out = io.StringIO()
    with pytest.raises(Stop):
        call_command("recall_index_build", "--scope", "project:demo", "--follow", "5", "--settle", "0", stdout=out)

    assert pauses == [5, 5]
    assert "rebuilt" in out.getvalue() and "updated, 1 added, 0 deleted, 221 indexed" in out.getvalue()


@pytest.mark.django_db
def test_a_prepare_over_several_indexed_scopes_answers_like_sql_in_one_more_statement_then_none_until_a_write(
    engine_on, corpus, client, monkeypatch
):
    engine_on.POWERCONTEXT_PREPARE_LOG = False
    rng = random.Random(9)
    references = [make_scope(f"team:{i}") for i in range(2)]
    for reference in references:
        add_memory(reference, {f"{reference.scope_id}-{i}": words_text(rng) for i in range(12)})
        for i in range(6):
            add_experience(reference, f"{reference.scope_id}-x{i}", words_text(rng))
    set_references(corpus, *references)
    key = make_key(read=[corpus, *references])
    _build()
    body = {
        "scope_id": "project:demo",
        "max_bytes": 32768,
        "assembly": {"sections": [{"family": "memory", "limit": 16}, {"family": "experience", "limit": 8}]},
    }
    queries = words_queries(12, seed=11)
    directory, engine_on.POWERCONTEXT_SEARCH_INDEX_DIR = engine_on.POWERCONTEXT_SEARCH_INDEX_DIR, None
    expected = [ok_json(prepare(client, key, body, query=query)) for query in queries]
    expected_split = ok_json(prepare(client, key, body, query="deploy backup stream"))
    engine_on.POWERCONTEXT_SEARCH_INDEX_DIR = directory
    answers, fallbacks, got, counts = _answers(), _all_fallbacks(), [], []
    for query in queries * 2:
        with CaptureQueriesContext(connection) as statements:
            got.append(ok_json(prepare(client, key, body, query=query)))
        counts.append(len(statements.captured_queries))

    assert got == expected * 2
    # Up to 3 scopes × 2 families per query through the engine (a pair without the query's terms is not ranked).
    assert _answers() - answers > 10 * len(queries) and _all_fallbacks() == fallbacks
    # The first prepare counts the tails of its pairs in one more statement (their exact rescoring runs inside the
    # read); with nothing written since, each pair's count holds at the generation its statistics show.
    assert counts[0] == 4 + 1 and set(counts[: len(queries)]) <= {4, 4 + 1}
    assert set(counts[len(queries) :]) == {4}

    # Past PAIRS_PER_STATEMENT the tails take a statement per group, with the same answers.
    query_module.TAIL_SIZES.clear()
    monkeypatch.setattr(query_module, "PAIRS_PER_STATEMENT", 4)
    with CaptureQueriesContext(connection) as statements:
        assert ok_json(prepare(client, key, body, query="deploy backup stream")) == expected_split
    assert len(statements.captured_queries) == 4 + 2


@pytest.mark.django_db
def test_a_process_keeps_a_bounded_number_of_searchers_open_and_answers_the_same(engine_on, corpus, monkeypatch):
    other = make_scope("project:other")
    add_memory(other, {f"o{i}": words_text(random.Random(i)) for i in range(12)})
    _build()
    monkeypatch.setattr(store, "READERS_MAX", 1)
    monkeypatch.setattr(store, "_readers", {})
    queries = words_queries(6, seed=12)
    expected = [(_sql_rankings(engine_on, corpus, [q]), _sql_rankings(engine_on, other, [q])) for q in queries]

    got = [([_ranking(corpus, "memory", q, 16)], [_ranking(other, "memory", q, 16)]) for q in queries]

    assert got == expected
    assert len(store._readers) == 1


@pytest.mark.django_db
def test_an_index_whose_metadata_the_database_cannot_bind_falls_back_to_sql(engine_on, corpus):
    _build()
    writer = store.index_open(store.index_path(corpus.pk, "memory")).writer()
    writer.delete_documents_by_term("doc_id", store.META_DOC_ID)
    writer.add_document(store.meta_document(store.IndexMeta(watermark=2**64, documents=220)))
    writer.commit()
    writer.wait_merging_threads()
    before = _fallbacks("corrupt")

    assert _ranking(corpus, "memory", "deploy backup", 16) == _sql_rankings(engine_on, corpus, ["deploy backup"])[0]
    assert _fallbacks("corrupt") - before == 1


@pytest.mark.django_db
@pytest.mark.parametrize("statement", ["_tails", "_rescored_parts"])
def test_a_batched_engine_statement_that_fails_outside_the_database_falls_back_to_sql(
    engine_on, corpus, monkeypatch, statement
):
    _build()

    def broken(*args, **kwargs):
        raise OverflowError("Python int too large to convert to SQLite INTEGER")

    monkeypatch.setattr(query_module, statement, broken)
    before = _fallbacks("error")

    assert _ranking(corpus, "memory", "deploy backup", 16) == _sql_rankings(engine_on, corpus, ["deploy backup"])[0]
    assert _fallbacks("error") - before == 1


@pytest.mark.django_db
def test_a_prepare_with_scopes_from_the_index_and_from_memory_answers_like_sql(engine_on, corpus, client):
    small = make_scope("team:small")
    add_memory(small, {f"s{i}": words_text(random.Random(i)) for i in range(3)})  # below the index threshold
    set_references(corpus, small)
    key = make_key(read=[corpus, small])
    _build()
    queries = words_queries(12, seed=9)

    def prepared() -> list[dict]:
        body = {"scope_id": "project:demo", "assembly": {}}
        return [ok_json(prepare(client, key, body | {"query": query})) for query in queries]

    for _ in range(3):  # the small scope's copies are loaded
        prepared()
    from_index_and_memory = prepared()
    answers = _answers()
    engine_on.POWERCONTEXT_SEARCH_INDEX_DIR, engine_on.POWERCONTEXT_RESIDENT_MEMORY_MB = None, 0
    assert prepared() == from_index_and_memory
    assert _answers() == answers


@pytest.mark.django_db
def test_an_index_holding_a_document_above_its_watermark_answers_a_prepare_like_sql(engine_on, corpus, client):
    key = make_key(read=[corpus])
    _build()
    add_memory(corpus, {"fresh": "deploy backup deploy backup stream"})
    fresh = max(sql.fetch("SELECT id FROM artifacts_recalldocument", []))[0]
    # A damaged or copied index: it proposes a document its metadata says it does not hold (the tail ranks it too).
    writer = store.index_open(store.index_path(corpus.pk, "memory")).writer()
    writer.add_document(store.text_document(fresh, "deploy backup deploy backup stream"))
    writer.commit()
    writer.wait_merging_threads()
    body = {
        "scope_id": "project:demo",
        "query": "deploy backup stream",
        "max_bytes": 32768,
        "assembly": {"sections": [{"family": "memory", "limit": 16}]},
    }

    from_index = ok_json(prepare(client, key, body))
    engine_on.POWERCONTEXT_SEARCH_INDEX_DIR = None

    assert from_index == ok_json(prepare(client, key, body))
    assert from_index["content"].count("deploy backup deploy backup stream") == 1


@pytest.fixture
def long_entries(db):
    """A scope whose entries the engine cannot tell apart: each holds "deploy" once in 169 to 183 terms, lengths the
    engine rounds down to one (168); the longer ones come first, where the engine breaks its ties."""
    scope = make_scope("project:long")
    add_memory(scope, {f"l{i:03d}": "deploy " + " ".join(["archive"] * (182 - i // 8)) for i in range(120)})
    add_memory(scope, {f"o{i:03d}": "verify encrypt rotate" for i in range(100)})
    return scope


@pytest.mark.django_db
def test_a_ranking_the_engine_cannot_prove_exact_is_ranked_by_sql_and_counted(engine_on, long_entries, client):
    key = make_key(read=[long_entries])
    _build()
    body = {
        "scope_id": "project:long",
        "query": "deploy",
        "max_bytes": 32768,
        "assembly": {"sections": [{"family": "memory", "limit": 16}]},
    }
    unproven, answers = _fallbacks("unproven"), _answers()

    from_index = prepare(client, key, body).json()
    top = _ranking(long_entries, "memory", "deploy", 16)

    assert _fallbacks("unproven") - unproven == 2 and _answers() == answers
    engine_on.POWERCONTEXT_SEARCH_INDEX_DIR = None
    assert from_index == prepare(client, key, body).json()
    assert top == _ranking(long_entries, "memory", "deploy", 16)
    # The shortest entries (the last written), ties by id: the exact answer, which the engine's first proposals
    # (the longest) did not hold.
    shortest = [f"l{i:03d}" for i in range(112, 120)] + [f"l{i:03d}" for i in range(104, 112)]
    assert markdown_of(prepare(client, key, body)).entry_ids == shortest


def _long_text(rng: random.Random, shortest: int, longest: int) -> str:
    """``shortest`` to ``longest`` terms over six words, three of them rare: many documents hold a rare word equally
    often, at lengths the engine rounds."""
    words, weights = ["deploy", "backup", "stream", "archive", "verify", "rotate"], [1, 2, 3, 30, 30, 30]
    return " ".join(rng.choices(words, weights=weights, k=rng.randint(shortest, longest)))


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [3, 16])
def test_rankings_of_long_documents_are_exact_whether_proven_or_ranked_again(engine_on, limit):
    """Long documents over few words, so the engine's rounded lengths and its stale statistics (entries written and
    removed after the build) often leave its candidates short: every ranking still equals SQL's, the proven ones
    from the engine, the others ranked again."""
    scope = make_scope("project:long")
    rng = random.Random(limit)
    add_memory(scope, {f"l{i:03d}": _long_text(rng, 41, 400) for i in range(150)})
    _build()
    add_memory(
        scope,
        {f"t{i:03d}": _long_text(rng, 41, 400) for i in range(20)},
        removals=[f"l{i:03d}" for i in range(0, 150, 10)],
    )
    queries = ["deploy", "backup", "stream", "deploy backup", "backup stream", "deploy stream", "stream archive"]
    expected = _sql_rankings(engine_on, scope, queries, limit=limit)
    answers, unproven = _answers(), _fallbacks("unproven")

    got = [_ranking(scope, "memory", query, limit) for query in queries]

    assert got == expected
    assert _answers() - answers > 0 and _fallbacks("unproven") - unproven > 0
    assert _answers() - answers + _fallbacks("unproven") - unproven == len(queries)


_LONG_QUERIES = ["deploy", "backup", "stream", "deploy backup", "backup stream", "deploy stream archive"]


def _long_entries_built_then_changed(writes: str, *, seed: int):
    """A scope of 150 long entries, indexed, then changed as ``writes`` says (the engine's statistics then misstate
    the average length or the document frequencies); the scope and the index's watermark."""
    scope = make_scope("project:long")
    rng = random.Random(seed)
    texts = {f"l{i:03d}": _long_text(rng, 30, 200) for i in range(150)}
    add_memory(scope, texts)
    _build()
    watermark = store.reader(scope.pk, "memory").meta.watermark
    if writes == "longer entries written":
        add_memory(scope, {f"t{i:03d}": _long_text(rng, 600, 900) for i in range(40)})
    else:
        holding = [entry for entry, body in texts.items() if "deploy" in body or "backup" in body]
        remove_memory(scope, *holding[: len(holding) // 2])
    return scope, watermark


def _memory_query(scope, query: str):
    """The scope's memory BM25 query for ``query``, as the SQL ranking builds it (None when no term is present)."""
    queries = bm25_queries(scope_pks_by_family={"memory": [scope.pk]}, terms=tokenize.query_terms(query))
    return queries.get(("memory", scope.pk))


@pytest.mark.django_db
@pytest.mark.parametrize("writes", ["longer entries written", "entries holding the query's terms removed"])
def test_no_document_the_engine_leaves_out_scores_above_the_proof_bound(engine_on, writes):
    """The proof's premise, checked against every document: after the build, entries written or removed (the
    engine's statistics then misstate the average length or the document frequencies), each indexed live document
    the engine does not rescore (never proposed, or proposed and dropped) scores exactly at most the bound."""
    scope, watermark = _long_entries_built_then_changed(writes, seed=7)
    for query in _LONG_QUERIES:
        bm25 = _memory_query(scope, query)
        reader = store.reader(scope.pk, "memory")
        proposal, bound = bounds.worth_rescoring(bm25, reader, store.search(reader, sorted(bm25.weights), 15), kept=5)
        exact = dict(_sql_rankings(engine_on, scope, [query], limit=1000)[0])
        left_out = {d: s for d, s in exact.items() if d <= watermark and d not in proposal.documents}

        assert bound is not None and left_out
        assert max(left_out.values()) <= bound, query


@pytest.mark.django_db
@pytest.mark.parametrize("writes", ["longer entries written", "entries holding the query's terms removed"])
def test_no_proposed_document_scores_below_the_lowest_ratio_of_its_engine_score(engine_on, writes):
    """The premise that chooses which candidates are rescored (``bounds.worth_rescoring``), checked against every
    proposal: each live proposed document scores exactly at least ``score_ratios``' lowest times its engine score."""
    scope, _ = _long_entries_built_then_changed(writes, seed=8)
    checked = 0
    for query in _LONG_QUERIES:
        bm25 = _memory_query(scope, query)
        reader = store.reader(scope.pk, "memory")
        proposal = store.search(reader, sorted(bm25.weights), 40)
        least, _ = bounds.score_ratios(bm25, reader, proposal.scoring)
        exact = dict(_sql_rankings(engine_on, scope, [query], limit=1000)[0])
        for document, engine_score in zip(proposal.documents, proposal.scores, strict=True):
            if document in exact:
                assert exact[document] >= least * engine_score * 1e6 * (1 - bounds.ENGINE_SCORE_MARGIN), query
                checked += 1
    assert checked > 100


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [3, 16])
def test_candidates_too_low_to_rank_are_not_rescored_and_rankings_stay_exact(engine_on, corpus, limit):
    """Short entries, whose lengths the engine keeps exactly: most proposals lose candidates before rescoring, none
    of those scores above the proof's bound, and every ranking is still proven and the same as SQL's."""
    _build()
    reader = store.reader(corpus.pk, "memory")
    queries = words_queries(40, seed=6)
    dropped_per_query = []
    for query in queries:
        bm25 = _memory_query(corpus, query)
        proposal = bm25 and store.search(reader, sorted(bm25.weights), query_module.CANDIDATE_FACTOR * limit)
        if not proposal or proposal.lowest_score is None:
            continue  # every document holding a term proposed: nothing to drop
        kept, bound = bounds.worth_rescoring(bm25, reader, proposal, kept=limit)
        dropped = set(proposal.documents) - set(kept.documents)
        exact = dict(_sql_rankings(engine_on, corpus, [query], limit=1000)[0])
        assert all(exact[document] <= bound for document in dropped), query
        dropped_per_query.append(len(dropped))
    expected = _sql_rankings(engine_on, corpus, queries, limit=limit)
    answers, unproven = _answers(), _fallbacks("unproven")

    got = [_ranking(corpus, "memory", query, limit) for query in queries]

    assert reader.meta.longest == _longest_memory(corpus) < 40
    assert sum(1 for dropped in dropped_per_query if dropped) > len(queries) / 2
    assert got == expected
    assert _answers() - answers == len(queries) and _fallbacks("unproven") == unproven


def _longest_memory(scope) -> int:
    from django.db.models import Max

    return RecallDocument.objects.filter(scope=scope, family="memory").aggregate(Max("length"))["length__max"]


@pytest.mark.django_db
def test_an_index_built_before_it_recorded_its_longest_document_records_it_at_its_next_update(
    engine_on, corpus, monkeypatch
):
    plain = store.meta_document
    monkeypatch.setattr(
        store,
        "meta_document",
        lambda meta: plain(store.IndexMeta(meta.watermark, meta.documents, scope_pk=meta.scope_pk, family=meta.family)),
    )
    _build()
    assert store.reader(corpus.pk, "memory").meta.longest is None
    queries = words_queries(20, seed=9)
    assert [_ranking(corpus, "memory", q, 16) for q in queries] == _sql_rankings(engine_on, corpus, queries)
    monkeypatch.undo()

    out, _ = _build()

    assert "updated, 0 added" in out
    assert store.reader(corpus.pk, "memory").meta.longest == _longest_memory(corpus) < 45


@pytest.mark.django_db
def test_the_longest_document_grows_with_an_update_and_a_rebuild_recounts_it(engine_on, corpus):
    _build()
    add_memory(corpus, {"long": " ".join(["archive"] * 45)})
    _build()
    assert store.reader(corpus.pk, "memory").meta.longest == 45
    remove_memory(corpus, "long")

    _build("--rebuild")

    assert store.reader(corpus.pk, "memory").meta.longest == _longest_memory(corpus) < 45


@pytest.mark.django_db
def test_documents_longer_than_the_indexed_prefix_rank_the_same_through_the_engine_and_sql(engine_on):
    """The engine indexes each document's postings (``build._texts_of``): its terms are the database's prefix, as
    many as its ``length``, which the proof's length bounds assume. Entries around the limit, a word after them:
    only those shorter than the limit are found by it, on both paths."""
    scope = make_scope("project:long")
    rng = random.Random(11)
    texts = {
        f"l{i:03d}": _long_text(rng, RECALL_MAX_DOCUMENT_TOKENS - 60, RECALL_MAX_DOCUMENT_TOKENS + 60) + " zeppelin"
        for i in range(30)
    }
    add_memory(scope, texts)
    _build()
    queries = ["deploy", "backup stream", "deploy stream archive", "zeppelin", "zeppelin deploy"]
    expected = _sql_rankings(engine_on, scope, queries, limit=8)
    answers, unproven = _answers(), _fallbacks("unproven")

    got = [_ranking(scope, "memory", query, 8) for query in queries]

    assert got == expected
    assert _answers() - answers + _fallbacks("unproven") - unproven == len(queries)
    assert store.reader(scope.pk, "memory").meta.longest == _longest_memory(scope) == RECALL_MAX_DOCUMENT_TOKENS
    found_by_the_tail = {
        f"l{i:03d}" for i, text in enumerate(texts.values()) if len(text.split()) <= RECALL_MAX_DOCUMENT_TOKENS
    }
    assert found_by_the_tail and len(found_by_the_tail) < len(texts)
    found = [document for document, _ in _ranking(scope, "memory", "zeppelin", 30)]
    assert set(RecallDocument.objects.filter(pk__in=found).values_list("entry_version__entry_id", flat=True)) == (
        found_by_the_tail
    )
