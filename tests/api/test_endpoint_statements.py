"""Every API endpoint's SQL statements, counted through the public HTTP path (statement counts are deterministic,
unlike timings): a regression in any of them fails here.

An exact read is the key with its grants, then one statement joining the scope, the key's grant, the artifact, the
revision and its entry versions; a history page adds one (the artifact with its head on the primary, then the page
with what each revision changed). The liveness probe touches no database. The prepare has its own file
(test_prepare_statements.py); the writes are pinned at what they cost now.
"""

import json

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from artifacts.models import RecallDocument, RecallVector
from tests.api.factories import (
    add_experience,
    add_memory,
    auth,
    make_key,
    make_scope,
    propose_profile,
    update_memory,
)
from tests.conftest import embedding_endpoint_settings

EXACT_READ_STATEMENTS = 2
HISTORY_PAGE_STATEMENTS = 3


@pytest.fixture
def world(db):
    scope = make_scope("project:demo")
    hidden = make_scope("project:hidden")
    add_memory(scope, {f"entry-{i}": f"body {i}" for i in range(30)})
    update_memory(scope, "entry-1", "body 1, revised")
    add_experience(scope, "lesson", "a lesson")
    add_memory(hidden, {"secret": "hidden"})
    return {"key": make_key(read=[scope], write=[scope]), "scope": scope}


def _get(client, key, path, **params):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path, data=params, **auth(key))
    return response, [query["sql"] for query in queries.captured_queries]


def _post(client, key, path, body):
    with CaptureQueriesContext(connection) as queries:
        response = client.post(path, json.dumps(body), content_type="application/json", **auth(key))
    return response, [query["sql"] for query in queries.captured_queries]


MEMORY = {"scope_id": "project:demo", "family": "memory", "artifact_id": "memory"}


def test_an_exact_memory_revision_with_its_entry_versions_is_read_in_two_statements(client, world):
    response, statements = _get(client, world["key"], "/v1/artifacts/revision", **MEMORY, revision=1)
    assert response.status_code == 200, response.content
    assert len(response.json()["entries"]) == 30
    assert len(statements) == EXACT_READ_STATEMENTS, "\n".join(statements)


@pytest.mark.parametrize("entries_after", [None, "entry-1"])
def test_a_page_of_a_memory_revision_s_entries_is_read_in_two_statements_that_limit_it(client, world, entries_after):
    after = {} if entries_after is None else {"entries_after": entries_after}
    response, statements = _get(
        client, world["key"], "/v1/artifacts/revision", **MEMORY, revision=1, entries_limit=7, **after
    )
    assert response.status_code == 200, response.content
    assert len(response.json()["entries"]) == 7
    assert len(statements) == EXACT_READ_STATEMENTS, "\n".join(statements)
    # The page is limited in the statement itself (7 + 1 ids: one more tells whether more follow), never sliced.
    assert " LIMIT 8)" in statements[-1] and "ORDER BY v.entry_id, v.version_id LIMIT" in statements[-1]


def test_an_exact_entry_version_is_read_in_two_statements(client, world):
    revision = client.get("/v1/artifacts/revision", data={**MEMORY, "revision": 2}, **auth(world["key"])).json()
    version = next(e for e in revision["entries"] if e["id"] == "entry-1")["version"]
    response, statements = _get(
        client, world["key"], "/v1/artifacts/revision", **MEMORY, revision=2, entry_id="entry-1", entry_version=version
    )
    assert response.status_code == 200, response.content
    assert response.json()["entry"]["body"] == "body 1, revised"
    assert len(statements) == EXACT_READ_STATEMENTS, "\n".join(statements)


def test_an_exact_experience_revision_is_read_in_two_statements(client, world):
    params = {"scope_id": "project:demo", "family": "experience", "artifact_id": "lesson", "revision": 1}
    response, statements = _get(client, world["key"], "/v1/artifacts/revision", **params)
    assert response.status_code == 200 and response.json()["body"] == "a lesson"
    assert len(statements) == EXACT_READ_STATEMENTS, "\n".join(statements)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"scope_id": "project:nowhere"}, "scope not found"),
        ({"scope_id": "project:hidden"}, "scope not found"),
        ({"artifact_id": "elsewhere"}, "artifact not found"),
        ({"revision": 9}, "revision not found"),
        ({"entry_id": "entry-1", "entry_version": "no-such-version"}, "entry version not live at that revision"),
    ],
    ids=["unknown scope", "unreadable scope", "unknown artifact", "unknown revision", "unknown entry version"],
)
def test_every_miss_of_an_exact_read_costs_the_same_two_statements(client, world, params, message):
    response, statements = _get(client, world["key"], "/v1/artifacts/revision", **{**MEMORY, "revision": 1, **params})
    assert response.status_code == 404
    assert response.json()["error"]["message"] == message
    assert len(statements) == EXACT_READ_STATEMENTS, "\n".join(statements)


@pytest.mark.parametrize("limit", [1, 3])
def test_a_history_page_is_read_in_three_statements(client, world, limit):
    response, statements = _get(client, world["key"], "/v1/artifacts/history", **MEMORY, limit=limit)
    assert response.status_code == 200, response.content
    assert len(response.json()["revisions"]) == min(limit, 2)
    assert len(statements) == HISTORY_PAGE_STATEMENTS, "\n".join(statements)


def test_the_liveness_probe_touches_no_database(client, db):
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/healthz").status_code == 200
    assert queries.captured_queries == []


# What each write costs now, per engine (inside the test's transaction: each savepoint is a statement too).
WRITES = {
    "memory entry create": (
        "/v1/memory/entries",
        {"scope_id": "project:demo", "entry_id": "new", "body": "b"},
        {"sqlite": 19, "postgresql": 19},
    ),
    "memory entry update": (
        "/v1/memory/entries/update",
        {"scope_id": "project:demo", "entry_id": "entry-2", "body": "b"},
        {"sqlite": 29, "postgresql": 28},
    ),
    "memory entry remove": (
        "/v1/memory/entries/remove",
        {"scope_id": "project:demo", "entry_id": "entry-3"},
        {"sqlite": 21, "postgresql": 20},
    ),
    "experience": (
        "/v1/experiences/revisions",
        {"scope_id": "project:demo", "artifact_id": "lesson", "body": "b"},
        {"sqlite": 24, "postgresql": 23},
    ),
    "topic memory": (
        "/v1/topic-memories/revisions",
        {"scope_id": "project:demo", "artifact_id": "t", "title": "T", "summary": "S"},
        {"sqlite": 23, "postgresql": 23},
    ),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_costs_no_more_statements_than_it_does_now(client, world, write):
    path, body, most = WRITES[write]
    response, statements = _post(client, world["key"], path, body)
    assert response.status_code == 201, response.content
    assert len(statements) <= most[connection.vendor], "\n".join(statements)


# Deciding on a candidate (addressed by id): the candidate, its artifact and scope are found in one statement joined
# to the key's grant (two before: the scope was read again), then the decision.
DECISIONS = {"commit": {"sqlite": 15, "postgresql": 15}, "reject": {"sqlite": 8, "postgresql": 8}}


@pytest.mark.parametrize("action", list(DECISIONS))
def test_deciding_on_a_candidate_costs_no_more_statements_than_it_does_now(client, world, action):
    candidate = propose_profile(world["scope"], "a profile")
    response, statements = _post(client, world["key"], f"/v1/profile/candidates/{candidate.pk}/{action}", {})
    assert response.status_code in (200, 201), response.content
    assert len(statements) <= DECISIONS[action][connection.vendor], "\n".join(statements)


@pytest.mark.parametrize("write", list(WRITES))
def test_with_prepares_on_replicas_a_postgresql_write_adds_one_statement_for_its_consistency_token(
    client, world, settings, write
):
    # docs/scaling.md §11: the primary's WAL position read after the commit; SQLite hands out no token.
    path, body, _ = WRITES[write]
    with transaction.atomic():  # the same write with the setting off, undone: what it costs without a token
        response, without = _post(client, world["key"], path, body)
        transaction.set_rollback(True)
    settings.POWERCONTEXT_PREPARE_ON_REPLICAS = True

    response, statements = _post(client, world["key"], path, body)

    assert response.status_code == 201, response.content
    token_statements = 1 if connection.vendor == "postgresql" else 0
    assert len(statements) == len(without) + token_statements, "\n".join(statements)
    assert response.has_header("PowerContext-Consistency-Token") == bool(token_statements)


# In hybrid recall a write stores its new recall documents' vectors in one more statement (one INSERT for them all,
# embedded before its transaction by an endpoint, inside it by the packaged model); a removal adds none.
HYBRID_EXTRA = {
    "memory entry create": 1,
    "memory entry update": 1,
    "memory entry remove": 0,
    "experience": 1,
    "topic memory": 1,
}


@pytest.fixture(params=["endpoint", "packaged"])
def hybrid(request, settings):
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    if request.param == "endpoint":
        embedding_endpoint_settings(settings, request.getfixturevalue("embedding_server"))
    else:
        settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"}
    return settings


@pytest.mark.parametrize("write", list(WRITES))
def test_in_hybrid_recall_a_write_adds_one_statement_for_its_new_documents_vectors(client, hybrid, world, write):
    path, body, _ = WRITES[write]
    with transaction.atomic():  # the same write in lexical recall, undone: what it costs without vectors
        hybrid.POWERCONTEXT_RECALL_MODE = "lexical"
        response, lexical = _post(client, world["key"], path, body)
        assert response.status_code == 201, response.content
        transaction.set_rollback(True)
    hybrid.POWERCONTEXT_RECALL_MODE = "hybrid"

    response, statements = _post(client, world["key"], path, body)

    assert response.status_code == 201, response.content
    assert len(statements) == len(lexical) + HYBRID_EXTRA[write], "\n".join(statements)
    assert RecallVector.objects.count() == RecallDocument.objects.count()  # every live document has its vector


def test_the_operator_resolver_resolves_an_entry_citation_in_one_statement(world):
    from artifacts.selectors import citation_resolve
    from vocabulary.citation import Citation

    entry = world["scope"].artifacts.get(family="memory").entry_versions.get(entry_id="entry-0")
    citation = Citation("project:demo", "memory", "memory", 2, entry_id="entry-0", entry_version=entry.version_id)
    with CaptureQueriesContext(connection) as queries:
        resolved = citation_resolve(citation=citation)
    assert resolved.entry_version.body == "body 0"
    assert resolved.revision.artifact.scope.scope_id == "project:demo"
    assert len(queries.captured_queries) == 1, [q["sql"] for q in queries.captured_queries]
