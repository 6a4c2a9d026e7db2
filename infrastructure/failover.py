"""Riding out a failover of PostgreSQL (docs/scaling.md, section 12): the app needs no restart.

While the primary is lost and a standby is promoted, a request can find its connection dropped, no server
accepting writes yet, or (for a moment) an old primary that has been demoted and refuses writes. Each of those is
a failover error (``database_error_is_failover``), one kind of transient error (``database_error_is_transient``,
which a busy server's timeouts are too): the exception handler answers any transient error 503 with
``Retry-After`` (never 500), and ``DatabaseRetryMiddleware`` answers a request that failed over and is safe to run
twice once more, on fresh connections, before giving up: a read (GET, HEAD), an API key's prepare or search (a
prepare writes only its log row) and an API key's write made with an ``Idempotency-Key`` (a first attempt that did
commit is replayed from its kept response, not made again). Any other write gets the 503 at once: only its client
can tell whether to send it again.

Connections reach the new primary by themselves: a multi-host ``DATABASE_URL`` with
``target_session_attrs=read-write`` makes libpq try each host until one accepts writes, and the retry closes
every connection of the failed attempt first.
"""

from __future__ import annotations

import time

import psycopg
from django.db import DatabaseError, InterfaceError, OperationalError, connections
from psycopg_pool import PoolTimeout

from infrastructure import metrics
from infrastructure.database_conf import database_settings
from infrastructure.request_context import READ_ONLY_POST_PATHS, is_api_write
from vocabulary.headers import IDEMPOTENCY_HEADER

# SQLSTATEs of a failover: a standby or a demoted primary refusing a write (25006), a server shutting down or
# starting up (57P01–57P03), and the connection exceptions (class 08).
_FAILOVER_SQLSTATES = frozenset({"25006", "57P01", "57P02", "57P03"})
_FAILOVER_SQLSTATE_CLASSES = frozenset({"08"})

DATABASE_UNAVAILABLE_ATTRIBUTE = "powercontext_database_unavailable"
"""Set on a 503 answer whose cause was a failover (``database_error_is_failover``): the middleware may run the
request again."""

_RETRY_PENDING_ATTRIBUTE = "powercontext_database_retry_pending"


def database_error_is_transient(exc: BaseException) -> bool:
    """Whether a database error may not recur a moment later (answered 503 with ``Retry-After``, never 500): the
    server was lost or is failing over (``database_error_is_failover``), or it is busy past a limit (a statement or
    pool timeout, too many connections, out of memory)."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    if not isinstance(exc, DatabaseError):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", None) or ""
    return _is_failover_sqlstate(sqlstate)


def database_error_is_failover(exc: BaseException) -> bool:
    """Whether fresh connections a moment later may reach a server that answers: the connection was lost or refused,
    the server is shutting down or starting up, or it is a demoted primary refusing a write. Only these are run once
    more (``DatabaseRetryMiddleware``): a busy server (a statement or pool timeout, too many connections, out of
    memory) would only pay the request twice, and SQLite has no failover to ride out."""
    if isinstance(exc, InterfaceError):
        return True
    cause = exc.__cause__ if isinstance(exc, DatabaseError) else None
    if not isinstance(cause, psycopg.Error) or isinstance(cause, PoolTimeout):
        return False
    sqlstate = cause.sqlstate
    if sqlstate is None:  # no server answered: the connection itself failed
        return isinstance(cause, psycopg.OperationalError)
    return _is_failover_sqlstate(sqlstate)


def _is_failover_sqlstate(sqlstate: str) -> bool:
    return sqlstate in _FAILOVER_SQLSTATES or sqlstate[:2] in _FAILOVER_SQLSTATE_CLASSES


def database_retry_pending(request) -> bool:
    """Whether a transient database error in this request will be answered by running it once more (so the
    error is not yet the request's outcome, and is logged at debug level only)."""
    return getattr(getattr(request, "_request", request), _RETRY_PENDING_ATTRIBUTE, False)


def _safe_to_repeat(request) -> bool:
    if request.method in ("GET", "HEAD"):
        return True
    # A POST is kept in memory for its second run: only an API key's prepare, search or keyed API write (an anonymous
    # or misdirected body is never read here, before the view answers it 401 or 404).
    if request.method != "POST" or not request.headers.get("Authorization"):
        return False
    return request.path_info in READ_ONLY_POST_PATHS or (
        bool(request.headers.get(IDEMPOTENCY_HEADER)) and is_api_write(request)
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
        delay_ms = database_settings().retry_delay_ms
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
