"""Errors tell the truth: 503 with Retry-After only for outages (a retry can succeed), a permanent database
error is a 500 in the error shape; an outage logs one line per failure, not a traceback."""

import logging

import pytest
from django.db import IntegrityError, OperationalError, connection

from tests.api.factories import auth, make_key, make_scope


@pytest.fixture
def key(db):
    scope = make_scope("project:demo")
    return make_key(read=[scope], write=[scope])


def _failing(error: Exception):
    def wrapper(execute, sql, params, many, context):
        raise error

    return wrapper


def write(client, key):
    body = {"scope_id": "project:demo", "artifact_id": "x", "body": "lesson"}
    return client.post("/v1/experiences/revisions", body, content_type="application/json", **auth(key))


def prepare(client, key):
    body = {"scope_id": "project:demo", "query": "anything", "assembly": {}}
    return client.post("/v1/context/prepare", body, content_type="application/json", **auth(key))


@pytest.mark.parametrize("request_", [write, prepare], ids=["write", "prepare"])
def test_an_unavailable_database_is_a_503_with_retry_after_and_one_log_line(client, key, caplog, request_):
    outage = connection.execute_wrapper(_failing(OperationalError("could not connect to server")))
    with caplog.at_level(logging.DEBUG, logger="powercontext"), outage:
        response = request_(client, key)
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "service_unavailable"
    warnings = [r for r in caplog.records if r.name == "powercontext" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].exc_info is None
    assert "could not connect to server" in warnings[0].getMessage()


def test_a_permanent_database_error_is_a_500_in_the_error_shape_never_retry_later(client, key, caplog):
    broken = connection.execute_wrapper(_failing(IntegrityError("violates check constraint")))
    with caplog.at_level(logging.ERROR, logger="powercontext"), broken:
        response = write(client, key)
    assert response.status_code == 500
    assert "Retry-After" not in response
    assert response.json() == {
        "error": {"code": "internal_error", "message": "an unexpected error occurred", "fields": []}
    }
    assert any(r.levelno == logging.ERROR and r.exc_info for r in caplog.records if r.name == "powercontext")


def test_the_sqlite_busy_timeout_stays_well_below_the_worker_timeout(settings):
    if connection.vendor != "sqlite":
        pytest.skip("the busy timeout is SQLite's")
    gunicorn_worker_timeout = 30
    assert settings.DATABASES["default"]["OPTIONS"]["timeout"] <= gunicorn_worker_timeout / 2
