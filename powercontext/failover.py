"""Riding out a failover of PostgreSQL (docs/scaling.md, section 12): the app needs no restart.

While the primary is lost and a standby is promoted, a request can find its connection dropped, no server
accepting writes yet, or (for a moment) an old primary that has been demoted and refuses writes. Each of those is
transient: ``database_error_is_transient`` says so, the exception handler answers it 503 with ``Retry-After``
(never 500), and ``DatabaseRetryMiddleware`` answers a request that is safe to run twice once more, on fresh
connections, before giving up: a read (GET, HEAD), a prepare (it writes only its log row) and a write made with an
``Idempotency-Key`` (a first attempt that did commit is replayed from its kept response, not made again). Any
other write gets the 503 at once: only its client can tell whether to send it again.

Connections reach the new primary by themselves: a multi-host ``DATABASE_URL`` with
``target_session_attrs=read-write`` makes libpq try each host until one accepts writes, and the retry closes
every connection of the failed attempt first.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connections

from powercontext import metrics
from powercontext.request_context import READ_ONLY_POST_PATHS
from vocabulary.headers import IDEMPOTENCY_HEADER

# SQLSTATEs of a server that cannot take this statement now but may a moment later: a standby or a demoted
# primary refusing a write (25006), a server shutting down or starting up (57P01–57P03), and the connection
# exceptions (class 08).
_TRANSIENT_SQLSTATES = frozenset({"25006", "57P01", "57P02", "57P03"})
_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08"})

DATABASE_UNAVAILABLE_ATTRIBUTE = "powercontext_database_unavailable"
"""Set on a 503 answer whose cause was a transient database error: the middleware may run the request again."""

_RETRY_PENDING_ATTRIBUTE = "powercontext_database_retry_pending"


def database_error_is_transient(exc: BaseException) -> bool:
    """Whether a database error would likely not recur on a fresh connection a moment later."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    if not isinstance(exc, DatabaseError):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", None) or ""
    return sqlstate in _TRANSIENT_SQLSTATES or sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES


def database_retry_pending(request) -> bool:
    """Whether a transient database error in this request will be answered by running it once more (so the
    error is not yet the request's outcome, and is logged at debug level only)."""
    return getattr(getattr(request, "_request", request), _RETRY_PENDING_ATTRIBUTE, False)


def _safe_to_repeat(request) -> bool:
    if request.method in ("GET", "HEAD"):
        return True
    return request.method == "POST" and (
        request.path_info in READ_ONLY_POST_PATHS or bool(request.headers.get(IDEMPOTENCY_HEADER))
    )


def _close_connections() -> None:
    # A connection of the failed attempt may still look usable (a demoted primary answers reads): close every one
    # that no enclosing transaction holds, so the retry connects anew and libpq finds the current primary.
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


class DatabaseRetryMiddleware:
    """Runs a request that is safe to repeat once more when the database dropped it (module docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        delay_ms = settings.POWERCONTEXT_DB_RETRY_DELAY_MS
        repeatable = delay_ms >= 0 and _safe_to_repeat(request)
        if repeatable and request.method == "POST":
            # DRF reads the body from the stream once; kept here, the second attempt parses the same bytes.
            try:
                request.body  # noqa: B018 - caches the body on the request
            except Exception:  # noqa: BLE001 - too large or unreadable: the view answers that, without a retry
                repeatable = False
        setattr(request, _RETRY_PENDING_ATTRIBUTE, repeatable)
        response = self.get_response(request)
        if not (repeatable and getattr(response, DATABASE_UNAVAILABLE_ATTRIBUTE, False)):
            return response
        _close_connections()
        time.sleep(delay_ms / 1000)
        setattr(request, _RETRY_PENDING_ATTRIBUTE, False)
        retried = self.get_response(request)
        failed_again = getattr(retried, DATABASE_UNAVAILABLE_ATTRIBUTE, False)
        metrics.DATABASE_RETRIES.labels("failed" if failed_again else "recovered").inc()
        if failed_again:
            _close_connections()
        return retried
