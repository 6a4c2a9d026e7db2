"""PostgreSQL helpers for tests that step outside Django's connection: another role, another database.

Through PgBouncer (``tests/pgbouncer/run.py``) such a test must know two things the settings do not say: where
PostgreSQL itself listens (PgBouncer lets in only the test user), and that PgBouncer keeps server connections to
the test database open after Django closed its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

DIRECT_ADDRESS_VARIABLE = "POWERCONTEXT_TEST_DIRECT_POSTGRES"
"""``host:port`` of PostgreSQL itself, set by the PgBouncer runner."""


def through_pgbouncer() -> bool:
    """Whether this test run reaches PostgreSQL through PgBouncer in transaction mode."""
    return os.environ.get("POWERCONTEXT_PGBOUNCER") == "transaction"


def direct_postgres_address(settings: Mapping) -> tuple[str, int]:
    """Host and port of PostgreSQL itself: the runner's when set, else the database settings'."""
    if direct := os.environ.get(DIRECT_ADDRESS_VARIABLE):
        host, _, port = direct.rpartition(":")
        return host, int(port)
    return settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432)


def pgbouncer_server_connections_closed(settings: Mapping, database: str) -> None:
    """Make PgBouncer close its server connections to ``database`` (its clients must be gone already).

    ``CREATE DATABASE … TEMPLATE`` needs a template nobody is connected to; PgBouncer keeps pooled server
    connections open. KILL drops them, RESUME lets new clients in again. No-op without PgBouncer.
    """
    if not through_pgbouncer():
        return
    import psycopg

    # The admin console speaks the simple query protocol only: a client-side cursor sends the text as is.
    with psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"],
        user=settings["USER"],
        dbname="pgbouncer",
        autocommit=True,
        cursor_factory=psycopg.ClientCursor,
    ) as console:
        console.execute(f'KILL "{database}"')
        console.execute(f'RESUME "{database}"')
