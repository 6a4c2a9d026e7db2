"""GET /v1/artifacts/history reads a page in a constant number of queries, whatever its size."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

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
