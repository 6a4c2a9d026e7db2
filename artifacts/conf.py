"""The artifacts app's own settings, read through one accessor per area: the prepare log's
(``prepare_log_settings().enabled`` etc.) and the idempotency keys' (``idempotency_settings().retention_hours``).

Read from ``django.conf.settings`` once and cached until a setting changes (``infrastructure/conf.py``); a bad value is
the system check error ``powercontext.E030`` (``E080``: idempotency) naming its environment variable (registered by
``artifacts/apps.py``).
Recall's settings are ``artifacts/recall/conf.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from infrastructure import conf

PREPARE_LOG_WRITERS = ("background", "inline")


@dataclass(frozen=True)
class PrepareLogSettings:
    enabled: bool
    """Every prepare recorded (POWERCONTEXT_PREPARE_LOG)."""
    writer: str
    """``background`` (a thread of the worker inserts the queued rows) or ``inline``."""
    retention_days: int
    query_max_bytes: int
    """A longer query is logged as its SHA-256 and size only; 0: no query text at all."""
    max_mb: int
    """The log's total size beyond which the purge deletes the oldest entries; 0: no cap."""


prepare_log_settings = conf.Accessor(
    PrepareLogSettings,
    (
        conf.Field("enabled", "POWERCONTEXT_PREPARE_LOG", "POWERCONTEXT_PREPARE_LOG", conf.boolean, True),
        conf.Field(
            "writer",
            "POWERCONTEXT_PREPARE_LOG_WRITER",
            "POWERCONTEXT_PREPARE_LOG_WRITER",
            conf.one_of(PREPARE_LOG_WRITERS),
            "background",
        ),
        conf.Field(
            "retention_days",
            "POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS",
            "POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS",
            conf.whole(1),
            30,
        ),
        conf.Field(
            "query_max_bytes",
            "POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES",
            "POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES",
            conf.whole(0),
            1024,
        ),
        conf.Field("max_mb", "POWERCONTEXT_PREPARE_LOG_MAX_MB", "POWERCONTEXT_PREPARE_LOG_MAX_MB", conf.whole(0), 2048),
    ),
    check_id="powercontext.E030",
)
"""``prepare_log_settings()``: this process's ``PrepareLogSettings``."""


@dataclass(frozen=True)
class IdempotencySettings:
    retention_hours: int
    """How long a write's ``Idempotency-Key`` is remembered per API key."""


idempotency_settings = conf.Accessor(
    IdempotencySettings,
    (
        conf.Field(
            "retention_hours",
            "POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS",
            "POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS",
            conf.whole(1),
            24,
        ),
    ),
    check_id="powercontext.E080",
)
"""``idempotency_settings()``: this process's ``IdempotencySettings``."""
