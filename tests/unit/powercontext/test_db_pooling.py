"""Connection pooling settings (docs/scaling.md): off by default, opt-in by the environment, PostgreSQL only."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/powercontext"
POOLING_VARIABLES = (
    "POWERCONTEXT_DB_POOL_MAX_SIZE",
    "POWERCONTEXT_DB_POOL_MIN_SIZE",
    "POWERCONTEXT_DB_POOL_TIMEOUT",
    "POWERCONTEXT_PGBOUNCER",
    "POWERCONTEXT_PG_PREPARE_THRESHOLD",
)
PRINT_DATABASE = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps(settings.DATABASES["default"], default=str))
"""


def _settings(database_url: str | None = POSTGRES_URL, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in (*POOLING_VARIABLES, "DATABASE_URL")}
    if database_url:
        environ["DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "-c", PRINT_DATABASE],
        cwd=PROJECT_ROOT,
        env=environ | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _database(database_url: str | None = POSTGRES_URL, **env) -> dict:
    completed = _settings(database_url, **env)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_without_pooling_connections_persist_with_health_checks():
    database = _database()

    assert database["CONN_MAX_AGE"] == 60
    assert database["CONN_HEALTH_CHECKS"] is True
    assert "pool" not in database["OPTIONS"]
    assert database["DISABLE_SERVER_SIDE_CURSORS"] is False


def test_postgresql_binds_parameters_on_the_server_and_prepares_repeated_statements():
    database = _database()

    assert database["OPTIONS"]["server_side_binding"] is True
    assert database["OPTIONS"]["prepare_threshold"] == 5


@pytest.mark.parametrize(("value", "threshold"), [("0", None), ("2", 2)])
def test_the_prepare_threshold_is_set_by_the_environment_and_zero_turns_it_off(value, threshold):
    database = _database(POWERCONTEXT_PG_PREPARE_THRESHOLD=value)

    assert database["OPTIONS"]["prepare_threshold"] == threshold
    assert database["OPTIONS"]["server_side_binding"] is True


def test_the_pool_replaces_persistent_connections():
    database = _database(POWERCONTEXT_DB_POOL_MAX_SIZE="4", POWERCONTEXT_DB_POOL_MIN_SIZE="2")

    assert database["CONN_MAX_AGE"] == 0  # Django refuses a pool with persistent connections
    assert database["CONN_HEALTH_CHECKS"] is True  # the pool checks each connection it hands out
    assert database["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 4, "timeout": 10}


def test_pgbouncer_transaction_mode_keeps_nothing_on_the_server_between_transactions():
    database = _database(POWERCONTEXT_PGBOUNCER="transaction")

    assert database["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert database["OPTIONS"]["prepare_threshold"] is None
    assert database["CONN_MAX_AGE"] == 60  # client connections to PgBouncer may persist


def test_pgbouncer_session_mode_changes_nothing():
    session, direct = _database(POWERCONTEXT_PGBOUNCER="session"), _database()

    assert {**session, "TEST": None} == {**direct, "TEST": None}  # the test database name holds the process id


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"POWERCONTEXT_DB_POOL_MAX_SIZE": "0"}, "POWERCONTEXT_DB_POOL_MAX_SIZE"),
        ({"POWERCONTEXT_DB_POOL_MAX_SIZE": "many"}, "POWERCONTEXT_DB_POOL_MAX_SIZE"),
        ({"POWERCONTEXT_DB_POOL_MAX_SIZE": "2", "POWERCONTEXT_DB_POOL_MIN_SIZE": "3"}, "POWERCONTEXT_DB_POOL_MIN_SIZE"),
        ({"POWERCONTEXT_DB_POOL_MAX_SIZE": "2", "POWERCONTEXT_DB_POOL_TIMEOUT": "0"}, "POWERCONTEXT_DB_POOL_TIMEOUT"),
        ({"POWERCONTEXT_PGBOUNCER": "statement"}, "POWERCONTEXT_PGBOUNCER"),
        ({"POWERCONTEXT_PG_PREPARE_THRESHOLD": "-1"}, "POWERCONTEXT_PG_PREPARE_THRESHOLD"),
        ({"POWERCONTEXT_PG_PREPARE_THRESHOLD": "often"}, "POWERCONTEXT_PG_PREPARE_THRESHOLD"),
    ],
)
def test_an_invalid_pooling_setting_stops_start_up_naming_the_variable(env, variable):
    completed = _settings(**env)

    assert completed.returncode != 0
    last_line = completed.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured:")
    assert variable in last_line


@pytest.mark.parametrize(
    "env",
    [
        {"POWERCONTEXT_DB_POOL_MAX_SIZE": "2"},
        {"POWERCONTEXT_PGBOUNCER": "transaction"},
        {"POWERCONTEXT_PG_PREPARE_THRESHOLD": "2"},
    ],
)
def test_a_sqlite_database_ignores_the_pooling_settings(env, tmp_path):
    url = f"sqlite:///{tmp_path / 'scratch.sqlite3'}"

    assert {**_database(url, **env), "TEST": None} == {**_database(url), "TEST": None}
