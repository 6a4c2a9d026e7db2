"""A scope the key may not read answers exactly like a scope that does not exist: same status, same body,
and the same database work (the same statements), so existence cannot be learned from timing either."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.api.factories import add_memory, auth, make_key, make_scope

ENDPOINTS = {
    "prepare": ("post", "/v1/context/prepare", {"query": "anything", "assembly": {}}),
    "revision": ("get", "/v1/artifacts/revision", {"family": "memory", "artifact_id": "memory", "revision": "1"}),
    "history": ("get", "/v1/artifacts/history", {"family": "memory", "artifact_id": "memory"}),
    "write": ("post", "/v1/experiences/revisions", {"artifact_id": "x", "body": "lesson"}),
}


def _request(client, key: str, endpoint: str, scope_id: str):
    method, path, fields = ENDPOINTS[endpoint]
    data = {"scope_id": scope_id, **fields}
    with CaptureQueriesContext(connection) as queries:
        if method == "post":
            response = client.post(path, data, content_type="application/json", **auth(key))
        else:
            response = client.get(path, data, **auth(key))
    # Savepoint names are numbered per test run (the prepare log's INSERT runs in one inside a test).
    statements = [re.sub(r'"s\d+_x\d+"', '"s"', " ".join(q["sql"].split()[:4])) for q in queries.captured_queries]
    return response, statements


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_an_unreadable_scope_costs_and_answers_exactly_like_an_unknown_one(client, db, endpoint):
    mine, hidden = make_scope("project:mine"), make_scope("project:hidden")
    add_memory(hidden, {"secret": "the hidden scope's entry"})
    key = make_key(read=[mine], write=[mine])
    unknown, unknown_statements = _request(client, key, endpoint, "project:nowhere")
    forbidden, forbidden_statements = _request(client, key, endpoint, "project:hidden")
    assert unknown.status_code == forbidden.status_code == 404
    assert unknown.json() == forbidden.json()
    assert len(unknown_statements) == len(forbidden_statements)
    assert unknown_statements == forbidden_statements
