"""``prepare_context`` prepares within the byte budget the host asked for (issue 51, item 7d), through the MCP SDK's
own client, in process, against PowerContext's WSGI app.

The scope holds more than the default budget (8000 bytes) would take. A budget below it and one above it each give
exactly the content the API prepares for the same request with that ``max_bytes``, and the request PowerContext
received carries it: a tool that dropped ``max_bytes`` (so PowerContext used its default) would return the 8000-byte
content for both.
"""

import io
import json

import httpx
import pytest

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

import anyio  # noqa: E402  (after the skip: anyio comes with mcp)
from mcp import Client  # noqa: E402
from powercontext_client import PowerContextClient  # noqa: E402
from powercontext_mcp.server import build_server  # noqa: E402

from artifacts import services  # noqa: E402
from artifacts.models import Scope  # noqa: E402
from tests.api.factories import ok_json, prepare  # noqa: E402
from tests.mcp.test_remember import served_once  # noqa: E402
from vocabulary.limits import MAX_BYTES_DEFAULT  # noqa: E402

# The tools run in worker threads with their own database connections: the rows must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "proj"
QUERY = "how do we roll out the budget release"
ENTRY_BYTES = 1900


@pytest.fixture
def api_key():
    scope = Scope.objects.create(scope_id=SCOPE)
    filler = " ".join(f"step{i} of the budget release rollout" for i in range(60))
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        author="tests",
        writes=[
            services.EntryVersionWrite(f"entry-{n}", None, f"Rollout {n}: {filler}"[:ENTRY_BYTES]) for n in range(6)
        ],
    )
    for n in range(2):
        services.experience_revision_create(
            scope=scope, artifact_id=f"lesson-{n}", body=f"Lesson {n}: {filler}"[:ENTRY_BYTES], author="tests"
        )
    _, key = services.api_key_create(name="agent", read_scopes=[scope])
    return key


def prepared_through_mcp(api_key: str, arguments: dict) -> tuple[dict, list[dict]]:
    """The tool's structured result, and the body of every prepare request PowerContext received."""
    bodies: list[dict] = []

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/v1/context/prepare":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            raw = environ["wsgi.input"].read(length)
            bodies.append(json.loads(raw))
            environ["wsgi.input"] = io.BytesIO(raw)  # read again by Django below
        return served_once(environ, start_response)

    async def run():
        transport = httpx.WSGITransport(app=app)
        with PowerContextClient("http://testserver", api_key, transport=transport) as direct:
            async with Client(build_server(direct, default_scope=SCOPE)) as client:
                result = await client.call_tool("prepare_context", arguments)
                assert not result.is_error, result.content
                return result.structured_content

    return anyio.run(run), bodies


def api_content(client, api_key: str, max_bytes: int) -> dict:
    body = {"scope_id": SCOPE, "query": QUERY, "max_bytes": max_bytes, "assembly": {}}
    return ok_json(prepare(client, api_key, body))


@pytest.mark.parametrize("max_bytes", [1024, 16000], ids=["below-the-default", "above-the-default"])
def test_prepare_context_prepares_within_the_budget_it_was_given(client, api_key, max_bytes):
    default = api_content(client, api_key, MAX_BYTES_DEFAULT)
    expected = api_content(client, api_key, max_bytes)
    assert expected["content"] != default["content"], "the fixture fills more than either budget would allow"

    out, bodies = prepared_through_mcp(api_key, {"query": QUERY, "max_bytes": max_bytes})

    assert [body.get("max_bytes") for body in bodies] == [max_bytes]
    assert (out["status"], out["content"], out["content_bytes"]) == (
        expected["status"],
        expected["content"],
        expected["content_bytes"],
    )
    if max_bytes < MAX_BYTES_DEFAULT:
        assert out["content_bytes"] <= max_bytes
    else:
        assert out["content_bytes"] > MAX_BYTES_DEFAULT


def test_without_max_bytes_the_default_budget_is_used(client, api_key):
    out, bodies = prepared_through_mcp(api_key, {"query": QUERY})
    assert [body.get("max_bytes", MAX_BYTES_DEFAULT) for body in bodies] == [MAX_BYTES_DEFAULT]
    assert out["content"] == api_content(client, api_key, MAX_BYTES_DEFAULT)["content"]
