"""Prepares served by read replicas, still reading their own writes (docs/scaling.md §11).

With POWERCONTEXT_PREPARE_ON_REPLICAS every successful write answers with a consistency token, and a prepare that
carries one runs on a replica only when the replica has replayed it, else on the primary. On PostgreSQL the
"replica" is tests/settings.py's second connection to the test database (tests/api/test_read_replicas.py); how far
it has replayed is told by replacing the replay check's statement: ``REPLAYED_ALL`` (the primary's current
position, past every token handed out) or ``REPLAYED_NOTHING``. SQLite deployments ignore tokens.
"""

import json

import pytest
from django.conf import settings as django_settings
from django.db import OperationalError, connections
from prometheus_client import REGISTRY

from infrastructure import replicas
from infrastructure.replicas import prepares
from tests.api.factories import auth, make_key, make_scope
from tests.api.test_read_replicas import (  # noqa: F401 - fixtures
    BOTH,
    REPLICA,
    replica_configured,
    replica_on,
    statements_on,
    without_lag_checks,
)

ON_POSTGRESQL = django_settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
postgresql_only = pytest.mark.skipif(not ON_POSTGRESQL, reason="read replicas and their tokens are PostgreSQL only")
SCOPE = "project:replicated"
TOKEN = replicas.CONSISTENCY_TOKEN_HEADER
SERVED_BY = replicas.SERVED_BY_HEADER
REPLAYED_ALL = "SELECT pg_current_wal_insert_lsn() >= %s::pg_lsn"
REPLAYED_NOTHING = "SELECT '0/0'::pg_lsn >= %s::pg_lsn"
FAILOVER = "The failover drill runs on Tuesdays."
SCOPE_STATEMENT = "artifacts_contextreference"  # the statement every prepare starts with reads the references


def on_postgresql(test):
    """A test of the replica (a second connection: its rows committed, so the test's transactions too)."""
    return postgresql_only(pytest.mark.django_db(transaction=True, databases=BOTH)(test))


def writer_key() -> str:
    """A key that may read and write the replicated scope, made with it."""
    scope = make_scope(SCOPE)
    return make_key(read=[scope], write=[scope])


@pytest.fixture
def prepares_on_replica(request, settings, monkeypatch):
    """Prepares may run on the "replica" alias, which has replayed every write committed so far."""
    request.getfixturevalue("replica_on")
    settings.POWERCONTEXT_PREPARE_ON_REPLICAS = True
    monkeypatch.setattr(prepares, "TOKEN_REPLAYED_SQL", REPLAYED_ALL)


def write_entry(client, key, entry_id: str, body: str):
    write = {"scope_id": SCOPE, "entry_id": entry_id, "body": body}
    return client.post("/v1/memory/entries", json.dumps(write), content_type="application/json", **auth(key))


@pytest.fixture
def failover(client, prepares_on_replica):
    """A writer's key and its committed write of FAILOVER (the response, with its token)."""
    key = writer_key()
    return key, write_entry(client, key, "failover", FAILOVER)


def prepare_with(client, key, query: str, token: str | None = None):
    headers = {f"HTTP_{TOKEN.upper().replace('-', '_')}": token} if token is not None else {}
    return client.post(
        "/v1/context/prepare",
        json.dumps({"scope_id": SCOPE, "query": query}),
        content_type="application/json",
        **auth(key),
        **headers,
    )


def prepare_reads(where: str, reason: str) -> float:
    return REGISTRY.get_sample_value("powercontext_prepare_reads_total", {"where": where, "reason": reason}) or 0.0


def scope_reads(statements: list[str]) -> int:
    return sum(SCOPE_STATEMENT in sql for sql in without_lag_checks(statements))


@on_postgresql
def test_a_prepare_with_a_token_the_replica_has_not_replayed_is_served_by_the_primary_with_the_write(
    client, failover, monkeypatch
):
    key, written = failover
    monkeypatch.setattr(prepares, "TOKEN_REPLAYED_SQL", REPLAYED_NOTHING)
    behind = prepare_reads("primary", "behind")

    with statements_on(REPLICA) as on_replica, statements_on("default") as on_primary:
        prepared = prepare_with(client, key, "failover drill", written[TOKEN])

    assert written.status_code == 201
    assert prepared.status_code == 200
    assert FAILOVER in prepared.json()["content"]
    assert prepared[SERVED_BY] == "primary"
    assert prepare_reads("primary", "behind") == behind + 1
    assert scope_reads(on_replica) == 0 and scope_reads(on_primary) == 1
    assert [sql for sql in without_lag_checks(on_replica)] == [REPLAYED_NOTHING]  # asked, then left alone


@on_postgresql
def test_a_prepare_with_a_token_the_replica_has_replayed_is_served_by_the_replica_with_the_write(
    client, prepares_on_replica
):
    key = writer_key()
    write_entry(client, key, "failover", FAILOVER)
    # The replica's recall copies (resident postings, statistics) are loaded before the next write...
    before = prepare_with(client, key, "failover drill")
    written = write_entry(client, key, "rollback", "A failover drill ends with a rollback check.")

    with statements_on(REPLICA) as on_replica, statements_on("default") as on_primary:
        prepared = prepare_with(client, key, "failover drill rollback", written[TOKEN])

    # ...and the replica's generation checks see them out of date: the write is in the very next prepare.
    assert before[SERVED_BY] == "replica"
    assert "rollback check" not in before.json()["content"]
    assert prepared.status_code == 200 and prepared[SERVED_BY] == "replica"
    assert "A failover drill ends with a rollback check." in prepared.json()["content"]
    assert FAILOVER in prepared.json()["content"]
    assert scope_reads(on_replica) == 1 and scope_reads(on_primary) == 0
    # The API key was checked, and the prepare logged, on the primary.
    assert any("artifacts_apikey" in sql for sql in on_primary), on_primary
    assert any(sql.startswith("INSERT") and "artifacts_preparelog" in sql for sql in on_primary), on_primary


@on_postgresql
def test_every_write_answers_with_a_token_that_is_a_wal_position_never_moving_backwards(client, prepares_on_replica):
    key = writer_key()

    first = write_entry(client, key, "one", "First entry.")
    second = write_entry(client, key, "two", "Second entry.")
    refused = write_entry(client, key, "two", "Second entry again.")  # the entry exists: 409, no write, no token

    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT %s::pg_lsn <= %s::pg_lsn", [first[TOKEN], second[TOKEN]])
        ordered = cursor.fetchone()[0]
    assert replicas.consistency_token_valid(first[TOKEN]) and ordered
    assert refused.status_code == 409 and not refused.has_header(TOKEN)


@on_postgresql
def test_without_a_token_a_replica_within_the_lag_bound_serves_and_one_that_is_down_leaves_it_to_the_primary(
    client, failover
):
    key, _ = failover

    served = prepare_with(client, key, "failover")
    replicas.replica_failed(REPLICA, "down", "tests: out of use")
    unserved = prepare_with(client, key, "failover")

    assert served[SERVED_BY] == "replica" and unserved[SERVED_BY] == "primary"
    assert served.json()["content"] == unserved.json()["content"]


@on_postgresql
def test_a_replica_failing_mid_prepare_costs_the_client_nothing_the_primary_answers(client, failover):
    key, written = failover
    errors = prepare_reads("primary", "error")

    def cancelled(execute, sql, params, many, context):
        if SCOPE_STATEMENT in sql:
            raise OperationalError("canceling statement due to conflict with recovery")
        return execute(sql, params, many, context)

    with connections[REPLICA].execute_wrapper(cancelled):
        prepared = prepare_with(client, key, "failover", written[TOKEN])

    assert prepared.status_code == 200 and prepared[SERVED_BY] == "primary"
    assert FAILOVER in prepared.json()["content"]
    assert prepare_reads("primary", "error") == errors + 1
    assert replicas.replica_alias() is None  # skipped for POWERCONTEXT_REPLICA_SKIP_SECONDS


@on_postgresql
def test_a_scope_the_replica_does_not_know_yet_is_prepared_by_the_primary_not_a_404(client, prepares_on_replica):
    key = writer_key()

    def unknown_there(execute, sql, params, many, context):
        if SCOPE_STATEMENT in sql:
            params = ["project:not-replayed" if param == SCOPE else param for param in params]
        return execute(sql, params, many, context)

    refused = prepare_reads("primary", "refused")
    with connections[REPLICA].execute_wrapper(unknown_there):
        prepared = prepare_with(client, key, "anything")

    assert prepared.status_code == 200 and prepared[SERVED_BY] == "primary"
    assert prepare_reads("primary", "refused") == refused + 1


@on_postgresql
@pytest.mark.usefixtures("replica_on")
def test_with_the_setting_off_writes_carry_no_token_and_prepares_stay_on_the_primary(client):
    key = writer_key()

    written = write_entry(client, key, "failover", FAILOVER)
    with statements_on(REPLICA) as on_replica:
        prepared = prepare_with(client, key, "failover", "0/16B3748")

    assert written.status_code == 201 and not written.has_header(TOKEN)
    assert prepared.status_code == 200 and not prepared.has_header(SERVED_BY)
    assert on_replica == []


@pytest.mark.parametrize("token", ["16/B374D848 extra", "latest", "1/2/3", "-1/0", "123456789/0"])
@pytest.mark.django_db
def test_a_malformed_token_is_a_422_naming_the_header_on_any_database(client, settings, token):
    settings.POWERCONTEXT_PREPARE_ON_REPLICAS = True
    scope = make_scope(SCOPE)
    key = make_key(read=[scope])

    response = prepare_with(client, key, "anything", token)

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
    assert response.json()["error"]["fields"][0]["path"] == TOKEN


@pytest.mark.django_db
def test_sqlite_ignores_tokens_and_keeps_preparing(client, settings):
    if ON_POSTGRESQL:
        pytest.skip("SQLite's behaviour; PostgreSQL's is above")
    settings.POWERCONTEXT_PREPARE_ON_REPLICAS = True
    key = writer_key()

    written = write_entry(client, key, "failover", FAILOVER)
    prepared = prepare_with(client, key, "failover drill", "16/B374D848")

    assert written.status_code == 201 and not written.has_header(TOKEN)
    assert prepared.status_code == 200 and not prepared.has_header(SERVED_BY)
    assert FAILOVER in prepared.json()["content"]
