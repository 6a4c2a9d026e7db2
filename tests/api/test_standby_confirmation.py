"""A write acknowledged only once a standby has it (``POWERCONTEXT_DB_REQUIRE_STANDBY``, docs/scaling.md §12).

What the primary says of its standbys is played through Django's execute wrapper, which answers the app's question
to ``pg_stat_replication`` with a row of our choosing (as tests/api/test_database_failover.py plays a dropped
connection); one test asks the real server, which has no standby in the suite.
"""

import logging

import pytest
from django.db import connection

from artifacts.models import ArtifactRevision
from infrastructure import metrics, standby
from tests.api.factories import auth, make_key, make_scope

ENTRY = "/v1/memory/entries"

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="a standby is PostgreSQL's")

# The answers to (standbys streaming, of them without a visible flush_lsn, one of them flushed past the write).
FLUSHED = "SELECT 1, 0, true"
BEHIND = "SELECT 1, 0, false"
NO_STANDBY = "SELECT 0, 0, false"
HIDDEN = "SELECT 1, 1, false"


class StandbyAnswers:
    """Answers the app's questions to pg_stat_replication with ``answer``; counts them."""

    def __init__(self, answer: str) -> None:
        self.answer, self.asked = answer, 0

    def __call__(self, execute, sql, params, many, context):
        if "pg_stat_replication" in sql:
            self.asked += 1
            return execute(self.answer, (), many, context)
        return execute(sql, params, many, context)


@pytest.fixture(autouse=True)
def standby_required(settings, monkeypatch):
    settings.POWERCONTEXT_DB_REQUIRE_STANDBY = True
    settings.POWERCONTEXT_DB_RETRY_DELAY_MS = 0
    monkeypatch.setattr(standby, "STANDBY_WAIT_SECONDS", 0.02)


@pytest.fixture
def writer(db):
    scope = make_scope("project:standby")
    return make_key(read=[scope], write=[scope])


def write(client, key, body, **headers):
    payload = {"scope_id": "project:standby", "artifact_id": "notes", "entry_id": "entry-1", "body": body}
    return client.post(ENTRY, payload, content_type="application/json", **auth(key), **headers)


def unavailable_for_standby() -> float:
    return metrics.UNAVAILABLE.labels("standby")._value.get()


def test_a_write_the_standby_has_flushed_is_answered_as_usual(client, writer):
    answers = StandbyAnswers(FLUSHED)

    with connection.execute_wrapper(answers):
        response = write(client, writer, "kept on both nodes")

    assert response.status_code == 201
    assert answers.asked == 1


def test_a_write_the_standby_has_not_flushed_is_answered_503_then_replayed_once_it_has(client, writer):
    refused = unavailable_for_standby()

    with connection.execute_wrapper(StandbyAnswers(BEHIND)):
        first = write(client, writer, "in doubt", HTTP_IDEMPOTENCY_KEY="standby-1")
    with connection.execute_wrapper(StandbyAnswers(FLUSHED)):
        again = write(client, writer, "in doubt", HTTP_IDEMPOTENCY_KEY="standby-1")

    assert first.status_code == 503
    assert first["Retry-After"]
    assert first.json()["error"]["code"] == "service_unavailable"
    assert unavailable_for_standby() == refused + 2  # the answer, and its one retry's (a keyed write runs twice)
    assert again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert ArtifactRevision.objects.count() == 1


def test_without_a_streaming_standby_a_write_is_answered_503_at_once(client, writer):
    answers = StandbyAnswers(NO_STANDBY)

    with connection.execute_wrapper(answers):
        response = write(client, writer, "nowhere to replicate")

    assert response.status_code == 503
    assert answers.asked == 1  # no waiting for a standby that is not there


def test_the_suites_server_has_no_standby_so_it_refuses_writes(client, writer):
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_replication")
        if cursor.fetchone()[0]:
            pytest.skip("this PostgreSQL has a standby streaming from it")

    response = write(client, writer, "asked of the real server")

    assert response.status_code == 503


def test_a_role_that_cannot_read_the_standbys_flush_position_is_named_in_the_log(client, writer, caplog):
    with caplog.at_level(logging.ERROR, logger="powercontext"), connection.execute_wrapper(StandbyAnswers(HIDDEN)):
        response = write(client, writer, "unconfirmable")

    assert response.status_code == 503
    assert "GRANT pg_read_all_stats" in caplog.text


def test_reads_prepares_and_searches_never_ask_the_standby(client, writer):
    with connection.execute_wrapper(StandbyAnswers(FLUSHED)):
        citation = write(client, writer, "read me").json()["citation"]
    answers = StandbyAnswers(NO_STANDBY)

    with connection.execute_wrapper(answers):
        read = client.get("/v1/artifacts/revision", citation, **auth(writer))
        prepared = client.post(
            "/v1/context/prepare",
            {"scope_id": "project:standby", "query": "read me", "assembly": {}},
            content_type="application/json",
            **auth(writer),
        )
        searched = client.post(
            "/v1/memory/search",
            {"scope_id": "project:standby", "query": "read me"},
            content_type="application/json",
            **auth(writer),
        )

    assert (read.status_code, prepared.status_code, searched.status_code) == (200, 200, 200)
    assert answers.asked == 0


def test_with_the_setting_off_a_write_never_asks_the_standby(client, writer, settings):
    settings.POWERCONTEXT_DB_REQUIRE_STANDBY = False
    answers = StandbyAnswers(NO_STANDBY)

    with connection.execute_wrapper(answers):
        response = write(client, writer, "as before")

    assert response.status_code == 201
    assert answers.asked == 0
