"""Writes acknowledged only once a standby has them (``POWERCONTEXT_DB_REQUIRE_STANDBY``, docs/scaling.md §12).

PostgreSQL's synchronous replication makes a commit wait for the standby only while the primary asks for it. A
primary that commits alone acknowledges writes that a failover then takes back: pg_auto_failover's ``wait_primary``
(the standby is unhealthy), a cancelled wait for the standby, and pg_auto_failover 2.0's switchover race (its issue
#774: the monitor moves the old primary to ``wait_primary`` while promoting the standby, and the keeper cannot leave
it, so for up to the demote timeout the old primary takes writes alone that its rewind then discards; seen by
``make test-failover``: 587 of 990 writes acknowledged around a switchover lost).

With the setting on, an API write is answered 2xx only once a streaming standby has flushed this primary's log up to
where it stood after the write's commit; otherwise the answer is 503 with ``Retry-After``, as for any failover. The
write may be committed here: sent again with its ``Idempotency-Key`` it is replayed once a standby has it, or made
anew on the new primary if a failover took it back. The price: writes are refused while no standby streams.
"""

from __future__ import annotations

import logging
import time

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.http import HttpResponse
from rest_framework.renderers import JSONRenderer

from infrastructure import metrics
from infrastructure.database_conf import database_settings
from infrastructure.errors import error_body
from infrastructure.failover import DATABASE_UNAVAILABLE_ATTRIBUTE
from infrastructure.request_context import is_api_write
from vocabulary.errors import ServiceUnavailable

logger = logging.getLogger("powercontext")

STANDBY_WAIT_SECONDS = 1.0
"""How long a write's answer waits for a streaming standby to flush past it (other commits' log included, which
their own waits for the standby push along) before it is answered 503."""
_POLL_SECONDS = 0.005

_FLUSHED_SQL = (
    "SELECT count(*), count(*) FILTER (WHERE flush_lsn IS NULL), coalesce(bool_or(flush_lsn >= %s::pg_lsn), false) "
    "FROM pg_stat_replication WHERE state = 'streaming'"
)


def standby_has_flushed(alias: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether a streaming standby has flushed the primary's log up to where it stands now, so past every commit this
    connection made; waits at most ``STANDBY_WAIT_SECONDS``, and answers False at once when no standby streams."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()")
        (target,) = cursor.fetchone()
        deadline = time.monotonic() + STANDBY_WAIT_SECONDS
        while True:
            cursor.execute(_FLUSHED_SQL, [str(target)])
            streaming, hidden, flushed = cursor.fetchone()
            if flushed:
                return True
            if hidden:
                logger.error(
                    "POWERCONTEXT_DB_REQUIRE_STANDBY: the database role cannot read pg_stat_replication.flush_lsn, so "
                    "no write can be confirmed: GRANT pg_read_all_stats TO the app's role (docs/scaling.md §12)"
                )
                return False
            if not streaming or time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)


def _unconfirmed() -> HttpResponse:
    unavailable = ServiceUnavailable()
    metrics.UNAVAILABLE.labels("standby").inc()
    body = JSONRenderer().render(error_body(unavailable.code, unavailable.public_message))
    response = HttpResponse(body, status=503, content_type="application/json", headers=unavailable.headers)
    # A failover's answer: a write with an Idempotency-Key runs once more (infrastructure.failover), as a replay.
    setattr(response, DATABASE_UNAVAILABLE_ATTRIBUTE, True)
    return response


class StandbyConfirmationMiddleware:
    """With ``POWERCONTEXT_DB_REQUIRE_STANDBY``, answers a successful API write 503 unless a standby has it (module
    docstring). Inside ``DatabaseRetryMiddleware``, which runs a keyed write once more on that answer."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not (database_settings().require_standby and 200 <= response.status_code < 300):
            return response
        if not is_api_write(request) or connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
            return response
        try:
            confirmed = standby_has_flushed()
        except DatabaseError:
            logger.warning("a write's standby confirmation failed: the database is unavailable", exc_info=True)
            confirmed = False
        if confirmed:
            return response
        logger.warning("%s %s committed, but no standby has it yet: answered 503", request.method, request.path)
        return _unconfirmed()
