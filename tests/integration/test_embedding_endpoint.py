"""The OpenAI-compatible embeddings provider against a real server process (tests/embedding_server.py)."""

import math
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from artifacts.recall.vectors.providers import EmbeddingUnavailable, EndpointProvider
from artifacts.recall.vectors.ranking import dense_rank, normalized
from tests.conftest import PROJECT_ROOT
from tests.embedding_server import (
    DIMENSION,
    MALFORMED,
    TRICKLES,
    requests_received,
    running_server,
    self_signed_certificate,
)
from tests.integration.conftest import closed_port


@pytest.fixture
def server(embedding_server):
    return embedding_server


def provider(base_url, **options):
    return EndpointProvider(url=base_url, model="stub-embedder", dimension=DIMENSION, **options)


def test_passages_come_back_one_unit_vector_each_in_order(server):
    vectors = provider(server).embed_passages(["my car is red", "the dog barks", "my car is red"])

    assert len(vectors) == 3
    assert all(len(vector) == DIMENSION for vector in vectors)
    assert math.isclose(sum(x * x for x in vectors[0]), 1.0, rel_tol=1e-9)
    assert vectors[0] == vectors[2] != vectors[1]


def test_a_paraphrase_is_the_nearest_document_to_its_query(server):
    documents = ["I bought a new automobile", "The puppy sleeps all day", "Physician appointment on Monday"]
    embedder = provider(server)
    matrix = [normalized(vector, DIMENSION) for vector in embedder.embed_passages(documents)]

    ranked = dense_rank(embedder.embed_query("purchased car"), np.stack(matrix), [10, 11, 12], 3)

    assert ranked[0][0] == 10


def test_the_prefixes_model_and_key_are_sent(server):
    embedder = provider(server, api_key="sk-test", query_prefix="query: ", passage_prefix="passage: ")
    before = len(requests_received(server))

    embedder.embed_passages(["first", "second"])
    embedder.embed_query("third")

    sent = requests_received(server)[before:]
    assert [request["input"] for request in sent] == [["passage: first", "passage: second"], ["query: third"]]
    assert {request["model"] for request in sent} == {"stub-embedder"}
    assert {request["authorization"] for request in sent} == {"Bearer sk-test"}


def test_the_input_type_is_sent_only_when_asked_for(server):
    before = len(requests_received(server))

    provider(server, input_type=True).embed_passages(["first"])
    provider(server, input_type=True).embed_query("second")
    provider(server).embed_query("third")

    sent = requests_received(server)[before:]
    assert [request.get("input_type") for request in sent] == ["passage", "query", None]
    assert [request["input"] for request in sent] == [["first"], ["second"], ["third"]]


def test_passages_are_sent_in_batches_of_the_batch_size(server):
    before = len(requests_received(server))

    vectors = provider(server, batch_size=2).embed_passages([f"text {i}" for i in range(5)])

    assert len(vectors) == 5
    assert [len(request["input"]) for request in requests_received(server)[before:]] == [2, 2, 1]


def test_a_slow_server_is_unavailable_once_the_timeout_runs_out():
    with (
        running_server("--delay", "5") as base_url,
        pytest.raises(EmbeddingUnavailable, match="could not be reached: TimeoutError"),
    ):
        provider(base_url, timeout=0.3).embed_query("hello")


def test_a_server_dripping_its_reply_is_cut_off_at_the_timeout():
    with (
        running_server("--drip", "0.5") as base_url,
        pytest.raises(EmbeddingUnavailable, match="could not be reached: TimeoutError"),
    ):
        provider(base_url, timeout=1.0).embed_query("hello")


def _outcome_within(call, seconds: float) -> BaseException | object:
    """What ``call()`` returned or raised, run on a thread: a call still running after ``seconds`` fails the test
    rather than hang it (the bounds are generous, a loaded machine: bounds, not benchmarks)."""
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=run, daemon=True)
    caller.start()
    caller.join(seconds)
    assert not caller.is_alive(), "the call outlived its timeout"
    return outcome[0]


@pytest.mark.parametrize("trickle", TRICKLES)
def test_a_server_trickling_its_headers_or_a_chunk_size_is_cut_off_at_the_timeout(trickle):
    # Each byte comes well inside any one read's timeout: only a deadline for the whole exchange ends the call (the
    # server's reply is endless).
    with running_server("--trickle", trickle, "--drip", "0.1") as base_url:
        outcome = _outcome_within(lambda: provider(base_url, timeout=0.5).embed_query("hello"), 0.5 + 2)
    assert isinstance(outcome, EmbeddingUnavailable)
    assert "could not be reached: TimeoutError" in str(outcome)


@pytest.fixture
def certificate(tmp_path):
    return self_signed_certificate(tmp_path)


def test_an_https_endpoint_with_a_trusted_certificate_answers(certificate, monkeypatch):
    # An operator's own CA is trusted the standard way (SSL_CERT_FILE, read when the provider is made).
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    with running_server(tls=certificate) as base_url:
        assert base_url.startswith("https://")
        vectors = provider(base_url).embed_passages(["a car", "a dog"])
    assert [len(vector) for vector in vectors] == [DIMENSION, DIMENSION]


def test_an_https_endpoint_whose_certificate_is_not_trusted_is_unavailable(certificate):
    with (
        running_server(tls=certificate) as base_url,
        pytest.raises(EmbeddingUnavailable, match="could not be reached: SSLCertVerificationError"),
    ):
        provider(base_url).embed_query("hello")


@pytest.mark.parametrize("trickle", TRICKLES)
def test_an_https_server_trickling_its_reply_is_cut_off_at_the_timeout(trickle, certificate, monkeypatch):
    # The same deadline through TLS: the SSL socket's reads are bounded as the plain socket's are.
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    with running_server("--trickle", trickle, "--drip", "0.1", tls=certificate) as base_url:
        outcome = _outcome_within(lambda: provider(base_url, timeout=0.5).embed_query("hello"), 0.5 + 2)
    assert isinstance(outcome, EmbeddingUnavailable)
    assert "could not be reached: TimeoutError" in str(outcome)


@pytest.mark.parametrize("kind", MALFORMED)
def test_a_malformed_answer_is_unavailable_never_stored(kind):
    with running_server("--malformed", kind) as base_url, pytest.raises(EmbeddingUnavailable):
        provider(base_url).embed_passages(["one text", "another text"])


def test_a_server_of_another_dimension_is_unavailable(server):
    with pytest.raises(EmbeddingUnavailable, match="not a list of 32 numbers"):
        EndpointProvider(url=server, model="stub-embedder", dimension=32).embed_query("hello")


def test_a_name_is_resolved_and_its_addresses_tried_in_turn(server, monkeypatch):
    # "localhost" may resolve to ::1 first, where nothing listens: the next address answers.
    real = socket.getaddrinfo
    asked: list[str] = []

    def resolver(host, *args, **kwargs):
        asked.append(host)
        if host == "embeddings.test":
            return [*real("::1", *args, **kwargs), *real("127.0.0.1", *args, **kwargs)]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    vector = provider(server.replace("127.0.0.1", "embeddings.test"), timeout=5).embed_query("hello")
    assert len(vector) == DIMENSION
    assert "embeddings.test" in asked


def test_a_resolved_address_is_connected_to_whole_with_its_ipv6_scope(monkeypatch):
    # A link-local IPv6 address is only reachable through its interface: the scope id the resolver gave must reach
    # connect() (a second lookup of the bare address would drop it).
    from artifacts.recall.vectors import deadline_http

    link_local = ("fe80::1", 9, 0, 1)
    resolved = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", link_local)]
    monkeypatch.setattr(deadline_http, "_addresses", lambda host, port, deadline: resolved)
    connected: list[tuple] = []

    def refused(sock, address):
        connected.append(address)
        raise ConnectionRefusedError("nothing listens in this test")

    monkeypatch.setattr(socket.socket, "connect", refused)
    with pytest.raises(EmbeddingUnavailable, match="could not be reached: ConnectionRefusedError"):
        provider("http://embeddings.test:9/v1", timeout=5).embed_query("hello")
    assert connected == [link_local]


def test_a_resolver_that_never_answers_is_unavailable_at_the_timeout(monkeypatch):
    # The system resolver retries for seconds and cannot be interrupted: the lookup is waited for only until the
    # exchange's deadline (the hung lookup finishes on its own, in the background).
    real = socket.getaddrinfo

    def hanging(host, *args, **kwargs):
        if host == "resolver-hangs.test":
            time.sleep(3)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    started = time.monotonic()
    with pytest.raises(EmbeddingUnavailable, match="could not be reached: TimeoutError"):
        provider("http://resolver-hangs.test:9/v1", timeout=0.5).embed_query("hello")
    assert time.monotonic() - started < 0.5 + 1.5, "the call waited for the resolver past its timeout"


HANGING_RESOLVER_PROCESS = """
import socket, time
from artifacts.recall.vectors.providers import EmbeddingUnavailable, EndpointProvider
socket.getaddrinfo = lambda *args, **kwargs: time.sleep(3600)
try:
    EndpointProvider(url="http://resolver-hangs.test:9/v1", model="m", dimension=4, timeout=0.3).embed_query("x")
except EmbeddingUnavailable as exc:
    print(exc)
"""


def test_a_process_whose_resolver_hangs_still_exits_once_it_is_done():
    # The hung lookup's thread outlives the call: it must not hold the interpreter's exit (a worker's restart).
    completed = subprocess.run(
        [sys.executable, "-c", HANGING_RESOLVER_PROCESS],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=5,  # TimeoutExpired: the process waited for the resolver instead of exiting
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "the embeddings endpoint could not be reached: TimeoutError"


def test_a_closed_port_is_unavailable():
    with pytest.raises(EmbeddingUnavailable, match="could not be reached"):
        provider(f"http://127.0.0.1:{closed_port()}/v1", timeout=2).embed_query("hello")
