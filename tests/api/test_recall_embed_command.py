"""``manage.py recall_embed``: every live document without a vector by the configured model gets one; ``--long``
embeds again, by the bounded rule, the long documents whose vectors were stored before it (issue 52)."""

import signal
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from artifacts import services
from artifacts.management.commands import recall_embed
from artifacts.models import RecallDocument, RecallVector
from artifacts.recall.vectors.providers import PASSAGE_CHUNK_CHARS, PASSAGE_CHUNKS, configured_provider
from artifacts.recall.vectors.ranking import decode, dense_rank
from artifacts.recall.vectors.selectors import recall_vector_lag, vectors_for_pair
from artifacts.recall.vectors.services import recall_vectors_store
from tests.api.factories import add_memory
from tests.conftest import embedding_endpoint_settings
from tests.embedding_server import DIMENSION, embed, requests_received

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint(settings, embedding_server):
    embedding_endpoint_settings(settings, embedding_server)
    return configured_provider()


@pytest.fixture
def scope():
    return services.scope_create(scope_id="project:embed")


def write(scope, artifact_id, body):
    services.experience_revision_create(scope=scope, artifact_id=artifact_id, body=body, author="test")
    return RecallDocument.objects.get(artifact__artifact_id=artifact_id, artifact__scope=scope).pk


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("recall_embed", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_embeds_every_pending_document_through_the_endpoint_and_shows_progress(endpoint, scope):
    car = write(scope, "car", "I bought a new automobile")
    for i, body in enumerate(["The puppy sleeps all day", "Physician appointment Monday", "Tea at five"]):
        write(scope, f"other{i}", body)

    out, err = run("--batch-size", "3")

    assert "4 documents embedded" in out and "0 without a vector" in out
    assert "endpoint:stub-embedder: 3/4 documents embedded" in err
    assert "4/4 documents embedded" in err
    assert "\r" not in err and err.count("\n") == 2  # not a terminal: a line per batch
    ids, matrix = vectors_for_pair(scope.pk, "experience", endpoint.model_id)
    assert dense_rank(endpoint.embed_query("purchased car"), matrix, ids, 1)[0][0] == car


def test_a_second_run_embeds_only_the_documents_written_since(endpoint, scope):
    write(scope, "first", "first text")
    run()
    write(scope, "second", "second text")

    out, _ = run()

    assert "1 documents embedded" in out
    assert run()[0] == "endpoint:stub-embedder: every document has a vector\n"
    assert recall_vector_lag(model_id=endpoint.model_id, dimension=endpoint.dimension) == 0


class Terminal(StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_progress_is_one_line_redrawn_with_percent_rate_and_time_left(endpoint, scope):
    for i in range(3):
        write(scope, f"doc{i}", f"text number {i}")
    out, err = StringIO(), Terminal()

    call_command("recall_embed", "--batch-size", "1", stdout=out, stderr=err)

    shown = err.getvalue()
    assert shown.endswith("\n") and shown.count("\n") == 1  # one line, ended once the pass is over
    redraws = shown.removesuffix("\n").split("\r")[1:]
    assert [redraw.split(" documents")[0] for redraw in redraws] == [
        "  endpoint:stub-embedder: 1/3",
        "  endpoint:stub-embedder: 2/3",
        "  endpoint:stub-embedder: 3/3",
    ]
    assert "(33%)" in redraws[0] and "/s, ETA " in redraws[0]
    assert "(100%)" in redraws[-1] and redraws[-1].endswith("ETA 0s\x1b[K")
    assert "3 documents embedded" in out.getvalue()


def test_an_unreachable_endpoint_stops_the_run_with_a_message_and_stores_nothing(settings, scope):
    embedding_endpoint_settings(settings, "http://127.0.0.1:1/v1", timeout=2.0)
    write(scope, "first", "first text")

    with pytest.raises(CommandError, match="embedding stopped: .* run again to resume"):
        run()

    assert recall_vector_lag(model_id="endpoint:stub-embedder", dimension=DIMENSION) == 1


def test_without_a_provider_there_is_nothing_to_embed_with(settings):
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "off"}

    with pytest.raises(CommandError, match="PROVIDER is off"):
        run()


def test_following_stops_cleanly_on_sigterm_and_puts_the_handlers_back(endpoint, scope, monkeypatch):
    write(scope, "first", "first text")
    rounds = []
    embed_round = recall_embed.Command._embed

    def embed_then_terminate(self, *args, **kwargs):
        embed_round(self, *args, **kwargs)
        rounds.append(1)
        signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(recall_embed.Command, "_embed", embed_then_terminate)
    handler = signal.getsignal(signal.SIGTERM)

    out, _ = run("--follow", "30")

    assert rounds == [1]
    assert "1 documents embedded" in out
    assert signal.getsignal(signal.SIGTERM) is handler


def stored_vector(document: int) -> np.ndarray:
    vector = RecallVector.objects.get(document_id=document)
    return decode([vector.vector], vector.dimension)[0]


def test_long_embeds_again_only_the_texts_longer_than_one_piece_as_a_write_embeds_them_now(
    endpoint, scope, embedding_server
):
    # The first 4,096 characters speak of the car, the rest of the dog: the whole text's vector (before the bound)
    # and its first pieces' (now) point different ways.
    long_text = ("I bought a new automobile. " * 160 + "The puppy sleeps all day. " * 400)[:12_000]
    add_memory(scope, {"long": long_text, "short": "Physician appointment Monday"})
    long = RecallDocument.objects.get(entry_version__entry_id="long").pk
    short = RecallDocument.objects.get(entry_version__entry_id="short").pk
    one_piece = write(scope, "one-piece", ("Tea at five. " * 100)[:PASSAGE_CHUNK_CHARS])  # a revision's text
    unembedded = write(scope, "unembedded", "Lunch at noon. " * 100)
    texts = {long: long_text, short: "Physician appointment Monday", one_piece: ("Tea at five. " * 100)[:1024]}
    # What recall_embed stored before issue 52: every text embedded whole.
    recall_vectors_store(
        model_id=endpoint.model_id, dimension=DIMENSION, vectors={pk: embed(text) for pk, text in texts.items()}
    )
    before = {pk: stored_vector(pk) for pk in texts}
    sent_before = len(requests_received(embedding_server))

    out, err = run("--long")

    assert (
        out
        == "endpoint:stub-embedder: 1 documents longer than 1,024 characters embedded again in "
        + (out.split(" in ")[-1])
    )
    assert "1/" in err
    pieces = [long_text[n * PASSAGE_CHUNK_CHARS : (n + 1) * PASSAGE_CHUNK_CHARS] for n in range(PASSAGE_CHUNKS)]
    assert [request["input"] for request in requests_received(embedding_server)[sent_before:]] == [pieces]
    mean = np.mean([embed(piece) for piece in pieces], axis=0)
    np.testing.assert_allclose(stored_vector(long), mean / np.linalg.norm(mean), atol=2e-3)
    assert not np.allclose(before[long], stored_vector(long), atol=0.05)
    for pk in (short, one_piece):  # one piece: embedded whole, before and now, so left as it was
        np.testing.assert_array_equal(stored_vector(pk), before[pk])
    assert not RecallVector.objects.filter(document_id=unembedded).exists()  # the plain pass's work, not --long's
    assert recall_vector_lag(model_id=endpoint.model_id, dimension=DIMENSION) == 1


def test_long_with_no_long_document_says_so_and_does_not_go_with_follow(endpoint, scope):
    write(scope, "short", "Tea at five")
    run()

    assert run("--long")[0] == "endpoint:stub-embedder: no document longer than 1,024 characters\n"
    with pytest.raises(CommandError, match="--long is one pass"):
        run("--long", "--follow", "5")
