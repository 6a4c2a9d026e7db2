"""The client reads its own writes (docs/scaling.md §11): the consistency token of its last write answered goes
with its next prepare, per client; a server that sends none leaves prepares as they were."""

import httpx
import pytest
from powercontext_client import PowerContextClient
from powercontext_client.client import CONSISTENCY_TOKEN_HEADER

PREPARED = {"schema": "powercontext.prepared-context.v1", "status": "empty", "content": None, "content_bytes": 0}
WRITTEN = {
    "citation": {"scope_id": "project:demo", "family": "experience", "artifact_id": "e", "revision": 1},
    "content_sha256": "0" * 64,
}


class Server:
    """Answers writes with the next token of ``tokens`` (None: without one) and records the prepares' tokens."""

    def __init__(self, *tokens):
        self.tokens = list(tokens)
        self.sent: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/context/prepare":
            self.sent.append(request.headers.get(CONSISTENCY_TOKEN_HEADER))
            return httpx.Response(200, json=PREPARED)
        if request.url.path == "/v1/experiences/revisions/fail":
            return httpx.Response(409, json={"error": {"code": "conflict", "message": "no", "fields": []}})
        token = self.tokens.pop(0)
        return httpx.Response(201, json=WRITTEN, headers={CONSISTENCY_TOKEN_HEADER: token} if token else {})


def client_for(server: Server) -> PowerContextClient:
    return PowerContextClient("http://powercontext.test", "k" * 32, transport=httpx.MockTransport(server))


def test_each_prepare_carries_the_token_of_the_last_write_before_it():
    server = Server("0/16B3748", "0/16B9000")
    client = client_for(server)

    client.prepare_context("project:demo", "q")
    client.record_experience_revision("project:demo", "e", "Lesson one")
    client.prepare_context("project:demo", "q")
    client.prepare_context("project:demo", "q")
    client.record_experience_revision("project:demo", "e", "Lesson two")
    client.prepare_context("project:demo", "q")

    assert server.sent == [None, "0/16B3748", "0/16B3748", "0/16B9000"]
    assert client.last_consistency_token == "0/16B9000"


def test_a_write_answered_without_a_token_keeps_the_last_one_and_clients_do_not_share_theirs():
    server = Server("0/16B3748", None)
    client, other = client_for(server), client_for(server)

    client.record_experience_revision("project:demo", "e", "Lesson one")
    client.record_experience_revision("project:demo", "e", "Lesson two")  # a server without the setting
    client.prepare_context("project:demo", "q")
    other.prepare_context("project:demo", "q")

    assert server.sent == ["0/16B3748", None]


def test_a_refused_write_leaves_the_token_as_it_was():
    server = Server()
    client = client_for(server)

    with pytest.raises(Exception):  # noqa: B017,PT011 - the error mapping has its own tests
        client._send("POST", "/v1/experiences/revisions/fail", body={})
    client.prepare_context("project:demo", "q")

    assert server.sent == [None]
