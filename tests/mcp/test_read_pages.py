"""``read_cited`` and the cited-revision resource through the MCP SDK's own client, in process, against
PowerContext's WSGI app: a memory revision's live entries come a page at a time, and following
``next_entries_after`` lists each exactly once, in entry-id order."""

import json

import httpx
import pytest

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

import anyio  # noqa: E402  (after the skip: anyio comes with mcp)
from mcp import Client  # noqa: E402
from powercontext_client import Citation, PowerContextClient  # noqa: E402
from powercontext_mcp.rendering import citation_uri  # noqa: E402
from powercontext_mcp.server import build_server  # noqa: E402

from artifacts import services  # noqa: E402
from artifacts.models import Scope  # noqa: E402
from tests.mcp.test_remember import served_once  # noqa: E402
from vocabulary.limits import REVISION_ENTRIES_PAGE_DEFAULT  # noqa: E402

# The tools run in worker threads with their own database connections: the rows must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "proj"
COUNT = REVISION_ENTRIES_PAGE_DEFAULT * 2 + 3
IDS = [f"entry-{i:03}" for i in range(COUNT)]
READ = {"scope_id": SCOPE, "family": "memory", "artifact_id": "memory", "revision": 1}


@pytest.fixture
def api_key():
    scope = Scope.objects.create(scope_id=SCOPE)
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        author="tests",
        writes=[services.EntryVersionWrite(entry_id, None, f"body of {entry_id}") for entry_id in IDS],
    )
    _, key = services.api_key_create(name="agent", read_scopes=[scope])
    return key


def session(api_key: str, steps):
    """``steps(client)`` in one MCP session over PowerContext's WSGI app; returns what it returns."""

    async def run():
        transport = httpx.WSGITransport(app=served_once)
        with PowerContextClient("http://testserver", api_key, transport=transport) as direct:
            async with Client(build_server(direct, default_scope=SCOPE)) as client:
                return await steps(client)

    return anyio.run(run)


def test_read_cited_pages_a_memory_revisions_entries_in_order_none_lost_or_repeated(api_key):
    async def steps(client):
        pages = [(await client.call_tool("read_cited", READ)).structured_content]
        while pages[-1]["next_entries_after"] is not None:
            arguments = READ | {"entries_after": pages[-1]["next_entries_after"]}
            pages.append((await client.call_tool("read_cited", arguments)).structured_content)
        return pages

    pages = session(api_key, steps)

    assert [len(page["entries"]) for page in pages] == [REVISION_ENTRIES_PAGE_DEFAULT] * 2 + [3]
    assert [e["id"] for page in pages for e in page["entries"]] == IDS
    assert [page["next_entries_after"] for page in pages] == [IDS[49], IDS[99], None]
    assert all(page["citation"]["revision"] == 1 for page in pages)


def test_the_cited_revision_resource_is_the_first_page_and_names_the_next(api_key):
    citation = Citation(scope_id=SCOPE, family="memory", artifact_id="memory", revision=1)

    async def steps(client):
        return await client.read_resource(citation_uri(citation))

    text = json.loads(session(api_key, steps).contents[0].text)

    assert [e["id"] for e in text["entries"]] == IDS[:REVISION_ENTRIES_PAGE_DEFAULT]
    assert text["next_entries_after"] == IDS[REVISION_ENTRIES_PAGE_DEFAULT - 1]


def test_entries_after_with_an_entry_citation_is_refused_before_it_is_sent(api_key):
    arguments = READ | {"entry_id": IDS[0], "entry_version": "v", "entries_after": IDS[0]}

    async def steps(client):
        return await client.call_tool("read_cited", arguments)

    result = session(api_key, steps)

    assert result.is_error and result.structured_content["error"]["code"] == "invalid_request"


def test_entries_after_on_another_family_is_the_apis_refusal(api_key):
    arguments = READ | {"family": "experience", "artifact_id": "lesson", "entries_after": IDS[0]}

    async def steps(client):
        return await client.call_tool("read_cited", arguments)

    result = session(api_key, steps)

    assert result.is_error and result.structured_content["error"]["code"] == "invalid_request"
    assert [f["path"] for f in result.structured_content["error"]["fields"]] == ["entries_after"]
