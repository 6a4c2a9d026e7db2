"""GET /v1/artifacts/history reads a page in a constant number of queries, whatever its size, and a page's texts
are bounded in bytes."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts.selectors import history_pages as history_page_reads
from tests.api.factories import add_memory, auth, make_key, make_scope, remove_memory, update_memory

HISTORY_URL = "/v1/artifacts/history"


@pytest.fixture
def memory_history(db):
    """Forty memory revisions, in rounds of four: add two entries, update the first, remove the second."""
    scope = make_scope("project:history")
    for round_ in range(10):
        first, second = f"entry-{round_}-a", f"entry-{round_}-b"
        add_memory(scope, {first: f"first of round {round_}"})
        add_memory(scope, {second: f"second of round {round_}"})
        update_memory(scope, first, f"first of round {round_}, revised")
        remove_memory(scope, second)
    return scope


def queries_for_page(client, key, limit: int) -> tuple[int, dict]:
    params = {"scope_id": "project:history", "family": "memory", "artifact_id": "memory", "limit": limit}
    with CaptureQueriesContext(connection) as captured:
        response = client.get(HISTORY_URL, data=params, **auth(key))
    assert response.status_code == 200, response.content
    return len(captured), response.json()


def test_a_memory_history_page_costs_the_same_number_of_queries_at_any_size(client, memory_history):
    key = make_key(read=[memory_history])
    small, one = queries_for_page(client, key, 1)
    large, twenty = queries_for_page(client, key, 20)

    assert len(one["revisions"]) == 1
    assert len(twenty["revisions"]) == 20
    assert sum(len(item["added"]) + len(item["retired"]) for item in twenty["revisions"]) == 25
    assert large == small, (small, large)


def history_pages(client, key, params: dict) -> list[dict]:
    """Every page of a history, following ``next_before`` to the end."""
    pages, before = [], None
    while True:
        query = params | ({} if before is None else {"before": before})
        response = client.get(HISTORY_URL, data=query, **auth(key))
        assert response.status_code == 200, response.content
        pages.append(response.json())
        if (before := pages[-1]["next_before"]) is None:
            return pages


def test_the_byte_bound_ends_a_history_page_after_the_revision_that_crosses_it(client, db, monkeypatch):
    monkeypatch.setattr(history_page_reads, "HISTORY_PAGE_MAX_BYTES", 1000)
    scope = make_scope("project:big")
    for i in range(7):  # 400 UTF-8 bytes each (200 two-byte characters): the third takes a page past 1000 bytes
        add_memory(scope, {f"big-{i}": "é" * 200})
    key = make_key(read=[scope])

    pages = history_pages(client, key, {"scope_id": "project:big", "family": "memory", "artifact_id": "memory"})

    assert [[r["citation"]["revision"] for r in page["revisions"]] for page in pages] == [[7, 6, 5], [4, 3, 2], [1]]
    assert pages[0]["revisions"][0]["added"][0]["body"] == "é" * 200


def test_a_retired_version_s_body_counts_toward_the_byte_bound_too(client, db, monkeypatch):
    monkeypatch.setattr(history_page_reads, "HISTORY_PAGE_MAX_BYTES", 100)
    scope = make_scope("project:big")
    add_memory(scope, {"a": "x" * 100})  # 1: adds 100 bytes
    update_memory(scope, "a", "y")  # 2: adds 1 and retires 100: past the bound only with what it retired
    key = make_key(read=[scope])

    pages = history_pages(client, key, {"scope_id": "project:big", "family": "memory", "artifact_id": "memory"})

    assert [[r["citation"]["revision"] for r in page["revisions"]] for page in pages] == [[2], [1]]
