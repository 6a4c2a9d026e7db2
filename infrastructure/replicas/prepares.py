"""Prepares on replicas and consistency tokens (docs/scaling.md §11, opt-in with POWERCONTEXT_PREPARE_ON_REPLICAS).

Writes answer with a consistency token (``ConsistencyTokenMiddleware``); a prepare runs on a replica only when the
replica has replayed the caller's token (``replica_serve``), with every read of the prepare there (``reads_on``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from infrastructure.metrics import PREPARE_READS
from infrastructure.replicas.conf import replica_settings
from infrastructure.replicas.health import replica_read_failed
from infrastructure.replicas.routing import replica_alias, replicas_configured, routed_to
from infrastructure.request_context import is_api_write
from vocabulary.headers import CONSISTENCY_TOKEN_HEADER

T = TypeVar("T")

# Consistency tokens (docs/scaling.md §11): a write's token is the primary's WAL insert position read after its
# commit, which is at or past the end of the commit record; a replica whose replay position has reached it has
# replayed the write. Opaque to clients: the LSN text (e.g. 16/B374D848).
SERVED_BY_HEADER = "PowerContext-Served-By"
TOKEN_POSITION_SQL = "SELECT pg_current_wal_insert_lsn()::text"
# NULL (not in recovery: such a server is refused by the identity check) reads as not replayed.
TOKEN_REPLAYED_SQL = "SELECT COALESCE(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)"
_TOKEN_FORMAT = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}\Z")


def prepare_on_replicas() -> bool:
    """Whether this server hands out consistency tokens and may serve prepares on replicas (PostgreSQL only)."""
    return replica_settings().prepare_on_replicas and connections[DEFAULT_DB_ALIAS].vendor == "postgresql"


def consistency_token_valid(token: str) -> bool:
    """Whether ``token`` has the form of a consistency token (a WAL position's text)."""
    return _TOKEN_FORMAT.match(token) is not None


def consistency_token() -> str:
    """The token of the writes committed so far on the primary: its WAL insert position (one statement)."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(TOKEN_POSITION_SQL)
        return cursor.fetchone()[0]


class ConsistencyTokenMiddleware:
    """Answers every successful API write with its consistency token, when ``prepare_on_replicas()``.

    After the view, so after the write's commit. A prepare (a POST that writes only its log) gets none.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if 200 <= response.status_code < 300 and is_api_write(request) and prepare_on_replicas():
            # The write is committed: a primary that fails now costs the token (the client's next prepare then
            # reads within the lag bound), never the write's answer.
            with suppress(DatabaseError):
                response[CONSISTENCY_TOKEN_HEADER] = consistency_token()
        return response


def replica_serve(run: Callable[[], T], *, token: str | None) -> tuple[T, str]:
    """``run()`` with all its reads on a replica that has replayed ``token``, else on the primary; and where.

    Without a token any usable replica serves (within POWERCONTEXT_REPLICA_MAX_LAG_SECONDS). ``run`` is run
    again on the primary when the replica fails mid-way (the replica is then skipped for a while) or ``run``
    raises there (a scope the replica does not have yet must not become a 404): the replica's answer is used
    only when it is a success. Returns ``(result, "replica" | "primary")``.
    """
    if not (prepare_on_replicas() and replicas_configured()):
        return run(), "primary"
    alias = replica_alias()
    if alias is None:
        PREPARE_READS.labels(where="primary", reason="no_replica").inc()
        return run(), "primary"
    try:
        with reads_on(alias):
            if token is not None and not _replayed(alias, token):
                PREPARE_READS.labels(where="primary", reason="behind").inc()
                behind = True
            else:
                behind, result = False, run()
    except DatabaseError as exc:
        PREPARE_READS.labels(where="primary", reason=replica_read_failed(alias, exc)).inc()
        return run(), "primary"
    except Exception:  # noqa: BLE001 - the primary's run raises it again when it is the answer
        PREPARE_READS.labels(where="primary", reason="refused").inc()
        return run(), "primary"
    if behind:
        return run(), "primary"
    PREPARE_READS.labels(where="replica", reason="lag" if token is None else "token").inc()
    return result, "replica"


@contextmanager
def reads_on(alias: str) -> Iterator[None]:
    """Within the block, every read of this thread runs on ``alias``: the ORM's (through the router) and raw SQL
    on ``django.db.connection`` alike (the default connection is the replica's for the block). Caches keyed by
    ``connection.alias`` (resident copies, recall statistics) then key and check their generations on the replica.
    """
    # The per-thread (per-context) connections Django's handler keeps; private, so django-stubs leave it out.
    handler = connections._connections  # type: ignore[attr-defined]
    primary = connections[DEFAULT_DB_ALIAS]
    setattr(handler, DEFAULT_DB_ALIAS, connections[alias])
    try:
        with routed_to(alias):
            yield
    finally:
        setattr(handler, DEFAULT_DB_ALIAS, primary)


def _replayed(alias: str, token: str) -> bool:
    with connections[alias].cursor() as cursor:
        cursor.execute(TOKEN_REPLAYED_SQL, [token])
        return bool(cursor.fetchone()[0])
