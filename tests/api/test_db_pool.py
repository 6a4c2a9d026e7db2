"""psycopg's pool (POWERCONTEXT_DB_POOL_MAX_SIZE) against the real database: requests borrow and return."""

import os
import subprocess
import sys

import pytest
from django.db import connection

from tests.conftest import PROJECT_ROOT

SERVE_THROUGH_THE_POOL = """
import django
django.setup()
from django.db import close_old_connections, connection
from django.test import Client
client = Client(HTTP_HOST="localhost")
for _ in range(5):
    assert client.get("/readyz").status_code == 200, "readyz"
    close_old_connections()
stats = connection.pool.get_stats()
print(stats["pool_max"], stats["requests_num"], stats.get("connections_num", 0))
"""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's pool is PostgreSQL only")
def test_requests_borrow_a_pooled_connection_and_give_it_back(db):
    environ = {key: value for key, value in os.environ.items() if not key.startswith("POWERCONTEXT_DB_POOL")}
    environ |= {
        "POWERCONTEXT_DB_POOL_MAX_SIZE": "2",
        "POWERCONTEXT_DB_POOL_MIN_SIZE": "1",
        # The test database, already migrated (readyz checks the migrations).
        "DATABASE_URL": _url_of(connection.settings_dict),
    }
    completed = subprocess.run(
        [sys.executable, "-c", SERVE_THROUGH_THE_POOL],
        cwd=PROJECT_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    pool_max, requests, connections = (int(part) for part in completed.stdout.split())
    assert pool_max == 2
    assert requests >= 5  # every request took a connection from the pool...
    assert connections <= 2  # ...and no request opened one of its own beyond the pool's size


def _url_of(settings_dict: dict) -> str:
    user = settings_dict["USER"] or "postgres"
    host = settings_dict["HOST"] or "127.0.0.1"
    port = settings_dict["PORT"] or 5432
    return f"postgres://{user}@{host}:{port}/{settings_dict['NAME']}"
