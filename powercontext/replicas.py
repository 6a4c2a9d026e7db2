"""Read replicas: whether a replica may serve a read now, and the database router that sends it there.

Generic: this module knows which replicas are usable, not which reads are safe on them. The selectors choose
those (reads of immutable rows) and run them through ``replica_read``; every other query — prepare (below), writes,
authentication and grants, anything that must see the latest head — goes to the primary, because the router
sends a read to a replica only inside ``replica_read``.

A replica is used only when it is the primary's: a server in recovery (a hot standby) of the primary's cluster
(the same system identifier), on the primary's timeline and in the same database (``replica_identity_mismatch``).
A server that is not in recovery, belongs to another cluster, follows another timeline or serves another
database would answer rows the primary may not have: it is refused, whatever it holds. A replica that fails
that check, does not answer, fails mid-read or replays more than ``POWERCONTEXT_REPLICA_MAX_LAG_SECONDS``
behind (``replica_lag_seconds``) is skipped for ``POWERCONTEXT_REPLICA_SKIP_SECONDS`` (per process; counted in
``powercontext_replica_skips`` and logged once per outage), and its reads go to the primary: replica trouble
never reaches a client. The lag check is only about efficiency (a lagging replica mostly misses): correctness
rests on the selectors, which read again on the primary whatever a replica has not replayed yet. With
``POWERCONTEXT_REPLICA_HEALTH_DIR`` the worker processes of one machine share each replica's last verdict.

Prepares (``replica_serve``, opt-in with ``POWERCONTEXT_PREPARE_ON_REPLICAS``) run on a replica only when it has
replayed the consistency token the caller's last write answered with (``ConsistencyTokenMiddleware``), so the
caller reads its own writes; the whole prepare then reads the replica (``reads_on``), and any failure there runs
it again on the primary.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import random
import re
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from powercontext.metrics import PREPARE_READS, REPLICA_READS, REPLICA_SKIPS
from powercontext.request_context import is_api_write
from vocabulary.headers import CONSISTENCY_TOKEN_HEADER

logger = logging.getLogger("powercontext.replicas")

T = TypeVar("T")

LAG_CHECK_SECONDS = 5.0
"""How long a replica's measured lag is trusted before it is measured again (per process)."""

# The lag is measured against the primary, not with the replica's own clock: the usual replica-only formula
# (now() minus the last replayed commit's time whenever the received and replayed positions differ) reports the
# time since the primary's last commit, and the received position is page-aligned, so it differs from the
# replayed one most of the time: an idle primary made every replica look minutes behind. Instead each check
# records the primary's WAL position (PRIMARY_POSITION_SQL); a replica lags at least by the age of the oldest
# recorded position it has not replayed (REPLAYED_SQL). NULL: the server is not in recovery, so it replays
# nothing; such a server is refused by the identity check below before its lag is measured (the tests' mirror
# of the primary passes for a standby there, and lags 0).
PRIMARY_POSITION_SQL = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
REPLAYED_SQL = """
SELECT CASE WHEN pg_is_in_recovery() THEN COALESCE(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0'), -1) END
"""
_POSITIONS_KEPT = 64

# Which server a connection reaches (issue 34: a database that was not the primary's standby served a revision
# the primary never had). Every function here may be executed by any role. The primary's timeline is the one it
# writes WAL on now (the first 8 hex digits of its current WAL file name): pg_control_checkpoint() keeps the
# timeline of the last checkpoint, which after a promotion stays the old one until the next checkpoint ends. A
# standby's is the timeline its WAL receiver streams (pg_stat_wal_receiver, shown only to roles with
# pg_read_all_stats), else that of its last restartpoint: after a failover a standby that follows the new
# primary may be refused until its next restartpoint, never the other way round.
PRIMARY_IDENTITY_SQL = """
SELECT (pg_control_system()).system_identifier, pg_walfile_name(pg_current_wal_lsn()),
       (SELECT oid FROM pg_database WHERE datname = current_database())
"""
REPLICA_IDENTITY_SQL = """
SELECT pg_is_in_recovery(), (pg_control_system()).system_identifier,
       COALESCE((SELECT received_tli FROM pg_stat_wal_receiver), (pg_control_checkpoint()).timeline_id),
       (SELECT oid FROM pg_database WHERE datname = current_database())
"""
PRIMARY_IDENTITY_SECONDS = LAG_CHECK_SECONDS

# Consistency tokens (docs/scaling.md §11): a write's token is the primary's WAL insert position read after its
# commit, which is at or past the end of the commit record; a replica whose replay position has reached it has
# replayed the write. Opaque to clients: the LSN text (e.g. 16/B374D848).
SERVED_BY_HEADER = "PowerContext-Served-By"
TOKEN_POSITION_SQL = "SELECT pg_current_wal_insert_lsn()::text"
# NULL (not in recovery: such a server is refused by the identity check) reads as not replayed.
TOKEN_REPLAYED_SQL = "SELECT COALESCE(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)"
_TOKEN_FORMAT = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}\Z")
"""How long a process trusts the primary's identity it read (one read serves the checks of every replica)."""


@dataclass(frozen=True)
class ServerIdentity:
    """Which PostgreSQL server a connection reaches: a standby of the primary shares all but ``in_recovery``."""

    in_recovery: bool
    system_identifier: int  # pg_control_system(): the cluster's, copied to every physical standby
    timeline: int
    database_oid: int  # a physical standby has the primary's databases under the same OIDs


class ReplicaBehind(Exception):
    """Raised by a read that finds its replica behind the primary; ``replica_read`` reads again on the primary."""


@dataclass
class _Health:
    checked_at: float = float("-inf")  # when the lag was last measured fine (monotonic)
    skipped_until: float = 0.0
    in_outage: bool = False  # logged already; the next success logs the end


_health: dict[str, _Health] = {}
_primary_positions: deque[tuple[float, float]] = deque(maxlen=_POSITIONS_KEPT)  # (monotonic time, WAL position)
_primary_identity: list[tuple[float, ServerIdentity]] = []  # at most one: (monotonic time read, identity)
_lock = threading.Lock()
_routed: contextvars.ContextVar[str | None] = contextvars.ContextVar("powercontext_replica", default=None)


class ReplicaRouter:
    """Django's database router: reads to the replica ``replica_read`` chose, everything else to the primary."""

    def db_for_read(self, model, **hints):
        # Outside replica_read even a lazy load of an object read from a replica goes to the primary
        # (Django would otherwise follow the object to its alias).
        return _routed.get() or DEFAULT_DB_ALIAS

    def db_for_write(self, model, **hints):
        # Never the replica an object was read from (a hot standby refuses writes anyway).
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints):
        # The primary and its replicas hold the same rows.
        same_data = {DEFAULT_DB_ALIAS, *settings.POWERCONTEXT_READ_REPLICAS}
        return True if {obj1._state.db, obj2._state.db} <= same_data else None

    def allow_migrate(self, db, app_label, **hints):
        # Replicas follow the primary's schema through replication.
        return False if db in settings.POWERCONTEXT_READ_REPLICAS else None


def replica_read(read: Callable[[], T], *, misses: tuple[type[BaseException], ...] = ()) -> T:
    """``read()`` on a usable replica, else on the primary; again on the primary when the replica cannot answer.

    Only for reads whose answer on a replica, when found there, is the primary's (immutable rows). ``read``
    must finish its queries before it returns (lists, not lazy querysets). It is read again on the primary
    when it raises one of ``misses`` or ``ReplicaBehind`` (not replicated yet: never a false not-found) or a
    database error (the replica is then skipped for a while).
    """
    if not replicas_configured():  # the read as it is, nothing more
        return read()
    alias = replica_alias()
    if alias is None:
        return read()
    try:
        with _routed_to(alias):
            result = read()
    except (ReplicaBehind, *misses):
        REPLICA_READS.labels(outcome="miss").inc()
        return read()
    except DatabaseError as exc:
        REPLICA_READS.labels(outcome="error").inc()
        replica_failed(alias, "error", exc)
        return read()
    REPLICA_READS.labels(outcome="replica").inc()
    return result


def replicas_configured() -> bool:
    """Whether any read replica is configured (without one, ``replica_read`` is the read itself)."""
    return bool(settings.POWERCONTEXT_READ_REPLICAS)


def reading_from_replica() -> bool:
    """Whether the current read runs on a replica (inside ``replica_read``), e.g. to check it is caught up."""
    return _routed.get() is not None


def replica_alias() -> str | None:
    """The alias of a replica fit to serve a read now, or None: read from the primary.

    Several usable replicas share the reads at random. A replica is measured at most every
    ``LAG_CHECK_SECONDS`` per process.
    """
    aliases = list(settings.POWERCONTEXT_READ_REPLICAS)
    random.shuffle(aliases)
    for alias in aliases:
        if _usable(alias):
            return alias
    return None


def replica_failed(alias: str, reason: str, error: object) -> None:
    """Take a replica out of use for POWERCONTEXT_REPLICA_SKIP_SECONDS; logged once per outage, always counted."""
    with _lock:
        health = _health.setdefault(alias, _Health())
        health.skipped_until = time.monotonic() + settings.POWERCONTEXT_REPLICA_SKIP_SECONDS
        health.checked_at = float("-inf")
        first = not health.in_outage
        health.in_outage = True
        skipped_until = health.skipped_until
    _shared_write(alias, checked_at=float("-inf"), skipped_until=skipped_until)
    REPLICA_SKIPS.labels(alias=alias, reason=reason).inc()
    if first:
        logger.warning(
            "read replica %s skipped (%s: %s); its reads go to the primary, checked again every %s s",
            alias,
            reason,
            str(error).strip() or type(error).__name__,
            settings.POWERCONTEXT_REPLICA_SKIP_SECONDS,
        )
    # A connection that failed may be broken; the next check opens a new one.
    with suppress(DatabaseError):
        connections[alias].close()


def replica_health_reset() -> None:
    """Forget every replica's state (tests)."""
    with _lock:
        _health.clear()
        _primary_positions.clear()
        _primary_identity.clear()


def primary_identity() -> ServerIdentity:
    """The primary's identity, read at most once per ``PRIMARY_IDENTITY_SECONDS`` per process.

    Raises DatabaseError when the primary does not answer (or is itself in recovery).
    """
    with _lock:
        if _primary_identity and time.monotonic() - _primary_identity[0][0] < PRIMARY_IDENTITY_SECONDS:
            return _primary_identity[0][1]
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(PRIMARY_IDENTITY_SQL)
        system_identifier, wal_file, database_oid = cursor.fetchone()
    identity = ServerIdentity(
        in_recovery=False,
        system_identifier=int(system_identifier),
        timeline=int(wal_file[:8], 16),
        database_oid=int(database_oid),
    )
    with _lock:
        _primary_identity[:] = [(time.monotonic(), identity)]
    return identity


def replica_identity(alias: str) -> ServerIdentity:
    """The identity of the server behind ``alias`` (read on every check). Raises DatabaseError when it does not
    answer."""
    with connections[alias].cursor() as cursor:
        cursor.execute(REPLICA_IDENTITY_SQL)
        in_recovery, system_identifier, timeline, database_oid = cursor.fetchone()
    return ServerIdentity(
        in_recovery=bool(in_recovery),
        system_identifier=int(system_identifier),
        timeline=int(timeline),
        database_oid=int(database_oid),
    )


def replica_identity_mismatch(alias: str) -> tuple[str, str] | None:
    """Why the server behind ``alias`` is not a standby of the primary, as (metric reason, detail), or None.

    Raises DatabaseError when the replica or the primary does not answer.
    """
    replica, primary = replica_identity(alias), primary_identity()
    if not replica.in_recovery:
        return "not_in_recovery", "pg_is_in_recovery() is false: a promoted replica or another primary"
    if replica.system_identifier != primary.system_identifier:
        return (
            "other_cluster",
            f"system identifier {replica.system_identifier}, the primary's is {primary.system_identifier}",
        )
    if replica.database_oid != primary.database_oid:
        return "other_database", f"database OID {replica.database_oid}, the primary's is {primary.database_oid}"
    if replica.timeline != primary.timeline:
        return "other_timeline", f"timeline {replica.timeline}, the primary's is {primary.timeline}"
    return None


def replica_lag_seconds(alias: str) -> float:
    """How far the replica's replay is at least behind the primary, in seconds.

    The age of the oldest primary WAL position, recorded by this process's checks (one now), that the replica
    has not replayed: 0 when only the one recorded now is missing. A lower bound, so an idle spell between
    checks never makes a replica look behind; one that stays behind is seen within a check interval or two.
    Raises DatabaseError when the replica does not answer.
    """
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(PRIMARY_POSITION_SQL)
        now, position = time.monotonic(), float(cursor.fetchone()[0])
    with connections[alias].cursor() as cursor:
        cursor.execute(REPLAYED_SQL)
        replayed = cursor.fetchone()[0]
    with _lock:
        _primary_positions.append((now, position))
        if replayed is None:
            return 0.0
        missing = [at for at, recorded in _primary_positions if recorded > float(replayed)]
        return now - min(missing) if missing else 0.0


def _usable(alias: str) -> bool:
    with _lock:
        health = _health.setdefault(alias, _Health())
        now = time.monotonic()
        if now < health.skipped_until:
            return False
        if now - health.checked_at < LAG_CHECK_SECONDS:
            return True
    shared = _shared_read(alias)
    if shared is not None:  # another worker of this machine probed it lately: its verdict serves this one too
        checked_at, skipped_until = shared
        if now < skipped_until or now - checked_at < LAG_CHECK_SECONDS:
            with _lock:
                health.skipped_until, health.checked_at = skipped_until, checked_at
            return now >= skipped_until
    try:
        # Who it is first, on every check: a server that is not the primary's standby is never read.
        mismatch = replica_identity_mismatch(alias)
        lag = replica_lag_seconds(alias) if mismatch is None else 0.0
    except DatabaseError as exc:
        replica_failed(alias, "down", exc)
        return False
    if mismatch is not None:
        replica_failed(alias, *mismatch)
        return False
    if lag > settings.POWERCONTEXT_REPLICA_MAX_LAG_SECONDS:
        replica_failed(alias, "lagging", f"{lag:.1f} s behind the primary")
        return False
    with _lock:
        health.checked_at = time.monotonic()
        ended = health.in_outage
        health.in_outage = False
        checked_at = health.checked_at
    _shared_write(alias, checked_at=checked_at, skipped_until=0.0)
    if ended:
        logger.warning("read replica %s is back in use (%.1f s behind the primary)", alias, lag)
    return True


@contextmanager
def _routed_to(alias: str) -> Iterator[None]:
    token = _routed.set(alias)
    try:
        yield
    finally:
        _routed.reset(token)


def prepare_on_replicas() -> bool:
    """Whether this server hands out consistency tokens and may serve prepares on replicas (PostgreSQL only)."""
    return settings.POWERCONTEXT_PREPARE_ON_REPLICAS and connections[DEFAULT_DB_ALIAS].vendor == "postgresql"


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
        PREPARE_READS.labels(where="primary", reason="error").inc()
        replica_failed(alias, "error", exc)
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
    handler = connections._connections  # the per-thread (per-context) connections Django's handler keeps
    primary = connections[DEFAULT_DB_ALIAS]
    setattr(handler, DEFAULT_DB_ALIAS, connections[alias])
    try:
        with _routed_to(alias):
            yield
    finally:
        setattr(handler, DEFAULT_DB_ALIAS, primary)


def _replayed(alias: str, token: str) -> bool:
    with connections[alias].cursor() as cursor:
        cursor.execute(TOKEN_REPLAYED_SQL, [token])
        return bool(cursor.fetchone()[0])


# Replica health shared by the worker processes of one machine (POWERCONTEXT_REPLICA_HEALTH_DIR): the last probe's
# verdict per replica, one small JSON file each, replaced atomically. Times are time.monotonic(), the machine's
# CLOCK_MONOTONIC, the same in every process of one boot: the directory must be local to the machine. The file's
# name includes the replica's address, so servers with other replicas behind the same alias never share one.


def _shared_path(alias: str) -> Path | None:
    directory = settings.POWERCONTEXT_REPLICA_HEALTH_DIR
    if not directory:
        return None
    config = connections.settings[alias]
    where = f"{config.get('HOST')}:{config.get('PORT')}/{config.get('NAME')}"
    return Path(directory) / f"replica-{alias}-{hashlib.sha256(where.encode()).hexdigest()[:16]}.json"


def _shared_read(alias: str) -> tuple[float, float] | None:
    """(checked_at, skipped_until) of the last probe of any worker, or None (none, unreadable, not shared)."""
    path = _shared_path(alias)
    if path is None:
        return None
    try:
        shared = json.loads(path.read_text())
        return float(shared["checked_at"]), float(shared["skipped_until"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _shared_write(alias: str, *, checked_at: float, skipped_until: float) -> None:
    """Record this worker's verdict for the others; never fails a request (a write that fails shares nothing)."""
    path = _shared_path(alias)
    if path is None:
        return
    verdict = json.dumps({"checked_at": max(checked_at, -1.0), "skipped_until": skipped_until})
    with suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".replica-", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "w") as file:
                file.write(verdict)
            os.replace(temporary, path)
        except OSError:
            with suppress(OSError):
                os.unlink(temporary)
            raise
