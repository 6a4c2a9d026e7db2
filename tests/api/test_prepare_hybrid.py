"""Hybrid recall through the endpoint: memories written, embedded by the real embeddings test server process
(tests/embedding_server.py) on write and through ``recall_embed``, then prepared by meaning; logged (and shown on
the prepare log's admin page), replayed without the server, answered lexically when the server is gone or slow; exact
reads and citations the same as under lexical recall."""

import dataclasses
import io
import json
import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from prometheus_client import REGISTRY

from artifacts import selectors
from artifacts.models import PrepareLog, RecallDocument, RecallVector, Scope
from artifacts.recall.fusion import weights_by_model
from artifacts.recall.vectors import query
from artifacts.recall.vectors.services import recall_vectors_store
from assembly.replay import prepare_replay
from tests.api import factories
from tests.api.factories import add_memory, legacy_of, make_key, make_scope, markdown_of, prepare
from tests.conftest import hybrid_endpoint_settings
from tests.embedding_server import DIMENSION, requests_received, running_server
from vocabulary.citation import Citation
from vocabulary.citation_text import parse_citation_text

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


def test_a_key_never_gets_another_keys_cached_query_vector(client, memories, embedding_server):
    # A cached query answers faster than an embedded one: shared across keys, the time of a prepare would tell any
    # key whether another had just sent the same query. Each key's own repeat is still a hit.
    other = make_key(read=[Scope.objects.get(scope_id="project:hybrid")])
    asked = [len(requests_received(embedding_server))]
    for key in (memories, other, memories, other):
        _prepare(client, key)
        asked.append(len(requests_received(embedding_server)))

    embedded = [after - before for before, after in zip(asked, asked[1:], strict=False)]
    assert embedded == [1, 1, 0, 0]  # A embeds, B embeds the same text again, then each hits its own


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
    lexical_rank, dense_rank, fused_score, cosine, learned = recall["ranks"]["memory"][0][0]
    assert learned is False  # nobody measured the test model: fused by hand
    assert (lexical_rank, dense_rank) == (None, 1)
    assert fused_score > 0
    assert -1 <= cosine <= 1
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
    assert _logged_options()["recall"]["ranks"]["memory"][0][0][:3] == [None, 1, 0.6]
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
        "scope": "project:hybrid",
        "query": QUERY,
        "max_bytes": "8000",
        "assembly": json.dumps(ASSEMBLY),
    }
    response = staff_client.get("/admin/powercontext/inspect/", params)
    assert response.context["result"].content == api_content
    page = response.content.decode()
    assert f"hybrid: BM25 and the dense ranking of endpoint:{MODEL}, fused by hand" in page
    rows = {row.decision.citation.entry_id: row for row in response.context["rows"]}
    assert (rows["car"].fused.lexical_rank, rows["car"].fused.dense_rank) == (None, 1)
    assert '<td class="hybrid">— / 1 / ' in page


def test_written_memories_are_embedded_by_the_write_alone(client, db, settings, embedding_server):
    hybrid_endpoint_settings(settings, embedding_server)
    scope = make_scope("project:hybrid")
    add_memory(scope, {"car": PARAPHRASED, "dog": "The dog sleeps in the garden shed"})
    key = make_key(read=[scope])

    document = markdown_of(_prepare(client, key))

    assert [entry.entry_id for entry in document.entries][:1] == ["car"]
    out = io.StringIO()
    call_command("recall_embed", stdout=out, stderr=io.StringIO())
    assert out.getvalue() == f"endpoint:{MODEL}: every document has a vector\n"


def _dense_fallbacks(reason: str) -> float:
    return REGISTRY.get_sample_value("powercontext_recall_dense_fallbacks_total", {"reason": reason}) or 0.0


def test_a_slow_embeddings_server_leaves_the_lexical_answer_within_the_query_timeout(client, memories, settings):
    before = _dense_fallbacks("timeout")
    with running_server("--delay", "60") as slow:
        settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "url": slow, "query_timeout": 0.2}
        started = time.monotonic()
        response = prepare(client, memories, scope_id="project:hybrid", query="dog garden", assembly=ASSEMBLY)
        waited = time.monotonic() - started

    assert [entry.entry_id for entry in markdown_of(response).entries] == ["dog"]
    recall = _logged_options()["recall"]
    assert (recall["mode"], recall["outcome"]) == ("lexical", "timeout")
    assert _dense_fallbacks("timeout") == before + 1
    assert waited < 30  # far below the server's delay: the prepare did not wait for it


def test_an_exact_replay_of_a_hybrid_prepare_needs_no_embeddings_server(client, memories, settings, embedding_server):
    with running_server() as gone:
        settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "url": gone}
        content = _prepare(client, memories).json()["content"]
    log = PrepareLog.objects.get()
    assert _logged_options()["recall"]["outcome"] == "answered"
    query.QUERY_CACHE.clear()  # nothing of the prepare's query vector left in this process

    replay = prepare_replay(log=log)  # the server is down

    assert replay.matches, replay.problems
    assert replay.result.content.encode() == content.encode()
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "url": embedding_server}
    sent = len(requests_received(embedding_server))
    assert prepare_replay(log=log).result.content == content
    assert len(requests_received(embedding_server)) == sent  # a live server is not asked either


@pytest.mark.parametrize("change", ["update", "removal"])
def test_a_changed_or_removed_entry_is_no_longer_found_by_its_old_meaning(client, memories, change):
    scope = Scope.objects.get(scope_id="project:hybrid")
    assert PARAPHRASED in _prepare(client, memories).json()["content"]  # the scope's vectors now in memory

    if change == "update":
        factories.update_memory(scope, "car", "The cat naps on the windowsill")
    else:
        factories.remove_memory(scope, "car")

    assert (
        PARAPHRASED
        not in prepare(client, memories, scope_id="project:hybrid", query=QUERY, assembly=ASSEMBLY).json()["content"]
    )


def test_a_vector_of_another_dimension_under_the_same_model_is_embedded_again(client, memories, settings):
    settings.POWERCONTEXT_METRICS_TOKEN = "metrics-token"
    documents = list(RecallDocument.objects.values_list("pk", flat=True))
    RecallVector.objects.all().delete()  # as if embedded when the endpoint's model answered 2 numbers
    recall_vectors_store(model_id=f"endpoint:{MODEL}", dimension=2, vectors={pk: [1.0, 0.0] for pk in documents})

    metrics = client.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-token").content.decode()
    assert f'powercontext_recall_vector_lag{{model="endpoint:{MODEL}"}} {len(documents)}.0' in metrics
    out = io.StringIO()
    call_command("recall_embed", stdout=out, stderr=io.StringIO())

    assert f"{len(documents)} documents embedded" in out.getvalue()
    assert set(RecallVector.objects.values_list("dimension", flat=True)) == {DIMENSION}
    assert [entry.entry_id for entry in markdown_of(_prepare(client, memories)).entries][:1] == ["car"]


def test_the_prepare_log_page_shows_the_recall_and_each_candidates_logged_ranks(client, memories, staff_client):
    _prepare(client, memories)
    log = PrepareLog.objects.get()

    page = staff_client.get(reverse("admin:artifacts_preparelog_change", args=[log.pk])).content.decode()

    assert f"hybrid: BM25 and the dense ranking of endpoint:{MODEL}, fused by hand" in page
    assert "<th>lexical / dense / cosine / score</th>" in page
    lexical_rank, dense_rank, fused_score, cosine, _ = _logged_options()["recall"]["ranks"]["memory"][0][0]
    assert f"<td>— / 1 / {cosine:.3f} / {fused_score:.5f} fused</td>" in page
    assert (lexical_rank, dense_rank) == (None, 1)


def test_the_prepare_log_page_says_why_recall_was_lexical(client, memories, settings, staff_client):
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "url": "http://127.0.0.1:1/v1"}
    prepare(client, memories, scope_id="project:hybrid", query="dog garden", assembly=ASSEMBLY)
    settings.POWERCONTEXT_RECALL_MODE = "lexical"
    prepare(client, memories, scope_id="project:hybrid", query="dog garden", assembly=ASSEMBLY)
    unavailable, configured = PrepareLog.objects.order_by("pk")

    pages = [
        staff_client.get(reverse("admin:artifacts_preparelog_change", args=[log.pk])).content.decode()
        for log in (unavailable, configured)
    ]

    assert "lexical: the query could not be embedded (unavailable), BM25 alone answered" in pages[0]
    assert "lexical (BM25; POWERCONTEXT_RECALL_MODE is lexical)" in pages[1]
    assert "lexical / dense / cosine / score" not in pages[0] + pages[1]


def test_staff_who_may_not_read_the_content_see_the_recall_line_but_no_candidate(client, memories):
    _prepare(client, memories)
    staff = get_user_model().objects.create_user("log-reader", "log@example.com", "pw-staff-1", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(content_type__app_label="artifacts", codename="view_preparelog"))
    reader = Client()
    reader.force_login(staff)

    page = reader.get(reverse("admin:artifacts_preparelog_change", args=[PrepareLog.objects.get().pk]))

    assert f"hybrid: BM25 and the dense ranking of endpoint:{MODEL}, fused by hand" in page.content.decode()
    assert "lexical / dense / cosine / score" not in page.content.decode()
    assert PARAPHRASED not in page.content.decode()


def _citations(content: str) -> dict[Citation, str]:
    """Each citation of a Markdown content, with its entry's text (what an operator pastes into the resolver)."""
    return {parse_citation_text(chunk): chunk for chunk in re.split(r"\n### ", content)[1:]}


def _read_cited(client, key, citation: Citation) -> dict:
    params = {k: v for k, v in dataclasses.asdict(citation).items() if v is not None}
    response = factories.read_revision(client, key, **params)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("read", ["exact read", "citation resolution"])
def test_exact_reads_and_citations_are_the_same_in_lexical_and_hybrid_recall(
    client, memories, settings, staff_client, read
):
    cited = {}
    for mode in ("lexical", "hybrid"):
        settings.POWERCONTEXT_RECALL_MODE = mode
        content = prepare(client, memories, scope_id="project:hybrid", query="automobile dog", assembly=ASSEMBLY)
        cited[mode] = _citations(content.json()["content"])
    assert {c.entry_id for c in cited["lexical"]} >= {"car", "dog"}
    factories.update_memory(Scope.objects.get(scope_id="project:hybrid"), "car", "Sold the automobile this winter")

    answers = {}
    for mode, citations in cited.items():
        settings.POWERCONTEXT_RECALL_MODE = mode
        if read == "exact read":
            answers[mode] = {c: _read_cited(client, memories, c) for c in citations}
        else:
            resolver = reverse("admin-citation-resolve")
            answers[mode] = {
                c: staff_client.post(resolver, {"text-citation": text})["Location"] for c, text in citations.items()
            }

    shared = set(answers["lexical"]) & set(answers["hybrid"])
    assert {c.entry_id for c in shared} >= {"car", "dog"}
    assert {c: answers["lexical"][c] for c in shared} == {c: answers["hybrid"][c] for c in shared}
    if read == "exact read":
        car = next(c for c in shared if c.entry_id == "car")
        assert answers["hybrid"][car]["entry"]["body"] == PARAPHRASED  # the cited version, not the new head


def test_a_min_max_model_ranks_a_bm25_match_below_the_dense_cut_by_its_own_cosine(
    client, db, settings, embedding_server
):
    # 64 memories about cars that never say "car" fill the dense ranking's top 64; of the two that say it once
    # (equal BM25 scores, "plain" first by id), "close" is nearer the query: its cosine, read from the same vectors
    # although the dense ranking cut it, puts it first. Without it both would weigh lexically alone.
    hybrid_endpoint_settings(settings, embedding_server)
    settings.POWERCONTEXT_RECALL_FUSION = weights_by_model(
        {MODEL: {"method": "minmax", "dense_weight": 0.4, "lexical_weight": 0.6, "min_lexical_share": 0}}
    )
    scope = make_scope("project:hybrid")
    add_memory(scope, {"plain": "car alpha bravo charlie delta", "close": "car automobile echo foxtrot golf"})
    add_memory(scope, {f"filler{i}": f"automobile vehicle note{i}" for i in range(64)})
    call_command("recall_embed", stderr=io.StringIO())
    key = make_key(read=[scope])

    response = prepare(client, key, scope_id="project:hybrid", query="car", assembly=ASSEMBLY)

    assert [entry.entry_id for entry in markdown_of(response).entries][:2] == ["close", "plain"]
    lexical_rank, dense_rank, fused_score, *_ = _logged_options()["recall"]["ranks"]["memory"][0][0]
    assert (lexical_rank, dense_rank) == (2, None)  # beyond the dense ranking's top 64
    assert 0.6 < fused_score < 1.0  # its whole lexical weight and part of its dense one


@pytest.mark.parametrize("server", ["answering", "gone"])
def test_a_min_max_models_deeper_bm25_read_is_cut_to_each_familys_limit_answered_or_not(
    db, settings, embedding_server, server
):
    from artifacts.recall.hybrid import hybrid_ranked_documents

    hybrid_endpoint_settings(settings, embedding_server)
    settings.POWERCONTEXT_RECALL_FUSION = weights_by_model({MODEL: {"method": "minmax"}})
    scope = make_scope("project:hybrid")
    add_memory(scope, {f"dog{i}": f"The dog number {i} sleeps" for i in range(6)})
    call_command("recall_embed", stderr=io.StringIO())
    if server == "gone":
        with running_server() as gone:
            pass  # started and stopped: nothing listens there any more
        settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "url": gone}

    ranked, recall = hybrid_ranked_documents(
        scope_pks_by_family={"memory": [scope.pk]}, query="dog", limits={"memory": 2}
    )

    assert len(ranked["memory"][scope.pk]) == 2
    assert recall.mode == ("hybrid" if server == "answering" else "lexical")
