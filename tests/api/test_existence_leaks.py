"""A scope the key may not read answers exactly like a scope that does not exist: same status, same body,
and the same database work (the same statements), so existence cannot be learned from timing either."""

import contextlib
import re
from unittest import mock

import pytest
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.test.utils import CaptureQueriesContext

from artifacts import services
from artifacts.models import ProfileCandidate
from tests.api.factories import add_memory, auth, make_key, make_key_object, make_scope, propose_profile

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


GRANTS_THAT_HIDE = {
    # endpoint: the grants on a scope that still make it a 404 there (a write-only grant lets the key write)
    endpoint: ("none", "no rights", "write only") if endpoint != "write" else ("none", "no rights")
    for endpoint in ENDPOINTS
}


@pytest.mark.parametrize(
    ("endpoint", "grant"), [(endpoint, grant) for endpoint, grants in GRANTS_THAT_HIDE.items() for grant in grants]
)
def test_an_unreadable_scope_reads_no_more_rows_than_an_unknown_one(client, db, endpoint, grant):
    # The same statements are not enough: an unreadable scope's row, its references and a model instance made of it
    # were read before the key's grant was checked, and made its 404 measurably slower than an unknown scope's.
    mine = make_scope("project:mine")
    hidden = make_scope("project:hidden", references=[mine, make_scope("project:other")])
    add_memory(hidden, {"secret": "the hidden scope's entry"})
    api_key, key = make_key_object(read=[mine], write=[mine])
    if grant != "none":
        services.api_key_grant_set(api_key=api_key, scope=hidden, can_read=False, can_write=grant == "write only")
    fetched: list[int] = []

    # Django's cursor wrapper hands fetches to the driver's cursor through __getattr__: each is defined here instead.
    def fetchall(wrapper):
        rows = wrapper.cursor.fetchall()
        fetched.append(len(rows))
        return rows

    def fetchmany(wrapper, size=None):
        rows = wrapper.cursor.fetchmany() if size is None else wrapper.cursor.fetchmany(size)
        fetched.append(len(rows))
        return rows

    def fetchone(wrapper):
        row = wrapper.cursor.fetchone()
        fetched.append(0 if row is None else 1)
        return row

    def rows_read(scope_id):
        fetched.clear()
        fetches = {"fetchall": fetchall, "fetchmany": fetchmany, "fetchone": fetchone}
        with contextlib.ExitStack() as stack:
            for name, fetch in fetches.items():
                stack.enter_context(mock.patch.object(CursorWrapper, name, fetch, create=True))
            response, _ = _request(client, key, endpoint, scope_id)
        assert response.status_code == 404
        return list(fetched)

    hidden_rows, unknown_rows = rows_read("project:hidden"), rows_read("project:nowhere")
    assert hidden_rows and hidden_rows[0] >= 1  # the fetches were seen: the key's own row at least
    assert hidden_rows == unknown_rows


# --- profile candidates (addressed by a sequential id, not by scope) ---------------------------------


def _normalized(sql: str) -> str:
    """A statement modulo its parameters: the id asked for, the key's hash and id, savepoint names."""
    sql = re.sub(r'"s\d+_x\d+"', '"s"', sql)
    return re.sub(r"\b\d+\b", "N", re.sub(r"'[^']*'", "'?'", sql))


def _headers(response) -> dict:
    """Every header but the request's own id (a fresh one per request)."""
    return {name: value for name, value in response.headers.items() if name != "X-Request-ID"}


def _decide(client, key: str, candidate_id: int, action: str):
    with CaptureQueriesContext(connection) as queries:
        response = client.post(
            f"/v1/profile/candidates/{candidate_id}/{action}", {}, content_type="application/json", **auth(key)
        )
    return response, [_normalized(query["sql"]) for query in queries.captured_queries]


@pytest.mark.parametrize("action", ["commit", "reject"])
def test_a_candidate_in_an_inaccessible_scope_costs_and_answers_exactly_like_a_missing_id(client, db, action):
    mine, hidden = make_scope("project:mine"), make_scope("project:hidden")
    propose_profile(mine, "mine, before")
    hidden_candidate = propose_profile(hidden, "the hidden scope's profile")
    deleted = propose_profile(mine, "mine, gone")  # an id between the key's own candidates that no longer exists
    propose_profile(mine, "mine, after")
    ProfileCandidate.objects.filter(pk=deleted.pk).delete()
    key = make_key(read=[mine], write=[mine])

    answers = {
        "inaccessible": _decide(client, key, hidden_candidate.pk, action),
        "never existed": _decide(client, key, hidden_candidate.pk + 1000, action),
        "gone from own scope": _decide(client, key, deleted.pk, action),
    }

    (first, first_statements), *others = answers.values()
    assert first.status_code == 404 and first.json()["error"]["message"] == "candidate not found"
    for response, statements in others:
        assert response.status_code == first.status_code
        assert response.content == first.content
        assert _headers(response) == _headers(first)
        assert len(statements) == len(first_statements)
        assert statements == first_statements
    assert ProfileCandidate.objects.get(pk=hidden_candidate.pk).status == "pending"


@pytest.mark.parametrize("action", ["commit", "reject"])
def test_a_key_that_may_only_read_a_candidates_scope_is_refused_after_the_same_statements(client, db, action):
    scope = make_scope("project:read-only")
    candidate = propose_profile(scope, "a profile")
    key = make_key(read=[scope])

    forbidden, forbidden_statements = _decide(client, key, candidate.pk, action)
    missing, missing_statements = _decide(client, key, candidate.pk + 1000, action)

    assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden"
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "candidate not found"
    assert forbidden_statements == missing_statements
    assert ProfileCandidate.objects.get(pk=candidate.pk).status == "pending"


@pytest.mark.parametrize("action", ["commit", "reject"])
@pytest.mark.parametrize("candidate_id", [2**63, 10**30])
def test_a_candidate_id_beyond_any_row_is_the_same_404_as_a_missing_one(client, db, action, candidate_id):
    scope = make_scope("project:mine")
    key = make_key(read=[scope], write=[scope])

    beyond, _ = _decide(client, key, candidate_id, action)
    missing, _ = _decide(client, key, 2**63 - 1, action)

    assert beyond.status_code == 404
    assert beyond.content == missing.content
