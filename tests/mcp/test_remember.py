"""``remember`` through the MCP SDK's own client, in process, against PowerContext's WSGI app: the same words
after the entry changed are written again (never a replay of an older write), and a retry is written once."""

from urllib.parse import parse_qsl

import httpx
import pytest

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

import anyio  # noqa: E402  (after the skip: anyio comes with mcp)
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.db import connections  # noqa: E402
from mcp import Client  # noqa: E402
from powercontext_client import PowerContextClient  # noqa: E402
from powercontext_mcp.server import build_server  # noqa: E402

from artifacts import services  # noqa: E402
from artifacts.models import MemoryEntryVersion, Scope  # noqa: E402
from vocabulary.limits import SCOPES_PAGE_DEFAULT  # noqa: E402

# The tools run in worker threads with their own database connections: the rows must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "proj"


@pytest.fixture
def api_key():
    scope = Scope.objects.create(scope_id=SCOPE)
    _, key = services.api_key_create(name="agent", read_scopes=[scope], write_scopes=[scope])
    return key


@pytest.fixture
def write_only_key():
    scope = Scope.objects.create(scope_id=SCOPE)
    _, key = services.api_key_create(name="writer", write_scopes=[scope])
    return key


def live_bodies(entry_id: str) -> list[str]:
    return list(
        MemoryEntryVersion.objects.filter(entry_id=entry_id, retired_in_revision__isnull=True).values_list(
            "body", flat=True
        )
    )


def served_once(environ, start_response):
    """PowerContext's WSGI app, closing this worker thread's connections after each request (none outlives it)."""
    try:
        return list(get_wsgi_application()(environ, start_response))
    finally:
        connections.close_all()


def remember_calls(api_key: str, calls: list[dict], sent: list[tuple[str, dict]] | None = None) -> list:
    """Each call of ``remember`` in turn, in one MCP session; returns the results.

    ``sent``, when given, receives the path and query parameters of every request the calls make.
    """

    def app(environ, start_response):
        if sent is not None:
            sent.append((environ["PATH_INFO"], dict(parse_qsl(environ["QUERY_STRING"]))))
        return served_once(environ, start_response)

    async def run() -> list:
        transport = httpx.WSGITransport(app=app)
        with PowerContextClient("http://testserver", api_key, transport=transport) as direct:
            async with Client(build_server(direct, default_scope=SCOPE)) as client:
                return [await client.call_tool("remember", {"entry_id": "lang"} | call) for call in calls]

    return anyio.run(run)


@pytest.mark.parametrize("key", ["api_key", "write_only_key"], ids=["read-write", "write-only"])
def test_the_same_words_after_a_change_are_written_again(request, key):
    # A write-only key sees no head: its calls never replay one another.
    python, go = "prefers Python", "prefers Go"
    calls = [{"body": python}] + [{"body": body, "update": True} for body in (go, python, go)]
    results = remember_calls(request.getfixturevalue(key), calls)
    assert not any(result.is_error for result in results), [result.content for result in results]
    assert [result.structured_content["citation"]["revision"] for result in results] == [1, 2, 3, 4]
    assert live_bodies("lang") == [go]
    assert MemoryEntryVersion.objects.filter(entry_id="lang").count() == 4


def test_a_create_after_the_entry_was_removed_is_written_again(api_key):
    first = remember_calls(api_key, [{"body": "prefers Python"}])[0]
    scope = Scope.objects.get(scope_id=SCOPE)
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        author="elsewhere",
        removals=["lang"],
    )
    again = remember_calls(api_key, [{"body": "prefers Python"}])[0]
    assert not again.is_error, again.content
    revisions = [result.structured_content["citation"]["revision"] for result in (first, again)]
    assert revisions == [1, 3]
    assert live_bodies("lang") == ["prefers Python"]


CREATE = {"body": "prefers Python"}
UPDATE = {"body": "prefers Go", "update": True}


@pytest.mark.parametrize("calls", [[CREATE, CREATE], [CREATE, UPDATE, UPDATE]], ids=["create", "update"])
def test_a_retry_on_the_same_head_is_written_once(api_key, calls):
    results = remember_calls(api_key, calls)
    written, retried = results[-2], results[-1]
    assert not retried.is_error, retried.content
    assert retried.structured_content == written.structured_content  # the same citation and key: a replay
    assert MemoryEntryVersion.objects.filter(entry_id="lang").count() == len(calls) - 1


def test_a_retry_after_other_entries_were_written_is_still_written_once(api_key):
    results = remember_calls(
        api_key, [{"body": "prefers Python"}, {"entry_id": "other", "body": "unrelated"}, {"body": "prefers Python"}]
    )
    assert results[2].structured_content == results[0].structured_content
    assert MemoryEntryVersion.objects.filter(entry_id="lang").count() == 1


@pytest.mark.parametrize("readable", [True, False], ids=["read-write", "write-only"])
def test_a_key_with_more_scopes_than_a_page_learns_whether_it_may_read_the_scope_in_one_request(readable):
    # A first write (no memory yet) asks whether the key may read the scope; the scope sorts after a full page of
    # the key's other scopes, where paging through the key's scopes would need a second request.
    others = Scope.objects.bulk_create(Scope(scope_id=f"a:{i:03d}") for i in range(SCOPES_PAGE_DEFAULT + 1))
    scope = Scope.objects.create(scope_id=SCOPE)
    _, key = services.api_key_create(
        name="many", read_scopes=others + ([scope] if readable else []), write_scopes=[scope]
    )
    sent = []

    first, again = remember_calls(key, [CREATE, CREATE], sent)

    assert not first.is_error, first.content
    if readable:  # the answer was right: a retry on the same head is a replay
        assert again.structured_content == first.structured_content
    else:  # each call of a key blind to the head is its own write: a create's retry is a conflict
        assert again.structured_content["error"]["code"] == "conflict"
    scope_requests = [query for path, query in sent if path == "/v1/scopes"]
    # One request per call that asked (the retry of a key that may read finds the memory's history instead).
    assert scope_requests == [{"scope_id": SCOPE, "limit": "1"}] * (1 if readable else 2)
