#!/usr/bin/env python3
"""Prove stateless app servers and read replicas with real processes (docs/scaling.md §9).

    python tests/replica/run.py [--timeout SECONDS] [--phase-seconds SECONDS] [--threads N] [--replicas 1|2]

Starts, on loopback only:

- a streaming replica of the local PostgreSQL (127.0.0.1:5432, trust, user ``postgres``; the programs of its
  major version from /usr/lib/postgresql/<major>/bin or ``POWERCONTEXT_PG_BIN``):
  ``pg_basebackup -R`` into a temporary directory, started with ``pg_ctl`` on a free port as the ``postgres``
  OS user. When the primary refuses the replication connection (its pg_hba.conf has no ``replication`` line),
  the harness appends ``host replication postgres 127.0.0.1/32 trust`` to the file ``SHOW hba_file`` names,
  reloads the configuration, and removes exactly that line and reloads again at the end;
- a PgBouncer in transaction mode in front of the primary (as tests/pgbouncer/run.py starts it);
- four gunicorn app servers on different ports over one scratch database (migrated, one scope, one API key
  made with ``create_api_key``), all through PgBouncer: two with ``POWERCONTEXT_READ_REPLICA_URLS`` naming
  the replica (directly: a stopped server behind PgBouncer would make clients queue), two without;
- a fifth app server whose ``POWERCONTEXT_READ_REPLICA_URLS`` names a copy of the scratch database on the
  primary (``CREATE DATABASE … TEMPLATE``): a server that is not in recovery, which must never be read;
- a sixth, ``lagged``, with the last replica alone and ``POWERCONTEXT_REPLICA_MAX_LAG_SECONDS`` 3;
- with ``--replicas 2`` (for the figures of docs/scaling.md §11; CI runs one), a second streaming replica made
  the same way and a seventh server, ``two-replicas``, naming both replicas.

Then it checks, failing with a message naming what went wrong:

1. a write through one app server is prepared (cited) and read exactly through the other at once, the prepare
   carrying the write's consistency token (every server runs with ``POWERCONTEXT_PREPARE_ON_REPLICAS``: a
   replica server serves it from the replica once it has replayed the write, else from the primary), between
   the primary-only pair, the replica pair, and from a primary-only server to a replica one;
2. a bounded mixed load (threads with httpx: writes, exact reads, history, prepares) on one and on two app
   servers, without and with the replica, then exact reads alone on two servers without and with it; it prints
   the throughput of each (nothing about speed is asserted);
3. after the replica has caught up: every acknowledged write is read back with its exact bytes on every path
   (both replica servers, a primary-only server), the replica servers' answers identical to the primary's,
   and some reads and some prepares (the load's carry each thread's last write's token) were served by the
   replica (the servers' ``/metrics`` and the replica's pg_stat_database);
4. the real standby is accepted as the primary's (no skip for its identity) and the copy is refused: the fifth
   server answers every citation exactly, from the primary, and counts the copy skipped as ``not_in_recovery``
   without one read served by it;
5. prepares alone (no token: as clients that have not written, so the replicas serve within the lag) on one
   server with 0, 1 and (``--replicas 2``) 2 replicas, each for a load phase after a warm-up: it prints req/s,
   the servers' ``powercontext_prepare_reads_total{where,reason}`` and the transactions each replica ran
   meanwhile; some prepares must be served by a replica, none may fail;
6. replay paused on the last replica (``pg_wal_replay_pause()``) while writes go on through the primary: each
   write's token goes with a prepare to ``lagged`` (never served by the replica, which has not replayed it,
   and always citing the write), followed by a prepare without a token; it prints how many seconds after the
   pause those stopped being served by the replica (not asserted), then resumes replay and waits for it;
7. the replica is stopped in the middle of a load on the replica servers: no client sees an error, the
   servers count the skipped replica, and every citation still resolves on every path.

Everything it started is stopped and removed — servers, PgBouncer, the replica, the scratch database, the
pg_hba.conf line — on success, failure, timeout (``--timeout``, default 600 s) or a signal.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pwd
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.pgbouncer.run import free_port, psql, start_pgbouncer, stop  # noqa: E402

# The replica's programs must be the primary's major version: Debian's directory for it, unless given.
PG_BIN_VARIABLE = "POWERCONTEXT_PG_BIN"
PRIMARY_PORT = 5432
DB_USER = "postgres"
SCOPE = "project:load"
TOKEN_HEADER = "PowerContext-Consistency-Token"
SERVED_BY_HEADER = "PowerContext-Served-By"
HBA_LINE = "host replication postgres 127.0.0.1/32 trust"
HBA_MARK = "# added by PowerContext tests/replica/run.py, removed when it ends"
START_SECONDS = 60
CATCH_UP_SECONDS = 60
REQUEST_SECONDS = 30
SERVER_WORKERS = 2
# The lagged server's POWERCONTEXT_REPLICA_MAX_LAG_SECONDS, and how long its replica's replay stays paused at most.
LAGGED_MAX_LAG_SECONDS = 3
PAUSE_LIMIT_SECONDS = 30
# Skip reasons of infrastructure.replicas that say a server is not a standby of the primary.
IDENTITY_REASONS = ("not_in_recovery", "other_cluster", "other_database", "other_timeline")


class Failed(Exception):
    """A check failed; the message says which."""


class Interrupted(Exception):
    pass


def _raise_interrupted(signum, frame):
    raise Interrupted(f"signal {signum}")


def say(message: str) -> None:
    print(f"== {message}", flush=True)


def pg_bin() -> Path:
    """The PostgreSQL programs of the primary's major version (POWERCONTEXT_PG_BIN, else Debian's directory)."""
    if os.environ.get(PG_BIN_VARIABLE):
        return Path(os.environ[PG_BIN_VARIABLE])
    major = int(sql(PRIMARY_PORT, "postgres", "SHOW server_version_num")) // 10000
    return Path(f"/usr/lib/postgresql/{major}/bin")


def postgres_account() -> pwd.struct_passwd:
    return pwd.getpwnam("postgres")


def as_postgres(command: list[str], *, timeout: float, check: bool = True) -> subprocess.CompletedProcess:
    """Run a PostgreSQL program as the ``postgres`` OS user (PostgreSQL refuses to run as root)."""
    account = postgres_account()
    kwargs = {"user": account.pw_uid, "group": account.pw_gid} if os.geteuid() == 0 else {}
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd="/", **kwargs)
    if check and completed.returncode != 0:
        raise Failed(f"{' '.join(command)} exited with {completed.returncode}: {completed.stderr.strip()}")
    return completed


def sql(port: int, database: str, statement: str) -> str:
    try:
        return psql(port, database, statement).strip()
    except RuntimeError as error:
        raise Failed(f"on port {port}, {statement!r}: {error}") from None


# --- the replica ----------------------------------------------------------------------------------


class ReplicationAccess:
    """The pg_hba.conf line that lets pg_basebackup and the replica connect, added only when missing."""

    def __init__(self) -> None:
        self.path: Path | None = None

    def grant(self) -> None:
        self.path = Path(sql(PRIMARY_PORT, "postgres", "SHOW hba_file"))
        with self.path.open("a", encoding="utf-8") as hba:
            hba.write(f"\n{HBA_LINE}  {HBA_MARK}\n")
        sql(PRIMARY_PORT, "postgres", "SELECT pg_reload_conf()")
        say(f"appended {HBA_LINE!r} to {self.path} and reloaded (removed at the end)")

    def revoke(self) -> None:
        if self.path is None:
            return
        lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if HBA_MARK not in line]
        # The blank line grant() wrote before its line goes too.
        if len(kept) < len(lines) and kept and kept[-1].strip() == "":
            kept.pop()
        self.path.write_text("".join(kept), encoding="utf-8")
        sql(PRIMARY_PORT, "postgres", "SELECT pg_reload_conf()")
        say(f"removed the replication line from {self.path} and reloaded")
        self.path = None


class Replica:
    """A hot standby of the local primary in a temporary directory."""

    def __init__(self, directory: Path, access: ReplicationAccess, programs: Path, name: str = "replica") -> None:
        self.name = name
        self.directory = directory / name
        self.data = self.directory / "data"
        self.port = free_port()
        self.access = access
        self.bin = programs
        self.running = False

    def start(self) -> None:
        account = postgres_account()
        self.directory.mkdir(mode=0o700)
        os.chown(self.directory, account.pw_uid, account.pw_gid)
        backup = [
            str(self.bin / "pg_basebackup"),
            *("-h", "127.0.0.1", "-p", str(PRIMARY_PORT), "-U", DB_USER, "-D", str(self.data)),
            *("-R", "-X", "stream", "-c", "fast"),
        ]
        done = as_postgres(backup, timeout=300, check=False)
        if done.returncode != 0 and "replication" in done.stderr and "pg_hba.conf" in done.stderr:
            self.access.grant()
            shutil.rmtree(self.data, ignore_errors=True)
            done = as_postgres(backup, timeout=300, check=False)
        if done.returncode != 0:
            raise Failed(f"pg_basebackup failed: {done.stderr.strip()}")
        # A hot standby needs these at least as high as on the primary.
        names = ["max_connections", "max_worker_processes", "max_wal_senders", "max_prepared_transactions"]
        names.append("max_locks_per_transaction")
        primary = {n: sql(PRIMARY_PORT, "postgres", f"SHOW {n}") for n in names}
        settings = {
            "port": self.port,
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.directory}'",
            "hot_standby": "on",
            # Queries on the standby are not cancelled by the vacuum of rows they still see.
            "hot_standby_feedback": "on",
            "shared_buffers": "'64MB'",
            **primary,
        }
        # Debian keeps postgresql.conf and pg_hba.conf outside the data directory: the backup has none.
        (self.data / "postgresql.conf").write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
        (self.data / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
        (self.data / "pg_ident.conf").write_text("")
        for path in (self.data / "postgresql.conf", self.data / "pg_hba.conf", self.data / "pg_ident.conf"):
            os.chown(path, account.pw_uid, account.pw_gid)
        self.running = True  # from here on, stop() must run
        as_postgres(
            [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.directory / "replica.log"), "-w", "-t"]
            + [str(START_SECONDS), "start"],
            timeout=START_SECONDS + 10,
        )
        if sql(self.port, "postgres", "SELECT pg_is_in_recovery()") != "t":
            raise Failed("the replica is not in recovery (not a standby)")

    def stop(self, mode: str = "fast") -> None:
        if not self.running:
            return
        stopped = as_postgres(
            [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop"],
            timeout=40,
            check=False,
        )
        if stopped.returncode != 0 and mode != "immediate":
            immediately = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]
            as_postgres(immediately, timeout=40, check=False)
        self.running = False

    def wait_caught_up(self) -> None:
        """Until the replica has replayed everything the primary had written when this was called."""
        target = sql(PRIMARY_PORT, "postgres", "SELECT pg_current_wal_lsn()")
        deadline = time.monotonic() + CATCH_UP_SECONDS
        while time.monotonic() < deadline:
            if sql(self.port, "postgres", f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn") == "t":
                return
            time.sleep(0.2)
        raise Failed(f"the replica did not replay up to {target} within {CATCH_UP_SECONDS} s")

    def replayed(self, token: str) -> bool:
        """Whether the replica has replayed up to the consistency token (a WAL position) now."""
        return sql(self.port, "postgres", f"SELECT pg_last_wal_replay_lsn() >= '{token}'::pg_lsn") == "t"

    def transactions(self, database: str) -> int:
        """Transactions the replica ran for clients in that database (its own pg_stat_database)."""
        return int(sql(self.port, "postgres", f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{database}'"))

    def log_tail(self) -> str:
        path = self.directory / "replica.log"
        return "".join(path.read_text().splitlines(True)[-20:]) if path.exists() else ""


def migrate_with_scope_and_key(env: dict, directory: Path, *, scope: str, key_name: str) -> str:
    """Migrate the database ``env`` names, load one scope and make one API key reading and writing it: the key."""
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, cwd=ROOT, check=True, timeout=300)
    scopes = directory / "scopes.json"
    scopes.write_text(json.dumps({"scopes": [{"id": scope, "title": key_name.title(), "references": []}]}))
    subprocess.run([*manage, "load_context_fixtures", str(scopes)], env=env, cwd=ROOT, check=True, timeout=120)
    return subprocess.run(
        [*manage, "create_api_key", key_name, "--read", scope, "--write", scope],
        env=env, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


# --- the app servers ------------------------------------------------------------------------------


@dataclass
class AppServer:
    name: str
    port: int
    replica: bool
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def health_dir(server: AppServer) -> Path:
    return Path(tempfile.gettempdir()) / f"powercontext-replica-health-{os.getpid()}-{server.name}"


def start_app_server(server: AppServer, env: dict, directory: Path) -> None:
    metrics = directory / f"metrics-{server.name}"
    metrics.mkdir()
    log = (directory / f"{server.name}.log").open("w")
    command = [str(Path(sys.executable).parent / "gunicorn"), "powercontext.wsgi"]
    command += ["--workers", str(SERVER_WORKERS), "--bind", f"127.0.0.1:{server.port}", "--timeout", "30"]
    server.process = subprocess.Popen(
        command,
        cwd=ROOT,
        # The server's workers share each replica's last probe (one probe per server, not one per worker).
        env=env
        | {"PROMETHEUS_MULTIPROC_DIR": str(metrics), "POWERCONTEXT_REPLICA_HEALTH_DIR": str(health_dir(server))},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_ready(server: AppServer) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise Failed(f"app server {server.name} exited with {server.process.returncode} before it was ready")
        try:
            if httpx.get(f"{server.url}/readyz", timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise Failed(f"app server {server.name} was not ready on {server.url} within {START_SECONDS} s")


def replica_counters(server: AppServer) -> dict[str, float]:
    """The server's powercontext_replica_* and powercontext_prepare_reads samples, summed over its workers."""
    text = httpx.get(f"{server.url}/metrics", timeout=REQUEST_SECONDS, trust_env=False).text
    counters: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"powercontext_(replica_reads|replica_skips|prepare_reads)_total\{(.*)\} ([0-9.e+]+)$", line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            if match.group(1) == "prepare_reads":  # where a prepare ran, and why: "prepares replica token"
                key = f"prepares {labels.get('where')} {labels.get('reason')}"
            else:
                key = f"{match.group(1).split('_')[1]} {labels.get('outcome') or labels.get('reason')}"
            counters[key] = counters.get(key, 0.0) + float(match.group(3))
    return counters


# --- the load -------------------------------------------------------------------------------------


@dataclass
class Written:
    """An acknowledged write: its citation and the exact body sent."""

    citation: dict
    body: str
    token: str | None = None  # its consistency token (POWERCONTEXT_PREPARE_ON_REPLICAS)


@dataclass
class Load:
    """What every thread did and saw; every error is a client-visible failure."""

    written: list[Written]
    key: str
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    serial: itertools.count = field(default_factory=lambda: itertools.count(1))

    def count(self, kind: str) -> None:
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def error(self, message: str) -> None:
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(message)


def headers(key: str) -> dict:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


def write_entry(client: httpx.Client, base: str, load: Load, artifact_id: str) -> Written | None:
    number = next(load.serial)
    token = f"zebra{number}x{random.randrange(10**9)}"
    body = f"Load entry {number}: the {token} note, with é and ✓ bytes."
    payload = {"scope_id": SCOPE, "artifact_id": artifact_id, "entry_id": f"entry-{number}", "body": body}
    response = client.post(f"{base}/v1/memory/entries", json=payload, headers=headers(load.key))
    if response.status_code != 201:
        load.error(f"write {base}: {response.status_code} {response.text[:200]}")
        return None
    written = Written(response.json()["citation"], body, response.headers.get(TOKEN_HEADER))
    with load.lock:
        load.written.append(written)
    return written


def read_exact(client: httpx.Client, base: str, key: str, citation: dict) -> httpx.Response:
    return client.get(f"{base}/v1/artifacts/revision", params=citation, headers=headers(key))


def check_exact(client: httpx.Client, base: str, load: Load, written: Written) -> dict | None:
    response = read_exact(client, base, load.key, written.citation)
    if response.status_code != 200:
        load.error(f"read {base} {written.citation}: {response.status_code} {response.text[:200]}")
        return None
    answer = response.json()
    if answer["entry"]["body"] != written.body:
        load.error(f"read {base} {written.citation}: body {answer['entry']['body']!r} != {written.body!r}")
        return None
    return answer


def prepare(client: httpx.Client, base: str, key: str, query: str, token: str | None = None) -> httpx.Response:
    """A prepare; with ``token`` (the consistency token of the caller's last write) it reads that write."""
    payload = {"scope_id": SCOPE, "query": query, "assembly": {"sections": [{"family": "memory", "limit": 3}]}}
    sent = headers(key) | ({TOKEN_HEADER: token} if token else {})
    return client.post(f"{base}/v1/context/prepare", json=payload, headers=sent)


def load_thread(
    servers: list[str], load: Load, number: int, until: float, max_operations: int, only: str | None
) -> None:
    """One client: mostly exact reads, some writes (to an artifact of its own), history and prepares; or, with
    ``only="reads"``, exact reads of acknowledged citations alone; with ``only="prepares"``, prepares alone
    (without a token, as a client that has not written: no write moves the replica's work)."""
    artifact_id = f"load-{number}-{random.randrange(10**6)}"
    own_head = 0
    last_token = None  # as the client does: the last write's token goes with every later prepare
    rng = random.Random(number)
    with httpx.Client(timeout=REQUEST_SECONDS, trust_env=False) as client:
        for _ in range(max_operations):
            if time.monotonic() >= until:
                return
            base = rng.choice(servers)
            roll = {"reads": 0.5, "prepares": 0.95}.get(only) or rng.random()
            try:
                if roll < 0.2 or not load.written:
                    written = write_entry(client, base, load, artifact_id)
                    if written:
                        own_head = written.citation["revision"]
                        last_token = written.token or last_token
                    load.count("write")
                elif roll < 0.75:
                    with load.lock:
                        written = rng.choice(load.written)
                    check_exact(client, base, load, written)
                    load.count("exact read")
                elif roll < 0.9:
                    params = {"scope_id": SCOPE, "family": "memory", "artifact_id": artifact_id, "limit": "5"}
                    response = client.get(f"{base}/v1/artifacts/history", params=params, headers=headers(load.key))
                    newest = (response.json().get("revisions") or [{}])[0] if response.status_code == 200 else None
                    if own_head and response.status_code != 200:
                        load.error(f"history {base}: {response.status_code} {response.text[:200]}")
                    elif own_head and newest["citation"]["revision"] < own_head:
                        load.error(f"history {base}: newest {newest['citation']['revision']} < written {own_head}")
                    load.count("history")
                else:
                    response = prepare(client, base, load.key, "zebra note bytes", last_token)
                    if response.status_code != 200:
                        load.error(f"prepare {base}: {response.status_code} {response.text[:200]}")
                    load.count("prepare")
            except httpx.HTTPError as error:
                load.error(f"{base}: {type(error).__name__}: {error}")


def run_load(
    label: str,
    servers: list[AppServer],
    load: Load,
    seconds: float,
    threads: int,
    *,
    only: str | None = None,
    during=None,
) -> tuple[int, float]:
    """Threads against the servers for ``seconds`` (and at most 2,000 operations each); prints the figures."""
    counts_before, errors_before = dict(load.counts), len(load.errors)
    before = sum(counts_before.values())
    started = time.monotonic()
    until = started + seconds
    urls = [server.url for server in servers]
    workers = [
        threading.Thread(target=load_thread, args=(urls, load, n, until, 2000, only), daemon=True, name=f"load-{n}")
        for n in range(threads)
    ]
    for worker in workers:
        worker.start()
    if during is not None:
        during()
    for worker in workers:
        worker.join(max(0.0, until + REQUEST_SECONDS + 5 - time.monotonic()))
    if any(worker.is_alive() for worker in workers):
        raise Failed(f"{label}: load threads still running {REQUEST_SECONDS + 5} s after the phase ended")
    elapsed = time.monotonic() - started
    operations = sum(load.counts.values()) - before
    kinds = ", ".join(f"{load.counts[k] - counts_before.get(k, 0)} {k}" for k in sorted(load.counts))
    say(
        f"{label}: {operations} requests in {elapsed:.1f} s = {operations / elapsed:.1f} req/s "
        f"({threads} client threads; {kinds}), client errors: {len(load.errors) - errors_before}"
    )
    return operations, elapsed


# --- the checks -----------------------------------------------------------------------------------


def check_write_then_read_elsewhere(first: AppServer, second: AppServer, load: Load, rounds: int) -> None:
    """Written through one server, then prepared (cited) and read exactly through the other at once.

    The prepare carries the write's consistency token: a replica server serves it from the replica only when the
    replica has replayed the write, else from the primary; either way the write is in it (read-your-writes).
    """
    served: Counter[str] = Counter()
    with httpx.Client(timeout=REQUEST_SECONDS, trust_env=False) as client:
        for number in range(rounds):
            writer, reader = (first, second) if number % 2 == 0 else (second, first)
            written = write_entry(client, writer.url, load, f"handover-{writer.name}-{reader.name}")
            if written is None:
                raise Failed(f"write through {writer.name} failed: {load.errors[-1]}")
            if written.token is None:
                raise Failed(f"a write through {writer.name} answered without a consistency token")
            words = re.search(r"zebra\d+x\d+", written.body).group(0)
            response = prepare(client, reader.url, load.key, words, written.token)
            content = response.json().get("content") or "" if response.status_code == 200 else ""
            served[response.headers.get(SERVED_BY_HEADER, "primary")] += 1
            citation = written.citation
            entry_line = f'Entry: id="{citation["entry_id"]}", version="{citation["entry_version"]}"'
            if entry_line not in content:
                raise Failed(f"prepare through {reader.name} right after a write through {writer.name} lacks it")
            if check_exact(client, reader.url, load, written) is None:
                raise Failed(f"exact read through {reader.name} after a write through {writer.name}: {load.errors[-1]}")
    say(
        f"{rounds} writes through {first.name} and {second.name} each prepared (with the write's token) and read "
        f"exactly through the other at once; prepares served by: {dict(served)}"
    )


def check_identity(standby_counters: dict, diverged: AppServer, primary_path: AppServer, load: Load) -> None:
    """The real standby passed its identity check; a database that is not in recovery is never read."""
    refused = [f"{name}: {key}" for name, c in standby_counters.items() for key in c if key[6:] in IDENTITY_REASONS]
    if refused:
        raise Failed(f"the real standby was refused as not the primary's: {refused}")
    verified = check_every_citation([diverged], primary_path, load)
    counters = replica_counters(diverged)
    say(f"{verified} citations read exactly through the diverged server; its counters: {counters}")
    if counters.get("reads replica", 0) or counters.get("reads miss", 0) or counters.get("reads error", 0):
        raise Failed(f"the copy that is not in recovery served reads: {counters}")
    if not counters.get("skips not_in_recovery"):
        raise Failed(f"the copy that is not in recovery was never skipped as not_in_recovery: {counters}")
    say("the real standby is accepted; the copy that is not in recovery is refused (not_in_recovery)")


def run_prepare_phases(
    phases: list[tuple[AppServer, list[Replica]]], load: Load, database: str, seconds: float, threads: int
) -> dict[str, tuple[int, float]]:
    """Prepares alone (no token) on one server with 0, 1 and 2 replicas; prints where they were served.

    Each server runs one phase on its own, after a warm-up half as long; the prepares each replica served are the
    replica's own count of the transactions it ran in the database meanwhile (pg_stat_database; the server's
    metric has no replica label).
    Nothing about speed is asserted; a client error fails.
    """
    figures = {}
    for server, replicas in phases:
        label = f"prepares only, 1 app server, {len(replicas)} replica{'' if len(replicas) == 1 else 's'}"
        # Not counted: the server's workers load their resident copies per replica, the replicas their buffers.
        run_load(f"{label} (warm-up, not counted)", [server], load, seconds / 2, threads, only="prepares")
        counters_before = replica_counters(server)
        transactions_before = [replica.transactions(database) for replica in replicas]
        errors_before = len(load.errors)
        figures[label] = run_load(label, [server], load, seconds, threads, only="prepares")
        if len(load.errors) > errors_before:
            raise Failed(f"{label}: client errors, e.g. {load.errors[errors_before:][:3]}")
        counters = replica_counters(server)
        served = {
            key[len("prepares ") :]: int(value - counters_before.get(key, 0))
            for key, value in counters.items()
            if key.startswith("prepares ") and value > counters_before.get(key, 0)
        }
        ran = ", ".join(
            f"{replica.name} ran {replica.transactions(database) - before} transactions"
            for replica, before in zip(replicas, transactions_before, strict=True)
        )
        say(f"{label}: prepares served (where reason: count) {served}{'; ' + ran if ran else ''}")
        if replicas and not any(key.startswith("replica ") for key in served):
            raise Failed(f"{label}: no prepare was served by a replica")
    return figures


def check_replay_paused(lagged: AppServer, writer: AppServer, replica: Replica, load: Load, limit: float) -> None:
    """Replay paused on the replica while writes go on: when tokenless prepares leave it, and token ones at once.

    ``lagged`` runs with a low POWERCONTEXT_REPLICA_MAX_LAG_SECONDS and ``replica`` alone. Each round writes
    through ``writer`` (the primary), prepares with that write's token on ``lagged`` — never served by a replica
    that has not replayed the token, and always citing the write — then prepares without a token. Prints how
    many seconds after the pause the tokenless prepares stopped being served by the replica (not asserted).
    """
    served: Counter[str] = Counter()
    with httpx.Client(timeout=REQUEST_SECONDS, trust_env=False) as client:

        def tokenless() -> str:
            response = prepare(client, lagged.url, load.key, "zebra note bytes")
            if response.status_code != 200:
                raise Failed(f"a prepare without a token on {lagged.name}: {response.status_code} {response.text}")
            return response.headers.get(SERVED_BY_HEADER, "primary")

        deadline = time.monotonic() + limit
        while tokenless() != "replica":
            if time.monotonic() > deadline:
                raise Failed(f"{lagged.name} served no prepare without a token on {replica.name} before the pause")
            time.sleep(0.2)
        sql(replica.port, "postgres", "SELECT pg_wal_replay_pause()")
        paused_at = time.monotonic()
        say(f"replay paused on {replica.name} (pg_wal_replay_pause()); writing on through {writer.name}")
        last_on_replica, stopped_after = 0.0, None
        try:
            while time.monotonic() - paused_at < limit:
                written = write_entry(client, writer.url, load, "lag-writer")
                if written is None or written.token is None:
                    raise Failed(f"a write through {writer.name} failed or had no token: {load.errors[-1:]}")
                words = re.search(r"zebra\d+x\d+", written.body).group(0)
                response = prepare(client, lagged.url, load.key, words, written.token)
                where = response.headers.get(SERVED_BY_HEADER, "primary")
                served[f"with a fresh token: {where}"] += 1
                citation = written.citation
                entry_line = f'Entry: id="{citation["entry_id"]}", version="{citation["entry_version"]}"'
                if response.status_code != 200 or entry_line not in response.json().get("content", ""):
                    raise Failed(f"a prepare carrying a write's token lacks the write: {response.status_code}")
                if where == "replica" and not replica.replayed(written.token):
                    raise Failed(
                        f"a prepare with token {written.token} was served by a replica that had not replayed it"
                    )
                where = tokenless()
                served[f"without a token: {where}"] += 1
                since = time.monotonic() - paused_at
                if where == "replica":
                    last_on_replica, stopped_after = since, None
                elif stopped_after is None:
                    stopped_after = since
                elif since - stopped_after > 3:  # a few seconds more on the primary: it stays there
                    break
                time.sleep(0.1)
        finally:
            sql(replica.port, "postgres", "SELECT pg_wal_replay_resume()")
    say(f"replay resumed on {replica.name}; prepares during the pause: {dict(served)}")
    if stopped_after is None:
        say(f"prepares without a token were still served by {replica.name} {limit:.0f} s after the pause")
    else:
        say(
            f"prepares without a token stopped being served by {replica.name} {stopped_after:.1f} s after the pause "
            f"(the last one there {last_on_replica:.1f} s after it); counters of {lagged.name}: "
            f"{replica_counters(lagged)}"
        )


def check_every_citation(paths: list[AppServer], primary_path: AppServer, load: Load) -> int:
    """Every acknowledged write read back on every path with its exact bytes; replica paths equal the primary."""
    mismatches: list[str] = []
    lock = threading.Lock()
    items = list(load.written)

    def verify(chunk: list[Written]) -> None:
        with httpx.Client(timeout=REQUEST_SECONDS, trust_env=False) as client:
            for written in chunk:
                reference = read_exact(client, primary_path.url, load.key, written.citation)
                for server in paths:
                    answer = read_exact(client, server.url, load.key, written.citation)
                    problem = None
                    if answer.status_code != 200:
                        problem = f"{answer.status_code} {answer.text[:200]}"
                    elif answer.json()["entry"]["body"] != written.body:
                        problem = "body differs from the bytes written"
                    elif answer.json() != reference.json():
                        problem = f"answer differs from the primary path's {primary_path.name}"
                    if problem:
                        with lock:
                            mismatches.append(f"{server.name} {written.citation}: {problem}")

    chunks = [items[n::8] for n in range(8)]
    workers = [threading.Thread(target=verify, args=(chunk,), daemon=True) for chunk in chunks]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    if any(worker.is_alive() for worker in workers):
        raise Failed("verifying the citations took more than 300 s")
    if mismatches:
        raise Failed(f"{len(mismatches)} citation reads wrong, e.g. {mismatches[:3]}")
    return len(items)


# --- main -----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=int, default=600, help="seconds for everything (default 600)")
    parser.add_argument("--phase-seconds", type=float, default=8.0, help="seconds of each load phase (default 8)")
    parser.add_argument("--threads", type=int, default=8, help="client threads of each load phase (default 8)")
    parser.add_argument(
        "--replicas",
        type=int,
        choices=(1, 2),
        default=1,
        help="streaming replicas (default 1; 2 adds a second and a server preparing on both)",
    )
    options = parser.parse_args()
    try:
        programs = pg_bin()
    except Failed as error:
        print(f"== PostgreSQL on 127.0.0.1:{PRIMARY_PORT} does not answer: {error}", file=sys.stderr)
        return 1
    for program in (programs / "pg_basebackup", programs / "pg_ctl", Path(sys.executable).parent / "gunicorn"):
        if not program.exists():
            print(f"== {program} is missing", file=sys.stderr)
            return 1
    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGHUP, _raise_interrupted)
    signal.signal(signal.SIGALRM, lambda signum, frame: _raise_interrupted(signum, frame))
    signal.alarm(options.timeout)

    directory = Path(tempfile.mkdtemp(prefix="powercontext-replica-"))
    os.chmod(directory, 0o755)  # the postgres user reaches its own subdirectory
    database = f"powercontext_replica_{os.getpid()}"
    copy = f"{database}_copy"  # a database that is not a standby: a "replica" the app servers must refuse
    access = ReplicationAccess()
    replica = Replica(directory, access, programs)
    # A second standby (--replicas 2) of the same primary: the prepare phase on two replicas, and the one paused.
    second = Replica(directory, access, programs, "replica-2") if options.replicas == 2 else None
    pgbouncer = None
    servers: list[AppServer] = []
    created = False
    status = 0
    try:
        sql(PRIMARY_PORT, "postgres", f'CREATE DATABASE "{database}"')
        created = True
        secret = os.urandom(32).hex()
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("POWERCONTEXT_", "DATABASE_URL"))}
        base_env |= {"SECRET_KEY": secret, "DEBUG": "false", "DJANGO_SETTINGS_MODULE": "powercontext.settings"}
        direct = base_env | {"DATABASE_URL": f"postgres://{DB_USER}@127.0.0.1:{PRIMARY_PORT}/{database}"}
        key = migrate_with_scope_and_key(direct, directory, scope=SCOPE, key_name="load")
        say(f"scratch database {database} migrated, scope {SCOPE} and one API key created")
        sql(PRIMARY_PORT, "postgres", f'CREATE DATABASE "{copy}" TEMPLATE "{database}"')
        say(f"{copy}: a copy of it on the primary, not in recovery (the diverged server's 'replica')")

        replica.start()
        say(f"streaming replica on 127.0.0.1:{replica.port} (hot standby, pg_basebackup -R)")
        if second is not None:
            started = time.monotonic()
            second.start()
            say(f"second streaming replica on 127.0.0.1:{second.port} ({time.monotonic() - started:.0f} s to make)")
        replicas = [replica] if second is None else [replica, second]
        bouncer_port = free_port()
        (directory / "pgbouncer").mkdir()
        pgbouncer = start_pgbouncer(directory / "pgbouncer", bouncer_port)
        say(f"PgBouncer (transaction mode) on 127.0.0.1:{bouncer_port}")

        app_env = base_env | {
            "DATABASE_URL": f"postgres://{DB_USER}@127.0.0.1:{bouncer_port}/{database}",
            "POWERCONTEXT_PGBOUNCER": "transaction",
            "ALLOWED_HOSTS": "127.0.0.1",
            "POWERCONTEXT_METRICS_LOOPBACK": "true",
            # Every server hands out consistency tokens; the replica servers serve prepares on the replica.
            "POWERCONTEXT_PREPARE_ON_REPLICAS": "true",
            "PYTHONUNBUFFERED": "1",
        }
        replica_url = f"postgres://{DB_USER}@127.0.0.1:{replica.port}/{database}"
        copy_url = f"postgres://{DB_USER}@127.0.0.1:{PRIMARY_PORT}/{copy}"
        paused_url = f"postgres://{DB_USER}@127.0.0.1:{replicas[-1].port}/{database}"
        roles = [
            ("replica-a", replica_url, {}),
            ("replica-b", replica_url, {}),
            ("primary-a", None, {}),
            ("primary-b", None, {}),
            ("diverged", copy_url, {}),
            # Its replica (the last) gets its replay paused: a low lag bound shows when it stops serving.
            ("lagged", paused_url, {"POWERCONTEXT_REPLICA_MAX_LAG_SECONDS": str(LAGGED_MAX_LAG_SECONDS)}),
        ]
        if second is not None:
            roles.append(("two-replicas", f"{replica_url},{paused_url}", {}))
        for name, url, extra in roles:
            server = AppServer(name, free_port(), url is not None)
            env = app_env | ({"POWERCONTEXT_READ_REPLICA_URLS": url} if url else {}) | extra
            start_app_server(server, env, directory)
            servers.append(server)
        for server in servers:
            wait_ready(server)
        replica_a, replica_b, primary_a, primary_b, diverged, lagged = servers[:6]
        say(
            "app servers (gunicorn, "
            f"{SERVER_WORKERS} workers each): "
            + ", ".join(f"{s.name} on :{s.port}{' (replica)' if s.replica else ''}" for s in servers)
        )

        load = Load(written=[], key=key)
        check_write_then_read_elsewhere(primary_a, primary_b, load, 10)
        check_write_then_read_elsewhere(replica_a, replica_b, load, 10)
        check_write_then_read_elsewhere(primary_a, replica_a, load, 10)

        figures = {}
        phases = (
            ("1 app server, primary only", [primary_a]),
            ("2 app servers, primary only", [primary_a, primary_b]),
            ("1 app server, with the replica", [replica_a]),
            ("2 app servers, with the replica", [replica_a, replica_b]),
            ("exact reads only, 2 app servers, primary only", [primary_a, primary_b]),
            ("exact reads only, 2 app servers, with the replica", [replica_a, replica_b]),
        )
        for label, phase_servers in phases:
            only = "reads" if label.startswith("exact reads only") else None
            figures[label] = run_load(label, phase_servers, load, options.phase_seconds, options.threads, only=only)
        if load.errors:
            raise Failed(f"{len(load.errors)} client errors under load, e.g. {load.errors[:3]}")

        replica.wait_caught_up()
        served_before = replica.transactions(database)
        verified = check_every_citation([replica_a, replica_b, primary_b], primary_a, load)
        counters = {s.name: replica_counters(s) for s in (replica_a, replica_b)}
        replica_served = sum(c.get("reads replica", 0) for c in counters.values())
        say(
            f"{verified} acknowledged writes read back exactly on replica-a, replica-b and primary-b, "
            f"identical to primary-a's answers"
        )
        say(f"replica servers' counters: {counters}")
        say(
            f"the replica ran {replica.transactions(database) - served_before} transactions in {database} "
            "during that check"
        )
        if replica_served == 0:
            raise Failed("no read was served by the replica (powercontext_replica_reads_total{outcome=replica} = 0)")
        prepares_served = sum(v for c in counters.values() for k, v in c.items() if k.startswith("prepares replica"))
        if prepares_served == 0:
            raise Failed("no prepare was served by the replica (powercontext_prepare_reads_total{where=replica} = 0)")
        check_identity(counters, diverged, primary_a, load)
        for server in (replica_a, replica_b):
            shared = [path.name for path in health_dir(server).glob("replica-*.json")]
            if not shared:
                raise Failed(f"{server.name}'s workers shared no replica probe (POWERCONTEXT_REPLICA_HEALTH_DIR)")
        say("each replica server's workers shared their replica probes through one file per replica")

        prepare_phases = [(primary_a, []), (replica_a, [replica])]
        if second is not None:
            prepare_phases.append((servers[6], replicas))
        figures |= run_prepare_phases(prepare_phases, load, database, options.phase_seconds, options.threads)
        check_replay_paused(lagged, primary_a, replicas[-1], load, PAUSE_LIMIT_SECONDS)
        for standby in replicas:
            standby.wait_caught_up()

        def stop_replica_midway() -> None:
            time.sleep(options.phase_seconds / 3)
            replica.stop("fast")
            say("replica stopped (pg_ctl stop -m fast) in the middle of the load")

        errors_before = len(load.errors)
        run_load(
            "2 app servers, replica stopped midway",
            [replica_a, replica_b],
            load,
            options.phase_seconds,
            options.threads,
            during=stop_replica_midway,
        )
        if len(load.errors) > errors_before:
            raise Failed(f"client errors after the replica stopped: {load.errors[errors_before:][:3]}")
        counters = {s.name: replica_counters(s) for s in (replica_a, replica_b)}
        skipped = sum(v for c in counters.values() for k, v in c.items() if k.startswith("skips"))
        say(f"replica servers' counters after the stop: {counters}")
        if skipped == 0:
            raise Failed("the stopped replica was never counted as skipped")
        verified = check_every_citation([replica_a, replica_b, primary_b], primary_a, load)
        say(f"{verified} acknowledged writes still read back exactly on every path with the replica down")
        for label, (operations, elapsed) in figures.items():
            say(f"throughput, {label}: {operations / elapsed:.1f} req/s")
        say("PASSED")
    except (Failed, Interrupted, KeyboardInterrupt, subprocess.SubprocessError, httpx.HTTPError) as error:
        print(f"== FAILED: {type(error).__name__}: {error}", file=sys.stderr)
        status = 1
    finally:
        signal.alarm(0)
        for server in servers:
            stop(server.process, f"app server {server.name}")
        stop(pgbouncer, "pgbouncer")
        for standby in (replica, second):
            try:
                if standby is not None:
                    standby.stop("immediate")
            except (Failed, subprocess.SubprocessError) as error:
                print(f"== could not stop {standby.name}: {error}", file=sys.stderr)
        if status:
            for server in servers:
                log = directory / f"{server.name}.log"
                if log.exists():
                    print(f"== last lines of {server.name}.log:", file=sys.stderr)
                    print("".join(log.read_text().splitlines(True)[-15:]), file=sys.stderr)
            print(f"== last lines of replica.log:\n{replica.log_tail()}", file=sys.stderr)
        try:
            access.revoke()
        except (Failed, OSError) as error:
            print(f"== could not remove the pg_hba.conf line: {error}", file=sys.stderr)
            status = 1
        if created:
            for name in (database, copy):
                try:
                    sql(PRIMARY_PORT, "postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                except Failed as error:
                    print(f"== could not drop {name}: {error}", file=sys.stderr)
        shutil.rmtree(directory, ignore_errors=True)
        for server in servers:
            shutil.rmtree(health_dir(server), ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
