"""``powercontext-mcp`` as real processes: the MCP SDK's own client starts it over stdio and over streamable HTTP,
against gunicorn serving PowerContext on the run's engine (SQLite: a migrated file; PostgreSQL: the test database),
lists its tools, calls each, and checks a read's exact bytes against the citation a prepare returned.
"""

import json
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

mcp = pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

import anyio  # noqa: E402  (after the skip: anyio comes with mcp)
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from powercontext_client import Citation, PowerContextClient  # noqa: E402
from powercontext_mcp import citation_uri  # noqa: E402

from tests import waits  # noqa: E402
from tests.conftest import GOLDEN, GOLDEN_KEY, golden_json  # noqa: E402
from tests.integration.conftest import (  # noqa: E402
    BIN,
    closed_port,
    environment,
    served,
)

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "project:demo"
SNAPSHOT = Path(__file__).with_name("mcp_tool_schemas.json")
TOOLS = ["list_scopes", "prepare_context", "read_cited", "remember", "resolve_citation", "search_memories"]
HTTP_START_SECONDS = 60
DEFAULTS = golden_json("defaults-en.request.json")


@pytest.fixture
def powercontext(tmp_path):
    """gunicorn serving the English golden fixture on this run's engine; yields its base URL."""
    with served(tmp_path, GOLDEN / "fixture-en.json") as base:
        yield base


def mcp_environment(tmp: Path, base: str, **extra: str) -> dict:
    """The server's environment: this checkout's sources first, PowerContext's URL and the golden key."""
    return environment(tmp, **({"POWERCONTEXT_URL": base, "POWERCONTEXT_API_KEY": GOLDEN_KEY} | extra))


@asynccontextmanager
async def stdio_session(tmp: Path, base: str, errlog: Path, *args: str, **extra: str):
    """The SDK client over stdio to a ``powercontext-mcp ARGS…`` it starts; the server's stderr goes to ``errlog``."""
    command = str(BIN / "powercontext-mcp")
    params = StdioServerParameters(command=command, args=list(args), env=mcp_environment(tmp, base, **extra))
    with errlog.open("w") as log:
        async with Client(stdio_client(params, errlog=log)) as client:
            yield client


def texts(result) -> str:
    return "".join(block.text for block in result.content)


async def exercise(client, base: str) -> list:
    """Lists the tools and calls each (successes and refusals); returns every result, for the key check."""
    results = []
    listed = await client.list_tools()
    assert sorted(tool.name for tool in listed.tools) == TOOLS

    scopes = await client.call_tool("list_scopes", {})
    assert not scopes.is_error, texts(scopes)
    assert scopes.structured_content == {
        "scopes": [
            {
                "scope_id": SCOPE,
                "title": "Demo project",
                "authority": "user_default",
                "can_write": True,
                "references": [],
                "all_references_readable": True,
            }
        ],
        "next_after": None,
    }
    assert texts(scopes) == '"project:demo": read+write, title "Demo project"'
    results.append(scopes)

    prepared = await client.call_tool("prepare_context", {"query": DEFAULTS["query"], "scope_id": SCOPE})
    expected = golden_json("defaults-en.response.json")
    assert not prepared.is_error
    assert texts(prepared) == expected["content"]  # the prepared text, unchanged
    assert prepared.structured_content == {
        "status": "ready",
        "content": expected["content"],
        "content_bytes": expected["content_bytes"],
        "unavailable": None,
    }
    results.append(prepared)

    # The first entry's citation lines, pasted as an agent would, resolve to the exact cited bytes.
    lines = [line for line in expected["content"].splitlines() if line.strip().startswith(("Scope:", "Artifact:"))]
    entry = [line for line in expected["content"].splitlines() if line.strip().startswith("Entry:")][0]
    pasted = "\n".join([lines[0], lines[1], entry])
    resolved = await client.call_tool("resolve_citation", {"text": pasted})
    with PowerContextClient(base, GOLDEN_KEY) as direct:
        exact = direct.read_exact_entry_version(SCOPE, "memory", 3, "entry-1", "entry-1-v2")
    assert texts(resolved) == exact.entry.body
    assert exact.entry.body == "After changing OpenAPI, regenerate the client and run contract tests."
    assert resolved.structured_content["citation"] == {
        "scope_id": SCOPE,
        "family": "memory",
        "artifact_id": "memory",
        "revision": 3,
        "entry_id": "entry-1",
        "entry_version": "entry-1-v2",
    }
    assert resolved.structured_content["content_sha256"] == exact.entry.content_sha256
    results.append(resolved)

    # A search's hit: the same citation, its body quoted inside the same notice and markers; pasted, it resolves.
    searched = await client.call_tool(
        "search_memories",
        {"query": "regenerate the client after changing OpenAPI", "scope_id": SCOPE, "families": ["memory"]},
    )
    assert not searched.is_error, texts(searched)
    (hit,) = searched.structured_content["hits"]
    assert hit["citation"] == resolved.structured_content["citation"] and hit["body"] == exact.entry.body
    assert hit["rank"] == 1 and hit["scores"]["ranked_by"] in ("bm25", "fused", "learned")
    notice = expected["content"].split("\n\nBEGIN_POWERCONTEXT_PREPARED_TEXT_V1\n", 1)[0].split("\n\n", 1)[1]
    assert f"\n\n{notice}\n\n" in texts(searched) and texts(searched).endswith("\nEND_POWERCONTEXT_PREPARED_TEXT_V1")
    assert f"\n>     {exact.entry.body}\n" in texts(searched)
    from_search = await client.call_tool("resolve_citation", {"text": texts(searched)})
    assert texts(from_search) == exact.entry.body
    results.append(searched)

    experience = await client.call_tool(
        "read_cited", {"scope_id": SCOPE, "family": "experience", "artifact_id": "experience-1", "revision": 1}
    )
    assert texts(experience).startswith("Situation: The HTTP API contract changed.")
    results.append(experience)

    # Removed in revision 3: that exact version is not there, and the head is never read instead.
    gone = await client.call_tool(
        "read_cited",
        {
            "scope_id": SCOPE,
            "family": "memory",
            "artifact_id": "memory",
            "revision": 3,
            "entry_id": "entry-2",
            "entry_version": "entry-2-v1",
        },
    )
    assert gone.is_error and texts(gone).startswith("not_found: ")
    assert gone.structured_content["error"]["code"] == "not_found"
    results.append(gone)

    # The resource template: the same exact bytes under a URI a host can attach.
    uri = "powercontext://scope/project%3Ademo/memory/memory/revision/3/entry/entry-1/version/entry-1-v2"
    resource = await client.read_resource(uri)
    assert [content.text for content in resource.contents] == [exact.entry.body]

    remembered = await client.call_tool(
        "remember", {"scope_id": SCOPE, "entry_id": "entry-mcp", "body": "Remembered through MCP."}
    )
    assert not remembered.is_error, texts(remembered)
    citation = remembered.structured_content["citation"]
    assert (citation["entry_id"], citation["revision"]) == ("entry-mcp", 4)
    results.append(remembered)
    again = await client.call_tool(
        "remember", {"scope_id": SCOPE, "entry_id": "entry-mcp", "body": "Remembered through MCP."}
    )
    assert again.structured_content == remembered.structured_content  # the retry was written once
    read_back = await client.call_tool("resolve_citation", {"text": texts(remembered).split("\n", 1)[1]})
    assert texts(read_back) == "Remembered through MCP."

    stale = await client.call_tool(
        "remember",
        {"scope_id": SCOPE, "entry_id": "entry-mcp", "body": "Late.", "update": True, "expected_head_revision": 3},
    )
    assert stale.is_error and stale.structured_content["error"]["code"] == "conflict"
    results.append(stale)
    updated = await client.call_tool(
        "remember",
        {"scope_id": SCOPE, "entry_id": "entry-mcp", "body": "Updated.", "update": True, "expected_head_revision": 4},
    )
    assert updated.structured_content["citation"]["revision"] == 5
    results.append(updated)

    # Any identity works in a resource URI (the SDK's own encoding), ".." and quotes included.
    odd = 'entry "mcp"/../x'
    written = await client.call_tool("remember", {"scope_id": SCOPE, "entry_id": odd, "body": "Odd id."})
    citation = Citation.model_validate(written.structured_content["citation"])
    assert citation.entry_id == odd
    attached = await client.read_resource(citation_uri(citation))
    assert [content.text for content in attached.contents] == ["Odd id."]

    # A conflict slot goes with the version as given, and reads back with it.
    slot = "preference:automation-language"
    slotted = await client.call_tool(
        "remember", {"scope_id": SCOPE, "entry_id": "entry-slot", "body": "Use Python.", "conflict_key": slot}
    )
    assert not slotted.is_error, texts(slotted)
    cited = slotted.structured_content["citation"]
    exact = await client.call_tool(
        "read_cited",
        {
            "scope_id": SCOPE,
            "family": "memory",
            "artifact_id": "memory",
            "revision": cited["revision"],
            "entry_id": "entry-slot",
            "entry_version": cited["entry_version"],
        },
    )
    assert exact.structured_content["conflict_key"] == slot and texts(exact) == "Use Python."
    whole = await client.call_tool(
        "read_cited", {"scope_id": SCOPE, "family": "memory", "artifact_id": "memory", "revision": cited["revision"]}
    )
    slots = {e["id"]: e["conflict_key"] for e in whole.structured_content["entries"]}
    assert slots["entry-slot"] == slot and slots["entry-mcp"] is None
    results.append(slotted)
    bad_slot = await client.call_tool(
        "remember", {"scope_id": SCOPE, "entry_id": "entry-bad-slot", "body": "x", "conflict_key": "a\nb"}
    )
    assert bad_slot.is_error and bad_slot.structured_content["error"]["code"] == "invalid_request"
    results.append(bad_slot)

    # Arguments the tool's schema refuses are answered by the SDK before the tool runs: coded all the same.
    refused = await client.call_tool(
        "read_cited", {"scope_id": SCOPE, "family": "memory", "artifact_id": "memory", "revision": 0}
    )
    assert refused.is_error and refused.structured_content["error"]["code"] == "invalid_request"
    assert texts(refused).startswith("invalid_request: ")
    results.append(refused)

    unparsable = await client.call_tool("resolve_citation", {"text": "Artifact: family=memory"})
    assert unparsable.is_error and texts(unparsable).startswith("invalid_request: ")
    results.append(unparsable)
    return results


def assert_key_absent(results: list, *logs: Path) -> None:
    """The key is in no result and no log line (the logs are at DEBUG: every request is logged)."""
    for result in results:
        assert GOLDEN_KEY not in result.model_dump_json()
    for log in logs:
        text = log.read_text()
        assert "/v1/" in text and GOLDEN_KEY not in text  # requests were logged, the key was not


def test_stdio_server_prepares_reads_exactly_and_writes(powercontext, tmp_path):
    async def scenario():
        async with stdio_session(tmp_path, powercontext, tmp_path / "stderr.log", "--log-level", "DEBUG") as client:
            return await exercise(client, powercontext)

    assert_key_absent(anyio.run(scenario), tmp_path / "stderr.log")


@pytest.fixture
def http_server(powercontext, tmp_path):
    """``powercontext-mcp --transport streamable-http`` on a free port; yields its endpoint once it listens."""
    port = closed_port()
    log = tmp_path / "mcp-http.log"
    command = [
        str(BIN / "powercontext-mcp"),
        "--transport",
        "streamable-http",
        "--port",
        str(port),
        "--log-level",
        "DEBUG",
    ]
    with log.open("w") as output:
        process = subprocess.Popen(
            command, env=mcp_environment(tmp_path, powercontext), stdout=output, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + HTTP_START_SECONDS
            while True:
                assert process.poll() is None, f"powercontext-mcp exited: {log.read_text()}"
                try:
                    import socket

                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail(f"powercontext-mcp not listening within {HTTP_START_SECONDS} s: {log.read_text()}")
                    time.sleep(0.2)
            yield f"http://127.0.0.1:{port}/mcp", log
        finally:
            waits.stop(process)


def test_streamable_http_server_prepares_reads_exactly_and_writes(powercontext, http_server):
    endpoint, log = http_server

    async def scenario():
        async with Client(endpoint) as client:
            return await exercise(client, powercontext)

    assert_key_absent(anyio.run(scenario), log)


def test_list_scopes_names_exactly_the_scopes_the_key_may_read_and_pages(tmp_path):
    fixture = tmp_path / "scopes.json"
    other_key = "pc_other_0123456789abcdef0123456789abcdef"
    scopes = [
        {"id": "org:shared", "title": "Shared", "references": [], "authority": "workspace_override"},
        {"id": "team:hidden", "title": "Hidden", "references": []},
        {"id": SCOPE, "title": "Demo project", "references": ["team:hidden", "org:shared"]},
    ]
    keys = [
        {
            "name": "demo-host",
            "key": GOLDEN_KEY,
            "grants": [
                {"scope": SCOPE, "read": True, "write": True},
                {"scope": "org:shared", "read": True, "write": False},
            ],
        },
        {"name": "other-host", "key": other_key, "grants": [{"scope": "team:hidden", "read": True, "write": False}]},
    ]
    fixture.write_text(json.dumps({"scopes": scopes, "api_keys": keys, "artifacts": []}))

    async def scenario(base):
        async with stdio_session(tmp_path, base, tmp_path / "stderr.log") as client:
            first = await client.call_tool("list_scopes", {"limit": 1})
            second = await client.call_tool("list_scopes", {"after": first.structured_content["next_after"]})
            refused = await client.call_tool("list_scopes", {"limit": 0})
            return first, second, refused

    with served(tmp_path, fixture) as base:
        first, second, refused = anyio.run(scenario, base)
    assert first.structured_content == {
        "scopes": [
            {
                "scope_id": "org:shared",
                "title": "Shared",
                "authority": "workspace_override",
                "can_write": False,
                "references": [],
                "all_references_readable": True,
            }
        ],
        "next_after": "org:shared",
    }
    assert texts(first) == (
        '"org:shared": read, title "Shared", authority workspace_override\n'
        'More: call list_scopes with after="org:shared".'
    )
    assert second.structured_content["scopes"] == [
        {
            "scope_id": SCOPE,
            "title": "Demo project",
            "authority": "user_default",
            "can_write": True,
            "references": ["org:shared"],
            "all_references_readable": False,
        }
    ]
    assert second.structured_content["next_after"] is None
    for result in (first, second):
        assert "team:hidden" not in result.model_dump_json()
    assert refused.is_error and refused.structured_content["error"]["code"] == "invalid_request"


def test_prepare_fails_open_when_powercontext_is_unreachable(tmp_path):
    nowhere = f"http://127.0.0.1:{closed_port()}"

    async def scenario():
        async with stdio_session(
            tmp_path, nowhere, tmp_path / "stderr.log", "--log-level", "DEBUG", POWERCONTEXT_SCOPE=SCOPE
        ) as client:
            prepared = await client.call_tool("prepare_context", {"query": "anything"})
            read = await client.call_tool(
                "read_cited", {"scope_id": SCOPE, "family": "memory", "artifact_id": "memory", "revision": 1}
            )
            return prepared, read

    prepared, read = anyio.run(scenario)
    assert not prepared.is_error
    assert prepared.structured_content["status"] == "empty"
    assert prepared.structured_content["content"] is None
    assert prepared.structured_content["unavailable"].startswith("PowerContext unavailable, no context prepared: ")
    assert texts(prepared) == prepared.structured_content["unavailable"]
    assert read.is_error and read.structured_content["error"]["code"] == "unreachable"  # reads never fail open
    assert_key_absent([prepared, read], tmp_path / "stderr.log")


def test_the_deprecated_variable_names_still_serve_for_one_release_with_a_logged_warning(powercontext, tmp_path):
    log = tmp_path / "stderr.log"
    env = environment(
        tmp_path, POWERCONTEXT_BASE_URL=powercontext, POWERCONTEXT_SCOPE_ID=SCOPE, POWERCONTEXT_API_KEY=GOLDEN_KEY
    )
    params = StdioServerParameters(command=str(BIN / "powercontext-mcp"), args=[], env=env)

    async def scenario():
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                return await client.call_tool("prepare_context", {"query": DEFAULTS["query"]})  # no scope_id

    prepared = anyio.run(scenario)
    assert texts(prepared) == golden_json("defaults-en.response.json")["content"]
    warnings = [line for line in log.read_text().splitlines() if "deprecated" in line]
    assert [line.split(": ", 1)[1] for line in warnings] == [
        "POWERCONTEXT_BASE_URL is deprecated: rename it to POWERCONTEXT_URL (the old name stops being read in the "
        "next release)",
        "POWERCONTEXT_SCOPE_ID is deprecated: rename it to POWERCONTEXT_SCOPE (the old name stops being read in the "
        "next release)",
    ]
    assert all(" WARNING powercontext_client.environment: " in line for line in warnings)


def test_a_refused_key_is_a_tool_error_naming_the_code_not_the_key(powercontext, tmp_path):
    wrong = "pc_wrong_0123456789abcdef0123456789abcdef"

    async def scenario():
        log = tmp_path / "stderr.log"
        async with stdio_session(
            tmp_path, powercontext, log, "--log-level", "DEBUG", POWERCONTEXT_API_KEY=wrong
        ) as client:
            return await client.call_tool("prepare_context", {"query": "anything", "scope_id": SCOPE})

    result = anyio.run(scenario)
    assert result.is_error and result.structured_content["error"]["code"] == "unauthenticated"
    log = (tmp_path / "stderr.log").read_text()
    assert "unauthenticated" in log
    assert wrong not in result.model_dump_json() and wrong not in log


def test_tool_schemas_match_the_committed_snapshot(tmp_path):
    async def scenario():
        async with stdio_session(tmp_path, f"http://127.0.0.1:{closed_port()}", tmp_path / "stderr.log") as client:
            return (await client.list_tools()).tools

    tools = anyio.run(scenario)
    listed = {
        tool.name: {
            "title": tool.title,
            "description": tool.description,
            "annotations": tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True),
            "inputSchema": tool.input_schema,
            "outputSchema": tool.output_schema,
        }
        for tool in sorted(tools, key=lambda tool: tool.name)
    }
    current = json.dumps(listed, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    assert current == SNAPSHOT.read_text(encoding="utf-8"), (
        f"the MCP tool schemas changed; if on purpose, write this to {SNAPSHOT.name}:\n{current}"
    )
