"""Riding out a failover (docs/scaling.md §12): a request the database dropped is answered 503 with Retry-After,
never 500; one that is safe to repeat (a read, a prepare, a write with an Idempotency-Key) runs once more first.

The database "drops" a statement through Django's execute wrapper, as a dead primary's connection would: the
statement raises before it reaches the server. A demoted primary refusing a write (SQLSTATE 25006) is played the
same way, with psycopg's own exception as the cause.
"""

import sqlite3

import psycopg
import pytest
from django.db import InternalError, OperationalError, connection
from psycopg_pool import PoolTimeout

from artifacts.models import ArtifactRevision
from infrastructure import metrics
from tests.api.factories import auth, make_key, make_scope

ENTRY = "/v1/memory/entries"
PREPARE = "/v1/context/prepare"


class DropStatements:
    """Fails the first ``times`` statements whose SQL contains ``fragment`` with ``error``; counts them."""

    def __init__(self, fragment: str, error: Exception, times: int = 1) -> None:
        self.fragment, self.error, self.left, self.dropped = fragment, error, times, 0

    def __call__(self, execute, sql, params, many, context):
        if self.left and self.fragment in sql:
            self.left -= 1
            self.dropped += 1
            raise self.error
        return execute(sql, params, many, context)


def connection_lost() -> OperationalError:
    error = OperationalError("server closed the connection unexpectedly")
    error.__cause__ = psycopg.OperationalError("server closed the connection unexpectedly")  # no SQLSTATE
    return error


def statement_timeout() -> OperationalError:
    error = OperationalError("canceling statement due to statement timeout")
    error.__cause__ = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
    return error


def too_many_connections() -> OperationalError:
    error = OperationalError("sorry, too many clients already")
    error.__cause__ = psycopg.errors.TooManyConnections("sorry, too many clients already")
    return error


def pool_timeout() -> OperationalError:
    error = OperationalError("couldn't get a connection after 10.00 sec")
    error.__cause__ = PoolTimeout("couldn't get a connection after 10.00 sec")
    return error


def database_locked() -> OperationalError:
    error = OperationalError("database is locked")
    error.__cause__ = sqlite3.OperationalError("database is locked")
    return error


def read_only_refusal() -> InternalError:
    error = InternalError("cannot execute INSERT in a read-only transaction")
    error.__cause__ = psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction")
    return error


def retries(outcome: str) -> float:
    return metrics.DATABASE_RETRIES.labels(outcome)._value.get()


@pytest.fixture(autouse=True)
def no_retry_delay(settings):
    settings.POWERCONTEXT_DB_RETRY_DELAY_MS = 0


@pytest.fixture
def scope(db):
    return make_scope("project:failover")


@pytest.fixture
def writer(scope):
    return make_key(read=[scope], write=[scope])


def assert_service_unavailable(response) -> None:
    assert response.status_code == 503
    assert response["Retry-After"]
    assert response.json()["error"]["code"] == "service_unavailable"


def prepare(client, key, query, **environ):
    body = {"scope_id": "project:failover", "query": query, "assembly": {}}
    return client.post(PREPARE, body, content_type="application/json", **auth(key), **environ)


def write(client, key, body, **headers):
    payload = {"scope_id": "project:failover", "artifact_id": "notes", "entry_id": body, "body": body}
    return client.post(ENTRY, payload, content_type="application/json", **auth(key), **headers)


@pytest.mark.parametrize("script_name", ["", "/powercontext"], ids=["at the root", "under a path prefix"])
def test_a_prepare_the_database_dropped_once_is_answered_by_its_retry(client, writer, script_name):
    write(client, writer, "failover drill notes")
    recovered = retries("recovered")
    drop = DropStatements("artifacts_", connection_lost())

    with connection.execute_wrapper(drop):
        response = prepare(client, writer, "failover drill", SCRIPT_NAME=script_name)

    assert drop.dropped == 1
    assert response.status_code == 200
    assert "failover drill notes" in response.json()["content"]
    assert retries("recovered") == recovered + 1


def test_a_search_the_database_dropped_once_is_answered_by_its_retry(client, writer):
    write(client, writer, "failover drill notes")
    drop = DropStatements("artifacts_", connection_lost())

    with connection.execute_wrapper(drop):
        response = client.post(
            "/v1/memory/search",
            {"scope_id": "project:failover", "query": "failover drill"},
            content_type="application/json",
            **auth(writer),
        )

    assert drop.dropped == 1
    assert response.status_code == 200
    assert [hit["body"] for hit in response.json()["hits"]] == ["failover drill notes"]


def test_an_exact_read_the_database_dropped_once_is_answered_by_its_retry(client, writer):
    citation = write(client, writer, "kept bytes").json()["citation"]
    drop = DropStatements("artifacts_", connection_lost())

    with connection.execute_wrapper(drop):
        response = client.get("/v1/artifacts/revision", citation, **auth(writer))

    assert drop.dropped == 1
    assert response.status_code == 200
    assert response.json()["entry"]["body"] == "kept bytes"


def test_a_write_with_an_idempotency_key_is_retried_and_made_once(client, writer):
    drop = DropStatements("INSERT", connection_lost())

    with connection.execute_wrapper(drop):
        response = write(client, writer, "made once", HTTP_IDEMPOTENCY_KEY="failover-1")

    assert drop.dropped == 1
    assert response.status_code == 201
    assert ArtifactRevision.objects.count() == 1


@pytest.mark.parametrize("refusal", [connection_lost, read_only_refusal], ids=["connection lost", "demoted primary"])
def test_a_write_without_an_idempotency_key_gets_503_with_retry_after_and_is_not_made(client, writer, refusal):
    drop = DropStatements("INSERT", refusal())

    with connection.execute_wrapper(drop):
        response = write(client, writer, "maybe")

    assert drop.dropped == 1
    assert_service_unavailable(response)
    assert ArtifactRevision.objects.count() == 0


def test_a_request_dropped_twice_is_answered_503_and_counted_as_failed(client, writer):
    citation = write(client, writer, "kept").json()["citation"]
    failed = retries("failed")
    drop = DropStatements("artifacts_", connection_lost(), times=2)

    with connection.execute_wrapper(drop):
        response = client.get("/v1/artifacts/revision", citation, **auth(writer))

    assert drop.dropped == 2
    assert response.status_code == 503
    assert response["Retry-After"]
    assert retries("failed") == failed + 1


@pytest.mark.parametrize(
    "busy",
    [statement_timeout, too_many_connections, pool_timeout, database_locked],
    ids=["statement timeout", "too many connections", "pool timeout", "SQLite locked"],
)
def test_a_busy_database_is_answered_503_at_once_without_running_the_request_again(client, writer, busy):
    # Not a failover: a second run would only pay the request twice on a server already past its limits. The
    # statement fails once: a second run would have answered 200.
    write(client, writer, "busy server notes")
    failed, recovered = retries("failed"), retries("recovered")
    drop = DropStatements("artifacts_", busy())

    with connection.execute_wrapper(drop):
        response = prepare(client, writer, "busy server")

    assert drop.dropped == 1
    assert_service_unavailable(response)
    assert (retries("failed"), retries("recovered")) == (failed, recovered)


def test_a_permanent_database_error_is_not_retried(client, writer):
    citation = write(client, writer, "kept").json()["citation"]
    drop = DropStatements("artifacts_", InternalError("division by zero"), times=2)

    with connection.execute_wrapper(drop):
        response = client.get("/v1/artifacts/revision", citation, **auth(writer))

    assert drop.dropped == 1
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"


def test_a_keyed_post_outside_the_api_is_not_kept_for_a_second_run(client, writer):
    # The Idempotency-Key header alone does not make a body worth buffering: only an API write's is.
    drop = DropStatements("artifacts_", connection_lost())

    with connection.execute_wrapper(drop):
        response = client.post(
            "/not-the-api", {"x": 1}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k", **auth(writer)
        )

    assert response.status_code == 404
    assert not getattr(response.wsgi_request, "powercontext_database_retry_pending", False)


def test_the_retry_can_be_turned_off(client, writer, settings):
    settings.POWERCONTEXT_DB_RETRY_DELAY_MS = -1
    citation = write(client, writer, "kept").json()["citation"]
    drop = DropStatements("artifacts_", connection_lost())

    with connection.execute_wrapper(drop):
        response = client.get("/v1/artifacts/revision", citation, **auth(writer))

    assert drop.dropped == 1
    assert response.status_code == 503
