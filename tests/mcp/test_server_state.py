"""What ``build_server`` registers, through the MCP SDK's own client as a host calls it: each server built in one
process calls its own client with its own default scope (the tools are module-level functions that ``build_server``
binds to a server's state), and the resource templates are listed as hosts know them. The tools' schemas are held
by tests/integration/test_mcp_server.py's snapshot."""

import json

import httpx
import pytest

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

import anyio  # noqa: E402  (after the skip: anyio comes with mcp)
from mcp import Client  # noqa: E402
from powercontext_client import PowerContextClient  # noqa: E402
from powercontext_mcp.server import build_server  # noqa: E402

KEY = "pc_" + "k" * 40
NOT_FOUND = {"error": {"code": "not_found", "message": "not found", "fields": []}}


def test_two_servers_in_one_process_keep_their_own_client_and_default_scope():
    sent: list[tuple[str, str]] = []

    def answering(host: str) -> httpx.MockTransport:
        def answer(request: httpx.Request) -> httpx.Response:
            sent.append((host, json.loads(request.content)["scope_id"]))
            return httpx.Response(404, json=NOT_FOUND)

        return httpx.MockTransport(answer)

    async def run() -> list[bool]:
        with (
            PowerContextClient("http://one", KEY, transport=answering("one")) as one,
            PowerContextClient("http://two", KEY, transport=answering("two")) as two,
        ):
            async with (
                Client(build_server(one, default_scope="project:one")) as first,
                Client(build_server(two, default_scope="project:two")) as second,
            ):
                results = [
                    await first.call_tool("search_memories", {"query": "release"}),
                    await second.call_tool("search_memories", {"query": "release"}),
                    await first.call_tool("search_memories", {"query": "release", "scope_id": "project:named"}),
                ]
        return [result.is_error for result in results]

    assert anyio.run(run) == [True, True, True]
    assert sent == [("one", "project:one"), ("two", "project:two"), ("one", "project:named")]


def test_the_resource_templates_are_listed_as_hosts_know_them():
    async def run():
        transport = httpx.MockTransport(lambda request: httpx.Response(404, json=NOT_FOUND))
        with PowerContextClient("http://testserver", KEY, transport=transport) as direct:
            async with Client(build_server(direct)) as client:
                return (await client.list_resource_templates()).resource_templates

    listed = [template.model_dump(mode="json", by_alias=True, exclude_none=True) for template in anyio.run(run)]
    prefix = "powercontext://scope/{scope_id}/"
    assert listed == [
        {
            "name": "cited-revision",
            "uriTemplate": prefix + "{family}/{artifact_id}/revision/{revision}",
            "description": "One exact revision of an artifact (percent-encode each identity): its stored body.",
            "mimeType": "text/plain",
        },
        {
            "name": "cited-entry-version",
            "uriTemplate": prefix + "memory/{artifact_id}/revision/{revision}/entry/{entry_id}/version/{entry_version}",
            "description": "One memory entry version live at an exact revision: its stored body.",
            "mimeType": "text/plain",
        },
    ]
