"""A prepare over small scopes costs a handful of SQL statements, whatever the number of scopes and families.

Statement counts are deterministic (unlike timings): the API key with its grants, the scope with its ordered
references, the recall statistics of every selected family, and one ranking that also reads the candidates.
The prepare log's row is written after the response and is not counted here (it is disabled).
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.api.factories import (
    add_experience,
    add_memory,
    add_topic,
    legacy_of,
    make_key,
    make_scope,
    markdown_of,
    prepare,
)

PREPARE_STATEMENTS_MAX = 4


@pytest.fixture(autouse=True)
def _no_prepare_log(settings):
    settings.POWERCONTEXT_PREPARE_LOG = False


@pytest.fixture
def three_scopes(db):
    team, org = make_scope("team:core"), make_scope("org:acme")
    project = make_scope("project:demo", references=[team, org])
    for scope in (project, team, org):
        add_memory(scope, {f"{scope.scope_id}-deploy": f"deploy notes of {scope.scope_id}", "other": "unrelated"})
        add_experience(scope, f"{scope.scope_id}-lesson", f"a deploy lesson learned in {scope.scope_id}")
    add_topic(project, "releases", title="Releases", summary="how deploy works", body="deploy every friday")
    return project, team, org


def _statements(client, key, body):
    with CaptureQueriesContext(connection) as queries:
        response = prepare(client, key, body)
    assert response.status_code == 200, response.content
    return response, [query["sql"] for query in queries.captured_queries]


def test_a_default_prepare_over_three_scopes_takes_a_handful_of_statements(client, three_scopes):
    key = make_key(read=three_scopes)
    response, statements = _statements(client, key, {"scope_id": "project:demo", "query": "deploy", "assembly": {}})
    document = markdown_of(response)
    cited_scopes = {entry.scope for entry in document.entries}
    assert cited_scopes == {"project:demo", "team:core", "org:acme"}
    assert len(statements) <= PREPARE_STATEMENTS_MAX, "\n".join(statements)


def test_a_legacy_prepare_with_three_families_takes_as_many_statements_as_the_default(client, three_scopes):
    key = make_key(read=three_scopes)
    response, statements = _statements(client, key, {"scope_id": "project:demo", "query": "deploy"})
    families = {item["family"] for item in legacy_of(response)}
    assert families == {"memory", "experience", "topic_memory"}
    assert len(statements) <= PREPARE_STATEMENTS_MAX, "\n".join(statements)


def test_more_referenced_scopes_do_not_add_statements(client, db):
    references = [make_scope(f"team:{i}") for i in range(6)]
    project = make_scope("project:demo", references=references)
    for scope in (project, *references):
        add_memory(scope, {"deploy": f"deploy notes of {scope.scope_id}"})
    key = make_key(read=[project, *references])
    _, statements = _statements(client, key, {"scope_id": "project:demo", "query": "deploy", "assembly": {}})
    assert len(statements) <= PREPARE_STATEMENTS_MAX, "\n".join(statements)


postgresql_prepares = pytest.mark.skipif(
    connection.vendor != "postgresql" or connection.settings_dict["OPTIONS"].get("prepare_threshold") is None,
    reason="prepared statements are PostgreSQL's, and off here (threshold 0, or PgBouncer in transaction mode)",
)


@postgresql_prepares
def test_postgresql_prepares_a_repeated_prepares_statements_and_answers_the_same(client, three_scopes):
    key = make_key(read=three_scopes)
    body = {"scope_id": "project:demo", "query": "deploy", "assembly": {}}
    first, _ = _statements(client, key, body)
    # The small scopes' copies load one per prepare (the statements' shapes change meanwhile), then psycopg
    # prepares a statement on its fifth run (the default threshold).
    for _ in range(20):
        prepare(client, key, body)

    last, statements = _statements(client, key, body)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]

    assert last.json() == first.json()
    # Each statement of the last prepare is prepared on the connection (its text up to the first parameter).
    prefixes = [text.split("$", 1)[0] for text in prepared]
    for sql in statements:
        assert any(len(prefix) > 20 and sql.startswith(prefix) for prefix in prefixes), (sql, prepared)


@postgresql_prepares
@pytest.mark.parametrize("resident_mb", [0, 64], ids=["ranked in SQL", "ranked in memory"])
def test_postgresql_plans_each_repeated_statement_once_not_at_every_prepare(
    client, three_scopes, settings, resident_mb
):
    settings.POWERCONTEXT_RESIDENT_MEMORY_MB = resident_mb
    key = make_key(read=three_scopes)
    # Queries of different lengths and so of different numbers of ranked rows: a statement whose generic plan
    # PostgreSQL estimates dearer than its custom plans (an unnest of a bound array of terms or rows did) is
    # planned again at every execution.
    bodies = [
        {"scope_id": "project:demo", "query": query, "assembly": {}}
        for query in ("deploy", "deploy notes", "a deploy lesson learned", "how deploy works every friday")
    ]

    def generic_plans() -> dict[str, int]:
        """Per prepared statement of the connection (its text up to the first parameter), its generic executions."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement, generic_plans FROM pg_prepared_statements")
            return {text.split("$", 1)[0]: generic for text, generic in cursor.fetchall()}

    before = generic_plans()  # the connection outlives a test: count this test's executions only
    for body in bodies * 6:
        prepare(client, key, body)

    _, statements = _statements(client, key, bodies[0])
    after = generic_plans()

    for sql in statements:
        prefix = max((p for p in after if sql.startswith(p)), key=len)
        assert after[prefix] - before.get(prefix, 0) > 0, sql
