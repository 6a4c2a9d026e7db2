"""Hybrid recall through the endpoint: memories written, embedded by the real embeddings test server process
(tests/embedding_server.py) through ``recall_embed``, then prepared by meaning; logged, replayed, and answered
lexically when the server is gone."""

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts import selectors
from artifacts.models import PrepareLog, Scope
from artifacts.recall.fusion import weights_by_model
from assembly.replay import prepare_replay
from tests.api.factories import add_memory, legacy_of, make_key, make_scope, markdown_of, prepare
from tests.conftest import hybrid_endpoint_settings
from tests.embedding_server import running_server

pytestmark = pytest.mark.usefixtures("dense_caches_cleared")
MODEL = "stub-embedder"
ASSEMBLY = {"sections": [{"family": "memory", "limit": 3}]}
PARAPHRASED = "Bought an automobile last spring"
QUERY = "which car did we purchase?"  # no index term in common with it: car/automobile, purchase/bought


@pytest.fixture
def memories(db, settings, embedding_server):
    hybrid_endpoint_settings(settings, embedding_server)
    scope = make_scope("project:hybrid")
    add_memory(
        scope,
        {
            "car": PARAPHRASED,
            "dog": "The dog sleeps in the garden shed",
            "lunch": "Lunch is served at noon on Fridays",
        },
    )
    call_command("recall_embed", stderr=io.StringIO())
    return make_key(read=[scope])


def _logged_options():
    return selectors.prepare_record_read(log=PrepareLog.objects.get()).options


def _prepare(client, key):
    response = prepare(client, key, scope_id="project:hybrid", query=QUERY, assembly=ASSEMBLY)
    assert response.status_code == 200, response.content
    return response


def test_a_paraphrase_sharing_no_word_is_found_by_meaning(client, memories):
    document = markdown_of(_prepare(client, memories))
    assert [entry.entry_id for entry in document.entries][:1] == ["car"]
    assert PARAPHRASED in document.entries[0].body


def test_lexical_recall_finds_nothing_for_the_same_paraphrase(client, memories, settings):
    settings.POWERCONTEXT_RECALL_MODE = "lexical"
    assert _prepare(client, memories).json()["status"] == "empty"
    assert "recall" not in _logged_options()  # lexical by configuration: nothing more recorded


def _assert_logged_hybrid_car_first_and_replayed(mode: str) -> None:
    """The one logged prepare: its format, hybrid recall by the test model, the paraphrase found by meaning alone
    first, and an exact replay."""
    log = PrepareLog.objects.get()
    assert log.mode == mode
    recall = _logged_options()["recall"]
    assert (recall["mode"], recall["outcome"], recall["model"]) == ("hybrid", "answered", f"endpoint:{MODEL}")
    lexical_rank, dense_rank, fused_score = recall["ranks"]["memory"][0][0]
    assert (lexical_rank, dense_rank) == (None, 1)
    assert fused_score > 0
    replay = prepare_replay(log=log)
    assert replay.matches, replay.problems


def test_the_log_records_the_mode_the_model_and_each_candidates_ranks_and_replays_exactly(client, memories):
    _prepare(client, memories)
    _assert_logged_hybrid_car_first_and_replayed("markdown")


def test_a_legacy_envelope_prepare_logs_what_ranked_its_recall_and_replays_exactly(client, memories):
    response = prepare(client, memories, scope_id="project:hybrid", query=QUERY)  # assembly omitted: legacy
    assert [item["entry"]["id"] for item in legacy_of(response)][:1] == ["car"]
    _assert_logged_hybrid_car_first_and_replayed("legacy")


def test_a_repeated_hybrid_prepare_costs_no_more_statements_than_a_lexical_one_and_answers_the_same(
    client, memories, settings
):
    def statements_and_entries(mode: str) -> tuple[int, list]:
        settings.POWERCONTEXT_RECALL_MODE = mode
        with CaptureQueriesContext(connection) as statements:
            response = prepare(client, memories, scope_id="project:hybrid", query="dog garden", assembly=ASSEMBLY)
        return len(statements), [entry.entry_id for entry in markdown_of(response).entries]

    first = [statements_and_entries("hybrid") for _ in range(3)]  # the scope's postings copied, its rows kept
    hybrid, lexical = statements_and_entries("hybrid"), statements_and_entries("lexical")
    # Lexical BM25 finds the dog alone; the dense ranking adds the other two, whose rows the copy keeps by now.
    assert hybrid[1] == first[0][1] and hybrid[1][0] == "dog" and sorted(hybrid[1]) == ["car", "dog", "lunch"]
    assert lexical[1] == ["dog"]
    assert hybrid[0] == lexical[0]


def test_the_fusion_configured_for_the_model_in_settings_ranks_and_is_logged_and_replayed(client, memories, settings):
    # Min-max: the only dense match, first of its ranking, scores the whole dense weight (RRF would give 0.15/101).
    settings.POWERCONTEXT_RECALL_FUSION = weights_by_model(
        {MODEL: {"method": "minmax", "dense_weight": 0.6, "lexical_weight": 0.4}}
    )
    document = markdown_of(_prepare(client, memories))
    assert [entry.entry_id for entry in document.entries][:1] == ["car"]
    assert _logged_options()["recall"]["ranks"]["memory"][0][0] == [None, 1, 0.6]
    replay = prepare_replay(log=PrepareLog.objects.get())
    assert replay.matches, replay.problems


def test_an_embeddings_server_gone_leaves_the_lexical_answer_and_says_why(client, memories, settings):
    with running_server() as gone:
        pass  # started and stopped: nothing listens there any more
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "url": gone}
    response = prepare(client, memories, scope_id="project:hybrid", query="dog garden", assembly=ASSEMBLY)
    assert response.status_code == 200
    assert [entry.entry_id for entry in markdown_of(response).entries] == ["dog"]
    recall = _logged_options()["recall"]
    assert (recall["mode"], recall["outcome"]) == ("lexical", "unavailable")


def test_the_inspector_shows_the_mode_and_each_candidates_lexical_rank_dense_rank_and_fused_score(
    client, memories, staff_client
):
    api_content = _prepare(client, memories).json()["content"]
    params = {
        "scope": Scope.objects.get(scope_id="project:hybrid").pk,
        "query": QUERY,
        "max_bytes": "8000",
        "assembly": json.dumps(ASSEMBLY),
    }
    response = staff_client.get("/admin/powercontext/inspect/", params)
    assert response.context["result"].content == api_content
    page = response.content.decode()
    assert f"hybrid: BM25 fused with the dense ranking of endpoint:{MODEL}" in page
    rows = {row.decision.citation.entry_id: row for row in response.context["rows"]}
    assert (rows["car"].fused.lexical_rank, rows["car"].fused.dense_rank) == (None, 1)
    assert '<td class="hybrid">— / 1 / ' in page
