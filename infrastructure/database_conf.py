"""The database's request-time settings (failover retry, standby confirmation), read through one accessor:
``database_settings().retry_delay_ms`` etc.

Read from ``django.conf.settings`` once and cached until a setting changes (``infrastructure/conf.py``); a bad value is
the system check error ``powercontext.E070`` naming its environment variable (registered by ``artifacts/apps.py``,
which registers what the apps add to the infrastructure). The connection settings proper (``DATABASES``: URL, pool,
PgBouncer, SQLite's timeouts) are Django's, built in ``powercontext/settings.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from infrastructure import conf


@dataclass(frozen=True)
class DatabaseSettings:
    retry_delay_ms: int
    """Milliseconds before a request safe to repeat runs once more after the database dropped it; -1: never."""
    require_standby: bool
    """An API write is answered 2xx only once a streaming standby has flushed it."""


database_settings = conf.Accessor(
    DatabaseSettings,
    (
        conf.Field(
            "retry_delay_ms", "POWERCONTEXT_DB_RETRY_DELAY_MS", "POWERCONTEXT_DB_RETRY_DELAY_MS", conf.whole(-1), 250
        ),
        conf.Field(
            "require_standby",
            "POWERCONTEXT_DB_REQUIRE_STANDBY",
            "POWERCONTEXT_DB_REQUIRE_STANDBY",
            conf.boolean,
            False,
        ),
    ),
    check_id="powercontext.E070",
)
"""``database_settings()``: this process's ``DatabaseSettings``."""
