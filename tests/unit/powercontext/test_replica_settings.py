"""Read replica settings (docs/scaling.md §8): POWERCONTEXT_READ_REPLICA_URLS becomes database aliases and the
router, PostgreSQL only; a wrong value stops start-up naming the variable (and never showing a password)."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/powercontext"
VARIABLES = (
    "POWERCONTEXT_READ_REPLICA_URLS",
    "POWERCONTEXT_REPLICA_MAX_LAG_SECONDS",
    "POWERCONTEXT_REPLICA_SKIP_SECONDS",
    "POWERCONTEXT_DB_POOL_MAX_SIZE",
    "POWERCONTEXT_PGBOUNCER",
    "POWERCONTEXT_PREPARE_ON_REPLICAS",
    "POWERCONTEXT_REPLICA_STATEMENT_TIMEOUT_MS",
    "DATABASE_URL",
)
PRINT_SETTINGS = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({
    "databases": settings.DATABASES,
    "replicas": settings.POWERCONTEXT_READ_REPLICAS,
    "routers": settings.DATABASE_ROUTERS,
    "max_lag": settings.POWERCONTEXT_REPLICA_MAX_LAG_SECONDS,
    "skip": settings.POWERCONTEXT_REPLICA_SKIP_SECONDS,
    "prepare_on_replicas": settings.POWERCONTEXT_PREPARE_ON_REPLICAS,
}, default=str))
"""


def _settings(database_url: str = POSTGRES_URL, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    environ["DJANGO_SETTINGS_MODULE"] = "powercontext.settings"
    return subprocess.run(
        [sys.executable, "-c", PRINT_SETTINGS],
        cwd=PROJECT_ROOT,
        env=environ | {"DATABASE_URL": database_url} | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _loaded(database_url: str = POSTGRES_URL, **env) -> dict:
    completed = _settings(database_url, **env)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_without_replicas_there_is_one_database_and_no_router():
    loaded = _loaded()

    assert list(loaded["databases"]) == ["default"]
    assert loaded["replicas"] == []
    assert loaded["routers"] == []
    assert (loaded["max_lag"], loaded["skip"]) == (10, 10)


def test_each_replica_url_becomes_an_alias_that_tests_mirror_to_the_primary():
    urls = "postgres://reader:s3cret@10.0.0.11:5432/powercontext, postgres://10.0.0.12/powercontext?connect_timeout=5"
    loaded = _loaded(POWERCONTEXT_READ_REPLICA_URLS=urls, POWERCONTEXT_REPLICA_MAX_LAG_SECONDS="3")
    first, second = loaded["databases"]["replica_1"], loaded["databases"]["replica_2"]

    assert loaded["replicas"] == ["replica_1", "replica_2"]
    assert loaded["routers"] == ["infrastructure.replicas.ReplicaRouter"]
    assert (first["HOST"], first["USER"], first["NAME"]) == ("10.0.0.11", "reader", "powercontext")
    assert first["OPTIONS"]["connect_timeout"] == 2  # a replica that does not answer is given up soon
    assert second["OPTIONS"]["connect_timeout"] == 5  # the URL's own wins
    assert first["TEST"]["MIRROR"] == second["TEST"]["MIRROR"] == "default"
    assert first["CONN_MAX_AGE"] == 60 and first["CONN_HEALTH_CHECKS"] is True
    assert loaded["max_lag"] == 3


def test_replicas_are_reached_the_way_the_primary_is_pooled():
    loaded = _loaded(
        POWERCONTEXT_READ_REPLICA_URLS="postgres://10.0.0.11/powercontext",
        POWERCONTEXT_PGBOUNCER="transaction",
        POWERCONTEXT_DB_POOL_MAX_SIZE="2",
    )
    replica = loaded["databases"]["replica_1"]

    assert replica["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert replica["OPTIONS"]["server_side_binding"] is True
    assert replica["OPTIONS"]["prepare_threshold"] is None
    assert replica["OPTIONS"]["pool"]["max_size"] == 2


def test_a_replica_connection_gives_up_a_statement_after_the_replica_statement_timeout():
    url = "postgres://10.0.0.11/powercontext?options=-c%20work_mem%3D8MB"
    default = _loaded(POWERCONTEXT_READ_REPLICA_URLS=url)
    custom = _loaded(POWERCONTEXT_READ_REPLICA_URLS=url, POWERCONTEXT_REPLICA_STATEMENT_TIMEOUT_MS="500")
    off = _loaded(POWERCONTEXT_READ_REPLICA_URLS=url, POWERCONTEXT_REPLICA_STATEMENT_TIMEOUT_MS="0")

    assert default["databases"]["replica_1"]["OPTIONS"]["options"] == "-c work_mem=8MB -c statement_timeout=2000"
    assert custom["databases"]["replica_1"]["OPTIONS"]["options"] == "-c work_mem=8MB -c statement_timeout=500"
    assert off["databases"]["replica_1"]["OPTIONS"]["options"] == "-c work_mem=8MB"
    assert "options" not in default["databases"]["default"]["OPTIONS"]  # the primary's statements are unbounded
    assert default["prepare_on_replicas"] is False  # opt-in


def test_behind_pgbouncer_in_transaction_mode_no_statement_timeout_is_sent_as_a_startup_option():
    loaded = _loaded(
        POWERCONTEXT_READ_REPLICA_URLS="postgres://10.0.0.11/powercontext", POWERCONTEXT_PGBOUNCER="transaction"
    )

    assert "options" not in loaded["databases"]["replica_1"]["OPTIONS"]


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"POWERCONTEXT_READ_REPLICA_URLS": "not a url"}, "POWERCONTEXT_READ_REPLICA_URLS"),
        ({"POWERCONTEXT_READ_REPLICA_URLS": "mysql://10.0.0.11/powercontext"}, "POWERCONTEXT_READ_REPLICA_URLS"),
        ({"POWERCONTEXT_READ_REPLICA_URLS": "postgres://10.0.0.11/"}, "POWERCONTEXT_READ_REPLICA_URLS"),
        ({"POWERCONTEXT_READ_REPLICA_URLS": "postgres://10.0.0.11/db,"}, "POWERCONTEXT_READ_REPLICA_URLS"),
        ({"POWERCONTEXT_REPLICA_MAX_LAG_SECONDS": "0"}, "POWERCONTEXT_REPLICA_MAX_LAG_SECONDS"),
        ({"POWERCONTEXT_REPLICA_SKIP_SECONDS": "soon"}, "POWERCONTEXT_REPLICA_SKIP_SECONDS"),
    ],
)
def test_an_invalid_replica_setting_stops_start_up_naming_the_variable(env, variable):
    completed = _settings(**env)

    assert completed.returncode != 0
    last_line = completed.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured:")
    assert variable in last_line


def test_an_invalid_replica_url_is_named_without_its_password():
    completed = _settings(POWERCONTEXT_READ_REPLICA_URLS="postgres://reader:s3cret@10.0.0.11:port/powercontext")

    last_line = completed.stderr.strip().splitlines()[-1]
    assert "replica 1 ('postgres://reader:***@10.0.0.11:port/powercontext')" in last_line
    assert "s3cret" not in completed.stderr


def test_a_sqlite_database_ignores_the_replica_urls(tmp_path):
    loaded = _loaded(
        f"sqlite:///{tmp_path / 'scratch.sqlite3'}", POWERCONTEXT_READ_REPLICA_URLS="postgres://10.0.0.11/powercontext"
    )

    assert list(loaded["databases"]) == ["default"]
    assert loaded["replicas"] == []
    assert loaded["routers"] == []
