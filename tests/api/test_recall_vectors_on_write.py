"""Vectors written with the write (issue 37): in hybrid recall each new recall document commits with its vector, for
exactly the text recall indexed; a provider down or slow never fails or holds up the write beyond its wait, and
``manage.py recall_embed`` fills the gap later. A 65,536-character write embeds its first pieces only, by the same
rule whichever the provider (issue 52), while another key's write goes on; it is found by its words at once, and
by its meaning once embedded, with the write or later. Writes go through the public HTTP API."""

import json
import logging
import threading
import time
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.test import Client
from prometheus_client import REGISTRY

from artifacts.models import RecallDocument, RecallVector
from artifacts.recall.index import revision_text
from artifacts.recall.vectors.providers import (
    PASSAGE_CHARS,
    PASSAGE_CHUNK_CHARS,
    PASSAGE_CHUNKS,
    EndpointProvider,
    PackagedProvider,
    configured_provider,
)
from artifacts.recall.vectors.ranking import decode, normalized
from artifacts.recall.vectors.selectors import recall_vector_lag
from artifacts.recall.vectors.write import WriteVectors
from tests import waits
from tests.api.factories import add_memory, auth, make_key, make_scope, top_memory
from tests.conftest import embedding_endpoint_settings, hybrid_endpoint_settings
from tests.embedding_server import DIMENSION, embed, requests_received, running_server
from tests.integration.conftest import closed_port

MODEL = "endpoint:stub-embedder"
SLOW_REPLY_SECONDS = 10
WRITE_WAIT = 0.5


@pytest.fixture
def hybrid(settings):
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    return settings


@pytest.fixture
def endpoint(hybrid, embedding_server):
    embedding_endpoint_settings(hybrid, embedding_server, write_wait=5.0)
    return configured_provider()


@pytest.fixture(scope="module")
def slow_server():
    with running_server("--delay", str(SLOW_REPLY_SECONDS)) as base_url:
        yield base_url


@pytest.fixture
def writer(db):
    scope = make_scope("project:vectors")
    return {"scope": scope, "key": make_key(read=[scope], write=[scope])}


def post(client, writer, path, **body):
    response = client.post(
        path,
        json.dumps({"scope_id": "project:vectors", **body}),
        content_type="application/json",
        **auth(writer["key"]),
    )
    assert response.status_code == 201, response.content
    return response


def vectors_of_live_documents() -> dict[int, tuple[str, np.ndarray]]:
    """Each vector stored, by its document: (model id, the vector); every one must be of a live document."""
    rows = list(RecallVector.objects.values_list("document_id", "model_id", "dimension", "vector"))
    assert len({row[0] for row in rows}) == len(rows), "one vector per document"
    assert {row[0] for row in rows} <= set(RecallDocument.objects.values_list("pk", flat=True))
    return {document: (model, decode([vector], dimension)[0]) for document, model, dimension, vector in rows}


def assert_each_live_document_has_its_texts_vector(texts: dict[int, str]) -> None:
    stored = vectors_of_live_documents()
    assert set(stored) == set(texts) == set(RecallDocument.objects.values_list("pk", flat=True))
    for document, text in texts.items():
        model, vector = stored[document]
        assert model == MODEL
        np.testing.assert_allclose(vector, normalized(embed(text), DIMENSION), atol=2e-3)  # stored as half floats


def document_of(**lookup) -> int:
    return RecallDocument.objects.get(**lookup).pk


def misses(reason: str) -> float:
    return REGISTRY.get_sample_value("powercontext_recall_vectors_write_misses_total", {"reason": reason}) or 0.0


def test_a_memory_entry_created_updated_and_removed_keeps_one_vector_per_live_document(client, endpoint, writer):
    post(client, writer, "/v1/memory/entries", entry_id="car", body="I bought a new automobile")
    post(client, writer, "/v1/memory/entries", entry_id="dog", body="The puppy sleeps all day")
    first_car = document_of(entry_version__entry_id="car")
    assert_each_live_document_has_its_texts_vector(
        {first_car: "I bought a new automobile", document_of(entry_version__entry_id="dog"): "The puppy sleeps all day"}
    )

    post(client, writer, "/v1/memory/entries/update", entry_id="car", body="My car is red")
    car = document_of(entry_version__entry_id="car", entry_version__retired_in_revision__isnull=True)
    assert car != first_car and not RecallVector.objects.filter(document_id=first_car).exists()
    assert_each_live_document_has_its_texts_vector(
        {car: "My car is red", document_of(entry_version__entry_id="dog"): "The puppy sleeps all day"}
    )

    post(client, writer, "/v1/memory/entries/remove", entry_id="dog")
    assert_each_live_document_has_its_texts_vector({car: "My car is red"})


def test_an_experience_and_a_topic_memory_revision_each_replace_their_documents_vector(client, endpoint, writer):
    post(client, writer, "/v1/experiences/revisions", artifact_id="lesson", body="Physician appointment Monday")
    post(client, writer, "/v1/experiences/revisions", artifact_id="lesson", body="Doctor visit moved to Tuesday")
    post(client, writer, "/v1/topic-memories/revisions", artifact_id="cars", title="Cars", summary="Which car we own")
    topic = {"title": "Cars", "summary": "We sold the automobile", "body": "Bought a bicycle"}
    post(client, writer, "/v1/topic-memories/revisions", artifact_id="cars", **topic)

    assert_each_live_document_has_its_texts_vector(
        {
            document_of(artifact__artifact_id="lesson"): "Doctor visit moved to Tuesday",
            document_of(artifact__artifact_id="cars"): revision_text(topic["title"], topic["summary"], topic["body"]),
        }
    )


def test_a_slow_endpoint_does_not_hold_up_the_write_and_recall_embed_fills_the_vector_later(
    client, hybrid, writer, slow_server, embedding_server, caplog
):
    embedding_endpoint_settings(hybrid, slow_server, write_wait=WRITE_WAIT)
    before = misses("timeout")

    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="artifacts.recall.vectors.write"):
        post(client, writer, "/v1/memory/entries", entry_id="car", body="I bought a new automobile")
    answered_in = time.monotonic() - started

    assert answered_in < SLOW_REPLY_SECONDS / 2  # the wait (0.5 s) and a generous margin, not the slow reply
    assert not RecallVector.objects.exists()
    assert misses("timeout") == before + 1
    assert "left without a vector by endpoint:stub-embedder (timeout" in caplog.text
    assert recall_vector_lag(model_id=MODEL, dimension=DIMENSION) == 1

    embedding_endpoint_settings(hybrid, embedding_server)  # the same model, answering again
    call_command("recall_embed", stdout=StringIO(), stderr=StringIO())
    assert_each_live_document_has_its_texts_vector(
        {document_of(entry_version__entry_id="car"): "I bought a new automobile"}
    )


def test_an_endpoint_that_is_down_leaves_the_write_without_a_vector_until_recall_embed(
    client, hybrid, writer, embedding_server
):
    embedding_endpoint_settings(hybrid, f"http://127.0.0.1:{closed_port()}/v1", write_wait=WRITE_WAIT)
    before = misses("unavailable")

    post(client, writer, "/v1/experiences/revisions", artifact_id="lesson", body="Physician appointment Monday")

    assert not RecallVector.objects.exists()
    assert misses("unavailable") == before + 1
    assert recall_vector_lag(model_id=MODEL, dimension=DIMENSION) == 1

    embedding_endpoint_settings(hybrid, embedding_server)
    call_command("recall_embed", stdout=StringIO(), stderr=StringIO())
    assert_each_live_document_has_its_texts_vector(
        {document_of(artifact__artifact_id="lesson"): "Physician appointment Monday"}
    )


def test_a_vector_embedded_for_another_text_is_never_stored(endpoint, writer):
    add_memory(writer["scope"], {"car": "My car is red"})
    document = RecallDocument.objects.get()
    RecallVector.objects.all().delete()
    before = misses("text")
    vectors = WriteVectors(endpoint, ready={"My car is blue": embed("My car is blue")})

    with transaction.atomic():
        vectors.add(document, "My car is red")
        assert vectors.store() == 0

    assert not RecallVector.objects.exists()
    assert misses("text") == before + 1


def test_in_lexical_recall_a_write_embeds_nothing(client, settings, embedding_server, writer):
    embedding_endpoint_settings(settings, embedding_server)  # a provider, but recall is lexical (the test settings)

    post(client, writer, "/v1/memory/entries", entry_id="car", body="I bought a new automobile")

    assert not RecallVector.objects.exists()


@pytest.fixture
def packaged(hybrid):
    hybrid.POWERCONTEXT_EMBEDDINGS = {**hybrid.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"}
    provider = configured_provider()
    assert isinstance(provider, PackagedProvider)
    return provider


@pytest.mark.usefixtures("committed_db")
def test_with_the_packaged_model_the_vector_commits_or_rolls_back_with_its_write(packaged):
    scope = make_scope("project:packaged")

    with pytest.raises(RuntimeError), transaction.atomic():
        add_memory(scope, {"car": "My car is red"})
        assert RecallVector.objects.count() == 1  # stored inside the write's transaction
        raise RuntimeError("the write fails after indexing")

    assert not RecallDocument.objects.exists() and not RecallVector.objects.exists()

    add_memory(scope, {"car": "My car is red"})

    vector = RecallVector.objects.get()
    assert vector.document_id == document_of(entry_version__entry_id="car")
    assert vector.model_id == packaged.model_id and vector.dimension == packaged.dimension
    np.testing.assert_allclose(
        decode([vector.vector], packaged.dimension)[0], packaged.embed_passages(["My car is red"])[0], atol=2e-3
    )


def post_car(client, key: str, headers: dict) -> None:
    body = {"scope_id": "project:vectors", "entry_id": "car", "body": "I bought a new automobile"}
    response = client.post(
        "/v1/memory/entries", json.dumps(body), content_type="application/json", **auth(key), **headers
    )
    assert response.status_code == 201, response.content


@pytest.mark.usefixtures("committed_db")
@pytest.mark.parametrize("idempotency", [{}, {"HTTP_IDEMPOTENCY_KEY": "retry-1"}], ids=["plain", "idempotent"])
def test_the_endpoint_is_called_once_per_write_and_never_with_a_transaction_open(
    client, endpoint, embedding_server, monkeypatch, idempotency
):
    from artifacts.recall.vectors import write

    scope = make_scope("project:vectors")
    key = make_key(read=[scope], write=[scope])
    in_transaction = []
    embedder = write._embedder()

    class Spy:
        def submit(self, *args):
            in_transaction.append(connection.in_atomic_block)
            return embedder.submit(*args)

    monkeypatch.setattr(write, "_embedder", Spy)

    post_car(client, key, idempotency)

    assert in_transaction == [False]
    assert_each_live_document_has_its_texts_vector(
        {document_of(entry_version__entry_id="car"): "I bought a new automobile"}
    )


@pytest.mark.usefixtures("committed_db")
@pytest.mark.parametrize("idempotency", [{}, {"HTTP_IDEMPOTENCY_KEY": "retry-1"}], ids=["plain", "idempotent"])
def test_the_packaged_model_embeds_before_the_transaction_opens(client, packaged, monkeypatch, idempotency):
    scope = make_scope("project:vectors")
    key = make_key(read=[scope], write=[scope])
    in_transaction = []
    embed_passages = packaged.embed_passages

    def spy(texts):
        in_transaction.append(connection.in_atomic_block)
        return embed_passages(texts)

    monkeypatch.setattr(packaged, "embed_passages", spy)

    post_car(client, key, idempotency)

    assert in_transaction == [False]
    vector = RecallVector.objects.get(document_id=document_of(entry_version__entry_id="car"))
    assert vector.model_id == packaged.model_id


LONG_SENTENCE = "I bought a new automobile last spring. "
LONG_BODY = (LONG_SENTENCE * (PASSAGE_CHARS // len(LONG_SENTENCE) + 1) + "早上好，" * 16_384)[:65_536]
"""65,536 characters: English up to the embedded bound, CJK (about 65,000 distinct bigrams to index) after it."""


def pooled_by_hand(piece_vectors: list) -> np.ndarray:
    """The bounded rule's vector, computed here apart from the providers: the renormalized mean of the vectors of
    a passage's first ``PASSAGE_CHUNKS`` pieces of ``PASSAGE_CHUNK_CHARS`` characters."""
    mean = np.mean(np.asarray(piece_vectors, dtype=np.float64), axis=0)
    return mean / np.linalg.norm(mean)


LONG_PIECES = [LONG_BODY[n * PASSAGE_CHUNK_CHARS : (n + 1) * PASSAGE_CHUNK_CHARS] for n in range(PASSAGE_CHUNKS)]


@pytest.fixture(params=["packaged", "endpoint", "endpoint-late"])
def either_provider(request, hybrid, embedding_server):
    """Each provider in turn, the vector the bounded rule gives ``LONG_BODY`` with it, computed piece by piece (a
    piece is embedded whole by either), and whether the write goes without it ("endpoint-late": the endpoint
    answers after the write's wait, and ``recall_embed`` embeds it later)."""
    if request.param == "endpoint-late":
        with running_server("--delay", "5") as slow:
            hybrid_endpoint_settings(hybrid, slow, write_wait=WRITE_WAIT)
            yield configured_provider(), pooled_by_hand([embed(piece) for piece in LONG_PIECES]), True
        return
    if request.param == "packaged":
        hybrid.POWERCONTEXT_EMBEDDINGS = {**hybrid.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"}
        provider = configured_provider()
        assert isinstance(provider, PackagedProvider)
        pieces = [provider.embed_passages([piece])[0] for piece in LONG_PIECES]
    else:
        # The long write's embedding is held until the small write answers: its wait must outlast that.
        hybrid_endpoint_settings(hybrid, embedding_server, timeout=60.0, write_wait=60.0)
        provider = configured_provider()
        pieces = [embed(piece) for piece in LONG_PIECES]
    yield provider, pooled_by_hand(pieces), False


@pytest.mark.usefixtures("committed_db", "dense_caches_cleared")
def test_a_65536_character_write_embedding_holds_no_other_tenants_write_and_is_found_both_ways(
    client, either_provider, embedding_server, monkeypatch, settings
):
    provider, expected, late = either_provider
    ours, theirs = make_scope("project:long"), make_scope("project:other")
    our_key, their_key = make_key(read=[ours], write=[ours]), make_key(read=[theirs], write=[theirs])
    add_memory(ours, {"dog": "The dog sleeps in the garden shed"})
    embedding, release = threading.Event(), threading.Event()
    embed_passages = provider.embed_passages
    sent_before = len(requests_received(embedding_server))

    def held(texts):
        if LONG_BODY in texts:  # the long write's embedding is under way until the test releases it
            embedding.set()
            waits.wait_event(release, what="the small write answering", timeout=60)
        return embed_passages(texts)

    monkeypatch.setattr(provider, "embed_passages", held)
    answers: dict[str, int] = {}

    def long_write() -> None:
        try:
            body = {"scope_id": "project:long", "entry_id": "car", "body": LONG_BODY}
            answers["long"] = (
                Client()
                .post("/v1/memory/entries", json.dumps(body), content_type="application/json", **auth(our_key))
                .status_code
            )
        finally:
            connections.close_all()

    def small_write() -> None:
        waits.wait_event(embedding, what="the long write embedding", timeout=60)
        body = {"scope_id": "project:other", "entry_id": "note", "body": "Lunch is at noon"}
        answers["small"] = client.post(
            "/v1/memory/entries", json.dumps(body), content_type="application/json", **auth(their_key)
        ).status_code
        answers["small while the long one embeds"] = not release.is_set()
        release.set()

    thread = threading.Thread(target=long_write, name="long-write", daemon=True)
    thread.start()
    small_write()
    waits.join_all([thread], what="the long write")

    assert answers == {"small": 201, "small while the long one embeds": True, "long": 201}
    car = document_of(entry_version__entry_id="car")
    assert RecallVector.objects.filter(document_id=car).exists() is not late

    settings.POWERCONTEXT_RECALL_MODE = "lexical"
    found = client.post(  # found by its words at once, with its vector or without
        "/v1/memory/search",
        json.dumps({"scope_id": "project:long", "query": "automobile"}),
        content_type="application/json",
        **auth(our_key),
    )
    assert found.status_code == 200, found.content
    assert [hit["citation"]["entry_id"] for hit in found.json()["hits"]] == ["car"]
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"

    if late:  # the endpoint answering in time again, under the same model
        hybrid_endpoint_settings(settings, embedding_server)
        provider = configured_provider()
        call_command("recall_embed", stdout=StringIO(), stderr=StringIO())
    note = document_of(entry_version__entry_id="note")
    assert RecallVector.objects.filter(document_id=note, model_id=provider.model_id).exists()
    stored = RecallVector.objects.get(document_id=car, model_id=provider.model_id)
    np.testing.assert_allclose(decode([stored.vector], provider.dimension)[0], expected, atol=2e-3)
    if isinstance(provider, EndpointProvider):  # what reached the endpoint: the first four pieces, nothing more
        sent = [text for request in requests_received(embedding_server)[sent_before:] for text in request["input"]]
        assert any(sent[at : at + PASSAGE_CHUNKS] == LONG_PIECES for at in range(len(sent)))
        assert all(len(text) <= PASSAGE_CHUNK_CHARS for text in sent)

    # No word in common with the body: found by its meaning alone.
    assert top_memory(client, our_key, scope_id="project:long", query="which car did we purchase?") == ["car"]
