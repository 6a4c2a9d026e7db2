"""Which replicas are usable: who a server is, how far behind it replays, and which replicas are skipped for now.

The bottom layer of ``infrastructure.replicas``: routing and prepares ask it, it asks neither. Every verdict is
kept per process (``_health``) and, with ``POWERCONTEXT_REPLICA_HEALTH_DIR``, shared by the worker processes of
one machine (``_shared_*``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import psycopg
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from infrastructure.metrics import REPLICA_SKIPS
from infrastructure.replicas.conf import replica_settings

# The name of the whole package, not of this module: operators filter on it (docs/scaling.md §8), and the skip
# and recovery messages of every replica read, routed or a prepare, are logged here.
logger = logging.getLogger("powercontext.replicas")

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
"""How long a process trusts the primary's identity it read (one read serves the checks of every replica)."""


@dataclass(frozen=True)
class ServerIdentity:
    """Which PostgreSQL server a connection reaches: a standby of the primary shares all but ``in_recovery``."""

    in_recovery: bool
    system_identifier: int  # pg_control_system(): the cluster's, copied to every physical standby
    timeline: int
    database_oid: int  # a physical standby has the primary's databases under the same OIDs


@dataclass
class _Health:
    checked_at: float = float("-inf")  # when the lag was last measured fine (monotonic)
    skipped_until: float = 0.0
    in_outage: bool = False  # logged already; the next success logs the end


_health: dict[str, _Health] = {}
_primary_positions: deque[tuple[float, float]] = deque(maxlen=_POSITIONS_KEPT)  # (monotonic time, WAL position)
_primary_identity: list[tuple[float, ServerIdentity]] = []  # at most one: (monotonic time read, identity)
_lock = threading.Lock()


def replica_read_failed(alias: str, exc: DatabaseError) -> str:
    """A read on the replica raised ``exc`` (the caller reads again on the primary): the outcome to count.

    ``error``: the replica is skipped (``replica_failed``). ``timeout``: the statement passed the replica's
    POWERCONTEXT_REPLICA_STATEMENT_TIMEOUT_MS but the replica answers a trivial one at once, so the read was slow,
    not the replica, and it stays in use: skipping it would let any key take it out of use for every worker of the
    machine with one slow request every POWERCONTEXT_REPLICA_SKIP_SECONDS. A replica that hangs fails that check too
    and is skipped, so it costs the timeout once, not on every read.
    """
    if isinstance(exc.__cause__, psycopg.errors.QueryCanceled) and _answers(alias):
        return "timeout"
    replica_failed(alias, "error", exc)
    return "error"


def _answers(alias: str) -> bool:
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError:
        return False
    return True


def replica_failed(alias: str, reason: str, error: object) -> None:
    """Take a replica out of use for POWERCONTEXT_REPLICA_SKIP_SECONDS; logged once per outage, always counted."""
    with _lock:
        health = _health.setdefault(alias, _Health())
        health.skipped_until = time.monotonic() + replica_settings().skip_seconds
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
            replica_settings().skip_seconds,
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


def replica_usable(alias: str) -> bool:
    """Whether ``alias`` may serve a read now (its last verdict, or a new check when that is stale).

    The package's own, not exported by it: callers ask ``routing.replica_alias``, which asks this of each replica in
    turn.
    """
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
    if lag > replica_settings().max_lag_seconds:
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


# Replica health shared by the worker processes of one machine (POWERCONTEXT_REPLICA_HEALTH_DIR): the last probe's
# verdict per replica, one small JSON file each, replaced atomically. Times are time.monotonic(), the machine's
# CLOCK_MONOTONIC, the same in every process of one boot: the directory must be local to the machine. The file's
# name includes the replica's address, so servers with other replicas behind the same alias never share one.


def _shared_path(alias: str) -> Path | None:
    directory = replica_settings().health_dir
    if not directory:
        return None
    config = connections.settings[alias]
    where = f"{config.get('HOST')}:{config.get('PORT')}/{config.get('NAME')}"
    return Path(directory) / f"replica-{alias}-{hashlib.sha256(where.encode()).hexdigest()[:16]}.json"


def _shared_read(alias: str) -> tuple[float, float] | None:
    """(checked_at, skipped_until) of the last probe of any worker, or None (none, unreadable, not shared, or not a
    verdict this boot's workers could have written: a probe in the future, a skip longer than the setting's, a time
    that is not a number)."""
    path = _shared_path(alias)
    if path is None:
        return None
    try:
        shared = json.loads(path.read_text())
        checked_at, skipped_until = float(shared["checked_at"]), float(shared["skipped_until"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    # A file left by an earlier boot (CLOCK_MONOTONIC starts again) or written by hand could otherwise pass a
    # server unchecked for as long as its time is ahead, or keep a replica out of use for ever.
    now = time.monotonic()
    if not (checked_at <= now and skipped_until <= now + replica_settings().skip_seconds):
        return None  # NaN fails both comparisons
    return checked_at, skipped_until


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
