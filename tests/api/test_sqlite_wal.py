"""SQLite's write-ahead log stays bounded: journal_size_limit on every connection, and a truncating checkpoint."""

import os
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the write-ahead log file is SQLite's"),
]
LIMIT = settings.SQLITE_WAL_LIMIT_MB * 1024 * 1024


def _wal_size(fresh) -> int:
    path = fresh.settings_dict["NAME"] + "-wal"
    return os.path.getsize(path) if os.path.exists(path) else 0


@pytest.fixture
def fresh():
    """A new connection to the test database, opened as the server opens one."""
    opened = connections.create_connection("default")
    yield opened
    with opened.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS wal_filler")
    opened.close()


def _pragma(fresh, name: str):
    with fresh.cursor() as cursor:
        cursor.execute(f"PRAGMA {name}")
        return cursor.fetchone()[0]


def test_every_connection_runs_in_wal_mode_with_a_journal_size_limit_and_a_busy_timeout(fresh):
    assert _pragma(fresh, "journal_mode") == "wal"
    assert _pragma(fresh, "journal_size_limit") == LIMIT
    assert _pragma(fresh, "busy_timeout") == settings.SQLITE_BUSY_TIMEOUT_SECONDS * 1000


def _large_write(fresh) -> None:
    with fresh.cursor() as cursor:
        cursor.execute("CREATE TABLE wal_filler (body BLOB)")
        # One transaction larger than the limit: the log has to grow past it to hold it.
        cursor.execute("BEGIN IMMEDIATE")
        for _ in range(LIMIT // (256 * 1024) + 8):
            cursor.execute("INSERT INTO wal_filler VALUES (randomblob(256 * 1024))")
        cursor.execute("COMMIT")
    assert _wal_size(fresh) > LIMIT


def test_the_log_shrinks_to_the_limit_once_a_checkpoint_lets_it_restart(fresh):
    _large_write(fresh)
    with fresh.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")  # what SQLite's automatic checkpoint does
        cursor.execute("DELETE FROM wal_filler WHERE rowid = 1")  # the next write restarts the log
    assert 0 < _wal_size(fresh) <= LIMIT


def test_the_purge_command_truncates_the_log(fresh):
    _large_write(fresh)
    err = StringIO()
    call_command("purge_prepare_log", stdout=StringIO(), stderr=err)
    assert "SQLite write-ahead log checkpointed" in err.getvalue()
    assert _wal_size(fresh) == 0
