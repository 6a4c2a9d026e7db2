"""Every identifier a tool takes is bounded in its schema by the server's own limit: an over-long one is a coded tool
error answered before any request is sent (through the MCP SDK's own client, in process, as a host calls it)."""

import json

import httpx
import pytest

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

import anyio  # noqa: E402  (after the skip: anyio comes with mcp)
from mcp import Client  # noqa: E402
from powercontext_client import PowerContextClient  # noqa: E402
from powercontext_mcp.rendering import citation_uri  # noqa: E402
from powercontext_mcp.server import (  # noqa: E402
    CONFLICT_KEY_MAX_CHARACTERS,
    IDENTIFIER_MAX_CHARACTERS,
    build_server,
)

from vocabulary.limits import MAX_CONFLICT_KEY_CHARACTERS, MAX_IDENTIFIER_CHARACTERS  # noqa: E402

LONG = "s" * (MAX_IDENTIFIER_CHARACTERS + 1)
AT_LIMIT = "s" * MAX_IDENTIFIER_CHARACTERS
READ = {"scope_id": "project:demo", "family": "memory", "artifact_id": "memory", "revision": 1}
ENTRY = {"entry_id": "entry-1", "entry_version": "entry-1-v1"}
NOT_FOUND = {"error": {"code": "not_found", "message": "not found", "fields": []}}


def calls(tool: str, arguments: dict) -> tuple[dict, list[httpx.Request]]:
    """The tool's result (its wire form) and every request it sent to PowerContext (each answered 404)."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(404, json=NOT_FOUND)

    async def run():
        transport = httpx.MockTransport(answer)
        with PowerContextClient("http://testserver", "pc_" + "k" * 40, transport=transport) as direct:
            async with Client(build_server(direct, default_scope="project:demo")) as client:
                if tool == "resource":
                    try:
                        await client.read_resource(arguments["uri"])
                    except Exception as exc:  # the SDK raises a resource error as the server's answer
                        return {"isError": True, "text": str(exc)}
                    return {"isError": False, "text": ""}
                result = await client.call_tool(tool, arguments)
                return {
                    "isError": result.is_error,
                    "text": "".join(block.text for block in result.content),
                    "structured": result.structured_content,
                }

    return anyio.run(run), sent


def test_the_bounds_are_the_servers():
    assert IDENTIFIER_MAX_CHARACTERS == MAX_IDENTIFIER_CHARACTERS
    assert CONFLICT_KEY_MAX_CHARACTERS == MAX_CONFLICT_KEY_CHARACTERS


OVER_LONG = [
    pytest.param("prepare_context", {"query": "x", "scope_id": LONG}, id="prepare-scope"),
    pytest.param("search_memories", {"query": "x", "scope_id": LONG}, id="search-scope"),
    pytest.param("remember", {"entry_id": "e", "body": "x", "scope_id": LONG}, id="remember-scope"),
    pytest.param("remember", {"entry_id": LONG, "body": "x"}, id="remember-entry"),
    pytest.param("remember", {"entry_id": "e", "body": "x", "artifact_id": LONG}, id="remember-artifact"),
    pytest.param("remember", {"entry_id": "e", "body": "x", "conflict_key": LONG}, id="remember-conflict-key"),
    pytest.param("read_cited", READ | {"scope_id": LONG}, id="read-scope"),
    pytest.param("read_cited", READ | {"family": LONG}, id="read-family"),
    pytest.param("read_cited", READ | {"artifact_id": LONG}, id="read-artifact"),
    pytest.param("read_cited", READ | ENTRY | {"entry_id": LONG}, id="read-entry"),
    pytest.param("read_cited", READ | ENTRY | {"entry_version": LONG}, id="read-entry-version"),
    pytest.param("list_scopes", {"after": LONG}, id="list-after"),
]


@pytest.mark.parametrize(("tool", "arguments"), OVER_LONG)
def test_an_over_long_identifier_is_a_coded_tool_error_and_no_request(tool, arguments):
    result, sent = calls(tool, arguments)
    assert result["isError"]
    assert result["structured"]["error"]["code"] == "invalid_request"
    assert result["text"].startswith("invalid_request: ")
    assert sent == []


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        pytest.param("prepare_context", {"query": "x", "scope_id": AT_LIMIT}, id="prepare-scope"),
        pytest.param("search_memories", {"query": "x", "scope_id": AT_LIMIT}, id="search-scope"),
        pytest.param("read_cited", READ | ENTRY | {"entry_id": AT_LIMIT, "entry_version": AT_LIMIT}, id="read-entry"),
        pytest.param("list_scopes", {"after": AT_LIMIT}, id="list-after"),
    ],
)
def test_an_identifier_at_the_limit_is_sent(tool, arguments):
    result, sent = calls(tool, arguments)
    assert len(sent) == 1
    assert not result["isError"] or result["structured"]["error"]["code"] == "not_found"


def test_a_pasted_citation_with_an_over_long_identifier_is_refused_before_it_is_sent():
    pasted = f'Scope: {json.dumps(LONG)}\nArtifact: family="memory", id="memory", revision=1'
    result, sent = calls("resolve_citation", {"text": pasted})
    assert result["isError"] and result["structured"]["error"]["code"] == "invalid_request"
    assert f"scope_id is longer than {MAX_IDENTIFIER_CHARACTERS} characters" in result["text"]
    assert sent == []


def test_a_resource_uri_with_an_over_long_identifier_is_refused_before_it_is_sent():
    from powercontext_client import Citation

    uri = citation_uri(Citation(scope_id="project:demo", family="memory", artifact_id=LONG, revision=1))
    result, sent = calls("resource", {"uri": uri})
    assert result["isError"] and f"artifact_id is longer than {MAX_IDENTIFIER_CHARACTERS} characters" in result["text"]
    assert sent == []
