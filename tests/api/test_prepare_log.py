"""The prepare log: every prepare is recorded, and any logged prepare re-renders byte for byte."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from artifacts.models import PrepareLog
from artifacts.services import prepare_log as prepare_log_service
from assembly.replay import prepare_replay
from tests.api.factories import (
    add_experience,
    add_memory,
    add_profile,
    add_topic,
    make_key,
    make_key_object,
    make_scope,
    prepare,
    prepare_log_inserts_failing,
    prepare_raw,
    update_memory,
)
from tests.conftest import GOLDEN_CASES, golden_prepare

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    team = make_scope("team:platform")
    demo = make_scope("project:demo", references=[team])
    add_memory(demo, {"m1": "alpha release notes", "m2": "alpha deploy steps"})
    add_memory(team, {"t1": "alpha team rule"})
    add_experience(demo, "exp-1", "alpha lesson learned")
    add_topic(demo, "topic-1", title="Alpha", summary="About alpha", body="intro\nalpha detail line\n")
    add_profile(demo, "prefers short answers")
    api_key, key = make_key_object(read=[demo, team])
    return {"demo": demo, "team": team, "key": key, "api_key": api_key}


def _last() -> PrepareLog:
    return PrepareLog.objects.order_by("-id").first()


@pytest.mark.parametrize("case", GOLDEN_CASES)
def test_every_golden_prepare_is_logged_and_replays_byte_for_byte(client, case):
    body = golden_prepare(client, case).json()
    log = _last()
    assert (log.http_status, log.content_bytes, log.result_status) == (200, body["content_bytes"], body["status"])
    replay = prepare_replay(log=log)
    assert replay.matches, replay.problems
    assert replay.result.content == body["content"]


def test_a_prepare_records_key_scope_request_and_the_candidates_in_input_order(client, world):
    sections = [{"family": "topic_memory", "limit": 1}, {"family": "memory", "limit": 2}]
    response = prepare(client, world["key"], query="alpha", max_bytes=3000, assembly={"sections": sections})
    assert response.status_code == 200
    log = _last()
    assert log.api_key_id == world["api_key"].pk and log.scope == world["demo"]
    assert (log.scope_sent, log.mode, log.query, log.max_bytes) == ("project:demo", "markdown", "alpha", 3000)
    record = json.loads(log.record)
    assert record["scopes"] == ["project:demo", "team:platform"]
    assert record["options"] == {"sections": [["topic_memory", 1], ["memory", 2]], "show": []}
    # memory: one list per scope, in retrieval order; the scope is an index into "scopes".
    assert [[item[0] for item in hits] for hits in record["recalled"]["memory"]] == [[0, 0], [1]]
    assert record["recalled"]["topic_memory"] == [[[0, "topic-1", 1]]]
    replay = prepare_replay(log=log)
    assert replay.matches and replay.result.content == response.json()["content"]


def test_a_legacy_prepare_replays_after_the_memory_moved_on(client, world):
    response = prepare(client, world["key"], query="alpha")
    update_memory(world["demo"], "m1", "alpha release notes, rewritten")
    log = _last()
    assert log.mode == "legacy" and json.loads(log.record)["options"] is None
    replay = prepare_replay(log=log)
    assert replay.matches, replay.problems
    assert replay.result.content == response.json()["content"]


def test_a_replay_that_differs_from_the_logged_hash_is_reported(client, world):
    prepare(client, world["key"], query="alpha", assembly={})
    log = _last()
    PrepareLog.objects.filter(pk=log.pk).update(content_sha256="0" * 64)
    log.refresh_from_db()
    replay = prepare_replay(log=log)
    assert not replay.matches
    assert any("differs from the logged" in problem for problem in replay.problems)


@pytest.mark.parametrize(
    ("status", "code", "send"),
    [
        (401, "unauthenticated", lambda client, w: prepare(client, "pc_wrong", query="alpha")),
        (404, "not_found", lambda client, w: prepare(client, w["key"], scope_id="project:nope")),
        (422, "invalid_request", lambda client, w: prepare(client, w["key"], max_bytes=1)),
        (422, "invalid_request", lambda client, w: prepare_raw(client, w["key"], "[1")),
    ],
)
def test_refusals_are_logged_without_bodies(client, world, status, code, send):
    assert send(client, world).status_code == status
    log = _last()
    assert (log.http_status, log.error_code, log.record, log.content_sha256) == (status, code, "", "")
    assert log.api_key_id == (None if status == 401 else world["api_key"].pk)
    assert prepare_replay(log=log) is None


def test_a_refused_reference_is_logged_with_the_key_and_the_scope_as_sent(client, world):
    key = make_key(read=[world["demo"]])
    assert prepare(client, key, query="alpha").status_code == 403
    log = _last()
    assert (log.http_status, log.error_code, log.scope_sent, log.scope) == (
        403,
        "forbidden",
        "project:demo",
        world["demo"],
    )


def test_the_log_can_be_turned_off(client, world, settings):
    settings.POWERCONTEXT_PREPARE_LOG = False
    assert prepare(client, world["key"], query="alpha").status_code == 200
    assert not PrepareLog.objects.exists()


def test_a_failed_log_write_never_fails_the_prepare_and_is_counted(client, world, monkeypatch, caplog):
    monkeypatch.setitem(prepare_log_service.WRITE_FAILURES, "warned_at", -1e9)
    before = prepare_log_service.WRITE_FAILURES["count"]
    with prepare_log_inserts_failing("disk full"):
        response = prepare(client, world["key"], query="alpha", assembly={})
        assert response.status_code == 200 and response.json()["status"] == "ready"
        assert prepare_log_service.WRITE_FAILURES["count"] == before + 1
        assert prepare(client, world["key"], query="alpha", assembly={}).status_code == 200
    assert not PrepareLog.objects.exists()
    # One warning line, not one per failure: the second failure within a minute is only counted.
    assert [r.getMessage() for r in caplog.records if "prepare log" in r.getMessage()] == [
        f"prepare log write failed: RuntimeError: disk full ({before + 1} failures so far)"
    ]
    assert prepare_log_service.WRITE_FAILURES["count"] == before + 2


def test_a_prepare_writes_its_log_in_one_statement(client, world, django_assert_max_num_queries):
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        prepare(client, world["key"], query="alpha", assembly={})
    inserts = [q["sql"] for q in queries.captured_queries if "artifacts_preparelog" in q["sql"]]
    assert len(inserts) == 1 and inserts[0].startswith("INSERT")


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_log_is_one_autocommitted_statement_that_leaves_the_session_as_it_was(client, world):
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert prepare(client, world["key"], query="alpha", assembly={}).status_code == 200
    # No BEGIN, SET or COMMIT of its own: one round trip (PostgreSQL had four).
    assert [q["sql"].split()[0] for q in queries.captured_queries if not q["sql"].startswith("SELECT")] == ["INSERT"]
    assert PrepareLog.objects.count() == 1
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("on",)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="asynchronous commit is PostgreSQL's")
def test_on_postgresql_the_log_statement_turns_synchronous_commit_off_for_its_transaction_alone(world):
    from django.db import transaction

    with transaction.atomic():
        assert prepare_log_service.prepare_log_write(entry=prepare_log_service.PrepareLogWrite(http_status=401))
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("off",)
    assert PrepareLog.objects.filter(http_status=401).exists()


def test_purge_deletes_entries_past_the_retention_and_shows_progress(client, world, settings):
    settings.POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS = 7
    for _ in range(3):
        prepare(client, world["key"], query="alpha")
    old = list(PrepareLog.objects.values_list("pk", flat=True)[:2])
    PrepareLog.objects.filter(pk__in=old).update(created_at=timezone.now() - timedelta(days=8))
    out, err = StringIO(), StringIO()
    call_command("purge_prepare_log", "--batch", "1", stdout=out, stderr=err)
    assert out.getvalue().strip() == "2 prepare log entries purged"
    assert "older than 7 days" in err.getvalue() and "  2 deleted" in err.getvalue()
    assert PrepareLog.objects.count() == 1
