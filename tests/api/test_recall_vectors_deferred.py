"""Deferred vectors (``POWERCONTEXT_EMBEDDINGS["write"] = "deferred"``, issue 52): a write answers 201 without a
vector and is found by its words at once; the process's drainer embeds it moments later, and it is then found by its
meaning. Two drainers on one backlog store one vector per document; a failing provider does not end the drainer,
and the lag metric shows what waits. Writes go through the public HTTP API; the drainer is the real thread."""

import contextlib
import json
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import connections
from prometheus_client import REGISTRY

from artifacts.models import RecallDocument, RecallVector
from artifacts.recall.vectors import drainer
from artifacts.recall.vectors.providers import configured_provider
from artifacts.recall.vectors.selectors import recall_vector_lag
from tests import waits
from tests.api.factories import add_memory, auth, make_key, make_scope, top_memory
from tests.conftest import hybrid_endpoint_settings
from tests.embedding_server import DIMENSION
from tests.integration.conftest import closed_port

MODEL = "endpoint:stub-embedder"
TOKEN = "metrics-token"
DRAINED_WITHIN = 60
"""Seconds a test waits for the drainer (it looks every 0.1 s here): a bound, not a time the test expects."""


@pytest.fixture
def deferred(settings, embedding_server, tmp_path, monkeypatch):
    """Hybrid recall through the test embedding server, writes deferred, the drain lock in the test's directory,
    the drainer looking every 0.1 s. Afterwards: writes inline again (the drainer's later passes do nothing), once
    no pass is under way."""
    hybrid_endpoint_settings(settings, embedding_server, write="deferred")
    settings.DATA_DIR = tmp_path
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    monkeypatch.setattr(drainer, "POLL_SECONDS", 0.1)
    monkeypatch.setattr(drainer, "RETRY_SECONDS", 0.1)
    yield settings
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "write": "inline"}
    with holding_the_drain_lock():  # once no pass is under way
        pass


@pytest.fixture
def by_hand(monkeypatch):
    """The drainer's pass as the test calls it; the background thread (alive from an earlier test) passes idle."""
    drain = drainer.recall_vectors_drain
    monkeypatch.setattr(drainer, "recall_vectors_drain", lambda **_: None)
    return drain


@contextlib.contextmanager
def holding_the_drain_lock() -> Iterator[None]:
    """The machine's drain lock, taken once the pass under way (the process's drainer, alive from an earlier test,
    looks for work every 0.1 s) lets it go: while the test holds it, no drainer embeds."""
    deadline = time.monotonic() + DRAINED_WITHIN
    while True:
        with drainer.drain_lock() as held:
            if held:
                yield
                return
        if time.monotonic() > deadline:
            pytest.fail(f"the drain lock: still held by a pass after {DRAINED_WITHIN} s")
        time.sleep(0.01)


def write(client, key: str, entry_id: str, body: str, **headers) -> None:
    response = client.post(
        "/v1/memory/entries",
        json.dumps({"scope_id": "project:deferred", "entry_id": entry_id, "body": body}),
        content_type="application/json",
        **auth(key),
        **headers,
    )
    assert response.status_code == 201, response.content


def lag() -> int:
    return recall_vector_lag(model_id=MODEL, dimension=DIMENSION)


def one_vector_per_document() -> None:
    documents = list(RecallVector.objects.values_list("document_id", flat=True))
    assert sorted(documents) == sorted(set(documents)) == sorted(RecallDocument.objects.values_list("pk", flat=True))


def failures() -> float:
    return REGISTRY.get_sample_value("powercontext_recall_vectors_drain_failures_total") or 0.0


@pytest.mark.usefixtures("committed_db")
@pytest.mark.parametrize("idempotency", [{}, {"HTTP_IDEMPOTENCY_KEY": "retry-1"}], ids=["plain", "idempotent"])
def test_a_deferred_write_answers_without_a_vector_found_by_words_at_once_and_by_meaning_once_drained(
    client, deferred, idempotency
):
    scope = make_scope("project:deferred")
    key = make_key(read=[scope], write=[scope])

    with holding_the_drain_lock():  # the drainer cannot embed before the test has looked
        write(client, key, "car", "I bought a new automobile", **idempotency)  # idempotent: its own transaction
        write(client, key, "dog", "The puppy sleeps all day")

        assert not RecallVector.objects.exists()
        assert lag() == 2
        assert drainer.drainer_running()  # started by the first deferred write
        found = client.post(
            "/v1/memory/search",
            json.dumps({"scope_id": "project:deferred", "query": "automobile"}),
            content_type="application/json",
            **auth(key),
        )
        assert found.status_code == 200, found.content
        assert [hit["citation"]["entry_id"] for hit in found.json()["hits"]] == ["car"]

    waits.wait_until(lambda: lag() == 0, what="the drainer embedding both entries", timeout=DRAINED_WITHIN)
    one_vector_per_document()
    # No word in common with the entry: found by its meaning alone.
    assert top_memory(client, key, scope_id="project:deferred", query="which car do we own?") == ["car"]


@pytest.mark.usefixtures("committed_db")
def test_two_drainers_racing_on_one_backlog_leave_exactly_one_vector_per_document(deferred, by_hand, monkeypatch):
    deferred.POWERCONTEXT_RECALL_MODE = "lexical"  # written without vectors and without waking the drainer
    add_memory(make_scope("project:race"), {f"note-{n}": f"Note {n} about the garden shed" for n in range(20)})
    deferred.POWERCONTEXT_RECALL_MODE = "hybrid"
    provider = configured_provider()
    embed_passages, line, met = provider.embed_passages, waits.barrier(2), threading.local()

    def first_batch_in_step(texts):
        # Both drainers have chosen the same first batch before either stores it: both store the same documents.
        vectors = embed_passages(texts)
        if not getattr(met, "done", False):
            met.done = True
            line.wait()
        return vectors

    monkeypatch.setattr(provider, "embed_passages", first_batch_in_step)
    stored: list[int] = []

    def drain() -> None:
        try:
            stored.append(by_hand(exclusive=False))
        finally:
            connections.close_all()

    errors = waits.run_threads([drain, drain], what="two drainers", barriers=[line])

    assert errors == []
    assert sum(stored) == 20  # the batch both embedded is counted once, by the drainer that stored it
    one_vector_per_document()
    assert RecallVector.objects.count() == 20 and lag() == 0


@pytest.mark.usefixtures("committed_db")
def test_a_drainer_finding_the_lock_taken_leaves_the_backlog_to_its_holder(deferred, by_hand):
    deferred.POWERCONTEXT_RECALL_MODE = "lexical"
    add_memory(make_scope("project:lock"), {"car": "I bought a new automobile"})
    deferred.POWERCONTEXT_RECALL_MODE = "hybrid"

    with holding_the_drain_lock():  # another process's drainer, embedding
        assert by_hand() is None
        assert lag() == 1

    assert by_hand() == 1
    assert lag() == 0


@pytest.mark.usefixtures("committed_db")
def test_a_failing_provider_does_not_end_the_drainer_and_the_lag_metric_shows_the_backlog(
    client, deferred, embedding_server
):
    hybrid_endpoint_settings(deferred, f"http://127.0.0.1:{closed_port()}/v1", write="deferred")
    scope = make_scope("project:deferred")
    key = make_key(read=[scope], write=[scope])
    before = failures()

    write(client, key, "car", "I bought a new automobile")  # answered 201: the provider is the drainer's concern

    waits.wait_until(lambda: failures() >= before + 2, what="two failed passes", timeout=DRAINED_WITHIN)
    assert drainer.drainer_running()
    scraped = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert scraped.status_code == 200
    assert f'powercontext_recall_vector_lag{{model="{MODEL}"}} 1.0' in scraped.content.decode()

    hybrid_endpoint_settings(deferred, embedding_server, write="deferred")  # the same model, answering again
    waits.wait_until(lambda: lag() == 0, what="the drainer embedding once the provider answers", timeout=60)
    one_vector_per_document()


@pytest.mark.usefixtures("committed_db")
def test_a_pass_looks_at_newer_documents_and_every_few_minutes_at_all_of_them(deferred, monkeypatch):
    one_pass = drainer._pass
    monkeypatch.setattr(drainer, "_pass", lambda: None)  # the background thread (from an earlier test) idles
    monkeypatch.setattr(drainer, "RECENT_SLACK", 0)
    deferred.POWERCONTEXT_RECALL_MODE = "lexical"
    add_memory(make_scope("project:old"), {"car": "I bought a new automobile"})  # an old miss, never woken for
    deferred.POWERCONTEXT_RECALL_MODE = "hybrid"
    monkeypatch.setitem(drainer._state, "seen", RecallDocument.objects.get().pk)
    monkeypatch.setitem(drainer._state, "full_at", time.monotonic())  # a pass over every document just ran
    add_memory(make_scope("project:new"), {"dog": "The puppy sleeps all day"})

    one_pass()
    assert set(RecallVector.objects.values_list("document__entry_version__entry_id", flat=True)) == {"dog"}

    drainer._state["full_at"] -= drainer.FULL_PASS_SECONDS  # the next pass is due to look at everything
    one_pass()
    assert lag() == 0
    one_vector_per_document()
