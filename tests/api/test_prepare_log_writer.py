"""The prepare log's background writer (POWERCONTEXT_PREPARE_LOG_WRITER=background, the default): a prepare runs no
log statement at all, its row is the one the inline write records, stamped when it answered, and a clean exit
writes every queued row."""

import os
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts.models import PrepareLog
from artifacts.services import prepare_log as prepare_log_service
from artifacts.services import prepare_log_writer
from tests.api.factories import add_memory, make_key, make_scope, prepare, prepare_log_inserts_failing
from tests.conftest import PROJECT_ROOT

# Every column a prepare decides (not the row's id, nor the duration, which differs from one request to the next).
COMPARED = [
    field.attname
    for field in PrepareLog._meta.concrete_fields
    if field.attname not in {"id", "created_at", "duration_ms"}
]


@pytest.fixture
def background_thread(settings):
    settings.POWERCONTEXT_PREPARE_LOG_WRITER = "background"
    yield
    prepare_log_writer.prepare_log_flush()


@pytest.fixture
def background(background_thread, monkeypatch):
    """The background writer, its rows written only by the test's own ``prepare_log_flush``: the writer thread's
    connection cannot see the API key this test's transaction created (its insert would fail the foreign key, on
    PostgreSQL, whenever the thread woke first)."""
    take = prepare_log_writer._take
    monkeypatch.setattr(
        prepare_log_writer, "_take", lambda: [] if threading.current_thread().name == "prepare-log-writer" else take()
    )


@pytest.fixture
def key(db):
    scope = make_scope("project:demo")
    add_memory(scope, {"m1": "alpha release notes", "m2": "alpha deploy steps"})
    return make_key(read=[scope])


def _columns(log: PrepareLog) -> dict:
    return {name: getattr(log, name) for name in COMPARED}


def test_a_prepare_runs_no_log_statement_and_its_queued_row_is_the_inline_row(client, key, background, settings):
    with CaptureQueriesContext(connection) as queries:
        assert prepare(client, key, query="alpha", assembly={}).status_code == 200
        refused = prepare(client, key, scope_id="project:nowhere", query="alpha", assembly={})
    assert refused.status_code == 404
    assert not [q for q in queries.captured_queries if PrepareLog._meta.db_table in q["sql"]]
    assert prepare_log_writer.prepare_log_flush() == 2
    queued = [_columns(log) for log in PrepareLog.objects.order_by("id")]

    settings.POWERCONTEXT_PREPARE_LOG_WRITER = "inline"
    prepare(client, key, query="alpha", assembly={})
    prepare(client, key, scope_id="project:nowhere", query="alpha", assembly={})
    inline = [_columns(log) for log in PrepareLog.objects.order_by("id")[2:]]
    assert queued == inline


def test_a_queued_row_keeps_the_time_its_prepare_answered(client, key, background):
    prepare(client, key, query="alpha", assembly={})
    answered = time.time()
    time.sleep(0.05)
    prepare_log_writer.prepare_log_flush()
    assert PrepareLog.objects.get().created_at.timestamp() <= answered


def test_a_failed_batch_loses_only_the_rows_that_fail_and_counts_them(client, key, background, monkeypatch):
    monkeypatch.setitem(prepare_log_service.WRITE_FAILURES, "warned_at", -1e9)
    before = prepare_log_service.WRITE_FAILURES["count"]
    for _ in range(3):
        prepare(client, key, query="alpha", assembly={})
    with prepare_log_inserts_failing("disk full"):
        assert prepare_log_writer.prepare_log_flush() == 0
    assert prepare_log_service.WRITE_FAILURES["count"] == before + 3
    assert not PrepareLog.objects.exists()
    prepare(client, key, query="alpha", assembly={})
    assert prepare_log_writer.prepare_log_flush() == 1


@pytest.mark.django_db(transaction=True)
def test_the_writer_thread_writes_queued_rows_without_being_asked(client, background_thread):
    scope = make_scope("project:demo")
    add_memory(scope, {"m1": "alpha release notes"})
    key = make_key(read=[scope])
    for _ in range(3):
        assert prepare(client, key, query="alpha", assembly={}).status_code == 200
    deadline = time.monotonic() + 30  # a wait for the thread, not a timing: it wakes every FLUSH_SECONDS
    while PrepareLog.objects.count() < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert PrepareLog.objects.count() == 3
    assert prepare_log_writer.prepare_log_queued() == 0


_EXITING_PROCESS = """
import django
django.setup()
from artifacts import services
for number in range(700):
    services.prepare_log_enqueue(entry=services.PrepareLogWrite(http_status=404, error_code=f"e{number}"))
"""


def test_a_clean_exit_writes_every_queued_row(tmp_path):
    database = tmp_path / "exit.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "DJANGO_SETTINGS_MODULE": "powercontext.settings",
        "POWERCONTEXT_PREPARE_LOG_WRITER": "background",
    }
    env.pop("POWERCONTEXT_READ_REPLICA_URLS", None)
    run = {"cwd": PROJECT_ROOT, "env": env, "check": True, "capture_output": True, "timeout": 300}
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], **run)
    subprocess.run([sys.executable, "-c", _EXITING_PROCESS], **run)
    with sqlite3.connect(database) as stored:
        codes = {row[0] for row in stored.execute(f"SELECT error_code FROM {PrepareLog._meta.db_table}")}
    assert codes == {f"e{number}" for number in range(700)}


_PREPARES_THROUGH_A_POOL_OF_ONE = """
import json, sys
import django
django.setup()
from django.db import close_old_connections
from django.test import Client
from artifacts import services
from artifacts.models import PrepareLog
client = Client(HTTP_HOST="localhost")
body = json.dumps({"scope_id": "project:demo", "query": "alpha", "assembly": {}})
for _ in range(40):
    response = client.post("/v1/context/prepare", body, content_type="application/json",
                           HTTP_AUTHORIZATION="Bearer " + sys.argv[1])
    assert response.status_code == 200, response.content
    close_old_connections()
services.prepare_log_flush()
print(PrepareLog.objects.count())
"""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's pool is PostgreSQL only")
def test_with_a_pool_of_one_connection_the_writer_borrows_it_between_requests(committed_db):
    from tests.api.test_db_pool import _url_of

    scope = make_scope("project:demo")
    add_memory(scope, {"m1": "alpha release notes"})
    key = make_key(read=[scope])
    environ = {name: value for name, value in os.environ.items() if not name.startswith("POWERCONTEXT_")}
    environ |= {
        "POWERCONTEXT_DB_POOL_MAX_SIZE": "1",
        "POWERCONTEXT_DB_POOL_TIMEOUT": "5",
        "POWERCONTEXT_PREPARE_LOG_WRITER": "background",
        "DATABASE_URL": _url_of(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "powercontext.settings",  # the test settings write the log inline
    }
    completed = subprocess.run(
        [sys.executable, "-c", _PREPARES_THROUGH_A_POOL_OF_ONE, key],
        cwd=PROJECT_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    assert int(completed.stdout.split()[-1]) == 40
