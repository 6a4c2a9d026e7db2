"""The client's reads of a memory revision's entries, a page at a time (GET /v1/artifacts/revision pages them):
``read_exact_revision`` sends the cursor it is given and returns one page; ``read_exact_memory_revision`` follows
the cursor to the last page, bounded by ``max_entries``. Captured with httpx.MockTransport."""

import httpx
import pytest
from powercontext_client import InvalidResponse, PowerContextClient, PowerContextError, TooManyEntries

KEY = "pc_test_0123456789abcdef0123456789abcdef"
REVISION = {
    "scope_id": "project:demo",
    "family": "memory",
    "artifact_id": "memory",
    "revision": 7,
    "content_sha256": "a" * 64,
    "created_at": "2026-01-01T00:00:00Z",
    "author": "api-key:test",
    "body": None,
    "title": None,
    "summary": None,
}


def entry(entry_id: str) -> dict:
    return {
        "id": entry_id,
        "version": f"{entry_id}-v1",
        "body": f"body of {entry_id}",
        "content_sha256": "b" * 64,
        "conflict_key": None,
    }


class PagingServer:
    """Answers a memory revision of ``ids`` (sorted) ``page`` entries at a time, as the server pages them."""

    def __init__(self, ids: list[str], page: int = 2):
        self.ids, self.page = sorted(ids), page
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        after = request.url.params.get("entries_after")
        rest = [entry_id for entry_id in self.ids if after is None or entry_id > after]
        page = rest[: self.page]
        more = len(rest) > self.page
        return httpx.Response(
            200, json=REVISION | {"entries": [entry(i) for i in page], "next_entries_after": page[-1] if more else None}
        )


def client_for(handler) -> PowerContextClient:
    return PowerContextClient("http://powercontext.test", KEY, transport=httpx.MockTransport(handler))


def test_read_exact_revision_sends_only_the_given_page_parameters_and_returns_one_page():
    server = PagingServer([f"e{i}" for i in range(5)])
    with client_for(server) as client:
        first = client.read_exact_revision("project:demo", "memory", "memory", 7)
        second = client.read_exact_revision(
            "project:demo", "memory", "memory", 7, entries_after=first.next_entries_after, entries_limit=2
        )
    assert [e.id for e in first.entries] == ["e0", "e1"] and first.next_entries_after == "e1"
    assert [e.id for e in second.entries] == ["e2", "e3"] and second.next_entries_after == "e3"
    params = [dict(request.url.params) for request in server.requests]
    base = {"scope_id": "project:demo", "family": "memory", "artifact_id": "memory", "revision": "7"}
    assert params == [base, base | {"entries_after": "e1", "entries_limit": "2"}]


@pytest.mark.parametrize("count", [0, 1, 2, 5, 6])
def test_read_exact_memory_revision_follows_the_cursor_to_the_last_page(count):
    ids = [f"e{i:02}" for i in range(count)]
    server = PagingServer(ids)
    with client_for(server) as client:
        revision = client.read_exact_memory_revision("project:demo", "memory", 7)
    assert [e.id for e in revision.entries] == ids  # in order, none lost or repeated
    assert revision.next_entries_after is None
    assert (revision.revision, revision.content_sha256) == (7, "a" * 64)
    # Each page after the last entry id of the page before (two a page: e01, e03, …).
    cursors = [ids[i] for i in range(1, count - 1, 2)]
    assert [request.url.params.get("entries_after") for request in server.requests] == [None, *cursors]


def test_read_exact_memory_revision_refuses_more_than_max_entries_without_reading_on():
    server = PagingServer([f"e{i:02}" for i in range(20)])
    with client_for(server) as client, pytest.raises(TooManyEntries):
        client.read_exact_memory_revision("project:demo", "memory", 7, max_entries=5)
    assert len(server.requests) == 3  # 6 entries read: past the bound, no fourth page
    assert issubclass(TooManyEntries, PowerContextError)


def test_read_exact_memory_revision_with_exactly_max_entries_is_whole():
    with client_for(PagingServer(["a", "b", "c", "d"])) as client:
        revision = client.read_exact_memory_revision("p", "memory", 7, max_entries=4)
    assert [e.id for e in revision.entries] == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "page",
    [
        {"entries": [], "next_entries_after": "e1"},  # an empty page naming a next one: never an endless loop
        {"entries": [entry("e1")], "next_entries_after": "e1", "content_sha256": "c" * 64},  # another revision
    ],
    ids=["empty page with a cursor", "another revision"],
)
def test_a_page_that_breaks_the_contract_is_an_invalid_response(page):
    answers = [REVISION | {"entries": [entry("e0")], "next_entries_after": "e0"}, REVISION | page]

    def handler(request):
        return httpx.Response(200, json=answers.pop(0) if answers else REVISION | page)

    with client_for(handler) as client, pytest.raises(InvalidResponse):
        client.read_exact_memory_revision("project:demo", "memory", 7)
