#!/usr/bin/env python3
"""Failover without losing an acknowledged write, proven with pg_auto_failover's own daemons (docs/scaling.md §12).

    python tests/failover/run.py [--timeout SECONDS] [--kills N] [--threads N] [--keep-on-failure]

Starts, on loopback only and on free ports (never touching the cluster on 5432), as the ``postgres`` OS user:
pg_auto_failover's monitor, a primary and a synchronous standby (``pg_autoctl create … --run``: each node's
keeper and its PostgreSQL, in a temporary directory); then two gunicorn app servers whose ``DATABASE_URL`` names
both nodes with ``target_session_attrs=read-write`` (libpq finds the primary) and
``POWERCONTEXT_DB_REQUIRE_STANDBY`` on (a write is acknowledged only once the standby has it: pg_auto_failover 2.0's
switchover otherwise loses writes), migrated, with one scope and one API key.

Then, ``--kills`` times (default 5): a bounded mixed load (client threads with httpx: writes with an
Idempotency-Key, retried with the same key after a 503; conditional writes with ``expected_head_revision``;
prepares; exact reads of acknowledged citations), the primary's postmaster killed with SIGKILL a few seconds in,
the load kept up until the formation has a primary and a secondary again. Then a write in doubt
(``tests/failover/in_doubt.py``: committed by the primary's recovery, never confirmed by the frozen standby; no
retry may acknowledge it until the standby has it). Once more with a planned switchover
(``pg_autoctl perform switchover``) instead of the kill, as in a rolling upgrade. For each event it prints
the seconds until the first acknowledged write after the event, the requests answered 503 (each must carry
``Retry-After``) and 500 (must be 0), and then checks that every acknowledged write reads back with its exact
bytes, that every artifact's revisions are gapless, and that the old primary rejoined as the standby.

Fails, naming what went wrong, on a 500, a client-visible error other than a 503, an acknowledged write missing
or changed, a gap, or a formation that does not settle. Stops and removes everything it started on success,
failure (unless ``--keep-on-failure``: the directory, its data and logs are left for a post-mortem), timeout
(``--timeout``, default 900 s) or a signal.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.failover.in_doubt import thaw_formation, write_in_doubt  # noqa: E402
from tests.pgbouncer.run import free_port, psql, stop  # noqa: E402
from tests.replica.run import (  # noqa: E402
    AppServer,
    Failed,
    Interrupted,
    _raise_interrupted,
    headers,
    migrate_with_scope_and_key,
    pg_bin,
    postgres_account,
    say,
    start_app_server,
    wait_ready,
)

DATABASE = "powercontext"
SCOPE = "project:failover"
SETTLE_SECONDS = 180
BEFORE_EVENT_SECONDS = 4.0
AFTER_SETTLED_SECONDS = 3.0
REQUEST_SECONDS = 60
# After an event, how long the formation may take to show it (the keeper restarts a killed postmaster within a
# second or two, the monitor then fails over), and for how many polls (0.5 s apart) a settled state must hold.
LEAVE_SETTLED_SECONDS = 30
STABLE_POLLS = 6
SWITCHOVER_ATTEMPTS = 3
RETRY_WITH_SAME_KEY_SECONDS = 120
# Django's log lines for a 4xx answer: the load expects some (a history before the first write), so a failure's
# log tail leaves them out.
ROUTINE = ("Not Found:", "Conflict:", "Bad Request:")


# --- the formation ----------------------------------------------------------------------------------


class Formation:
    """pg_auto_failover's monitor and two nodes (each a keeper with its PostgreSQL) in a temporary directory."""

    def __init__(self, directory: Path, programs: Path) -> None:
        self.directory = directory
        self.monitor_port, self.ports = free_port(), {}
        while len(self.ports) < 2:
            port = free_port()
            if port != self.monitor_port and port not in self.ports.values():
                self.ports[f"node{len(self.ports) + 1}"] = port
        account = postgres_account()
        self.account = {"user": account.pw_uid, "group": account.pw_gid} if os.geteuid() == 0 else {}
        self.env = {
            "PATH": f"{programs}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(directory),
            "XDG_CONFIG_HOME": str(directory / "config"),
            "XDG_DATA_HOME": str(directory / "data"),
            "PG_CONFIG": str(programs / "pg_config"),
            "LANG": "C.UTF-8",
        }
        self.processes: dict[str, subprocess.Popen] = {}

    def pgdata(self, name: str) -> Path:
        return self.directory / name

    @property
    def monitor_uri(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover?sslmode=disable"

    @property
    def database_url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports.values())
        return f"postgres://postgres@{hosts}/{DATABASE}?target_session_attrs=read-write&connect_timeout=2"

    def _command(self, args: list[str], *, timeout: float) -> str:
        completed = subprocess.run(
            ["pg_autoctl", *args], env=self.env, cwd=self.directory, capture_output=True, text=True,
            timeout=timeout, **self.account,
        )  # fmt: skip
        if completed.returncode != 0:
            raise Failed(f"pg_autoctl {' '.join(args)} exited with {completed.returncode}: {completed.stderr[-800:]}")
        return completed.stdout

    def _daemon(self, name: str, args: list[str]) -> None:
        log = (self.directory / f"{name}.log").open("a")
        self.processes[name] = subprocess.Popen(
            ["pg_autoctl", *args], env=self.env, cwd=self.directory, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, **self.account,
        )  # fmt: skip

    def log_tail(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return "".join(path.read_text(errors="replace").splitlines(True)[-15:]) if path.exists() else ""

    def start(self) -> None:
        common = ["--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl"]
        self._command(
            ["create", "monitor", "--pgdata", str(self.pgdata("monitor")), "--pgport", str(self.monitor_port), *common],
            timeout=120,
        )
        self._daemon("monitor", ["run", "--pgdata", str(self.pgdata("monitor"))])
        self._wait(lambda: self._answers(self.monitor_port, "pg_auto_failover"), "the monitor to answer", 60)
        say(f"pg_auto_failover monitor on 127.0.0.1:{self.monitor_port}")
        for name, port in self.ports.items():
            self._daemon(
                name,
                ["create", "postgres", "--pgdata", str(self.pgdata(name)), "--pgport", str(port), "--name", name,
                 "--dbname", DATABASE, "--monitor", self.monitor_uri, *common, "--run"],
            )  # fmt: skip
            if name == "node1":
                self._wait(lambda: self._reported("node1") in ("single", "wait_primary", "primary"), "node1", 120)
        # A new standby's pg_basebackup waits for a checkpoint, spread over minutes unless one is asked for.
        self._wait(self._settled_or_checkpoint, "a primary and a synchronous standby", SETTLE_SECONDS)
        say(f"primary and synchronous standby on 127.0.0.1:{', '.join(map(str, self.ports.values()))}")

    @staticmethod
    def _answers(port: int, database: str) -> bool:
        try:
            psql(port, database, "SELECT 1")
            return True
        except (RuntimeError, subprocess.SubprocessError):
            return False

    def _settled_or_checkpoint(self) -> bool:
        if self.primary() is not None:
            return True
        for port in self.ports.values():
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                psql(port, "postgres", "CHECKPOINT")
        return False

    def _wait(self, condition, what: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None and name != "create":
                    raise Failed(f"pg_autoctl {name} exited with {process.returncode}:\n{self.log_tail(name)}")
            if condition():
                return
            time.sleep(0.5)
        raise Failed(f"no {what} within {seconds:.0f} s; state: {self.state_text()}")

    def state(self) -> list[dict]:
        try:
            return json.loads(
                self._command(["show", "state", "--pgdata", str(self.pgdata("monitor")), "--json"], timeout=30)
            )
        except (Failed, json.JSONDecodeError, subprocess.SubprocessError):
            return []

    def state_text(self) -> str:
        return (
            "; ".join(f"{n['nodename']} {n['current_group_state']}->{n['assigned_group_state']}" for n in self.state())
            or "unknown"
        )

    def _reported(self, name: str) -> str | None:
        return next((n["current_group_state"] for n in self.state() if n["nodename"] == name), None)

    def primary(self) -> str | None:
        """The primary's name when the formation is settled (a primary and a secondary, as assigned), else None."""
        nodes = self.state()
        states = sorted((n["current_group_state"], n["assigned_group_state"]) for n in nodes)
        if states != [("primary", "primary"), ("secondary", "secondary")]:
            return None
        return next(n["nodename"] for n in nodes if n["current_group_state"] == "primary")

    def wait_settled(self, *, changing_from: str | None = None) -> str:
        """The primary once the formation is settled, and still so a few seconds later; with ``changing_from``,
        first wait (a while) for the formation to leave that settled state, as it does after a kill or a switch."""
        if changing_from is not None:
            deadline = time.monotonic() + LEAVE_SETTLED_SECONDS
            while time.monotonic() < deadline and self.primary() == changing_from:
                time.sleep(0.5)
        seen: list[str | None] = []

        def stable() -> bool:
            seen.append(self.primary())
            return seen[-1] is not None and seen[-STABLE_POLLS:] == [seen[-1]] * STABLE_POLLS

        self._wait(stable, "settled formation", SETTLE_SECONDS)
        return seen[-1]

    def replication(self, name: str) -> str:
        """What the node's PostgreSQL says of its replication: the standbys a commit waits for, and each standby's
        state (a switchover of a primary that commits alone can lose what its standby never received)."""
        statement = (
            "SELECT quote_literal(current_setting('synchronous_standby_names')) || ', ' || coalesce((SELECT "
            "string_agg(application_name || ' ' || state || ' ' || sync_state, ', ') FROM pg_stat_replication), "
            "'no standby')"
        )
        try:
            return psql(self.ports[name], DATABASE, statement).strip()
        except (RuntimeError, subprocess.SubprocessError) as error:
            return f"unknown ({error})"

    def postmaster_pid(self, name: str) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.pgdata(name) / "postmaster.pid").read_text().split()[0])
        return None

    def kill_postmaster(self, name: str) -> None:
        os.kill(self.postmaster_pid(name), signal.SIGKILL)

    def switchover(self) -> None:
        # The monitor may refuse the request when it deadlocks with a node's concurrent report (seen with
        # pg_auto_failover 2.0 under load): asked again once the formation is settled.
        for attempt in range(1, SWITCHOVER_ATTEMPTS + 1):
            try:
                self._command(["perform", "switchover", "--pgdata", str(self.pgdata("node1"))], timeout=SETTLE_SECONDS)
                return
            except Failed as error:
                if attempt == SWITCHOVER_ATTEMPTS:
                    raise
                say(f"switchover refused ({str(error).splitlines()[-1][:120]}); asking again")
                self.wait_settled()

    def stop(self) -> None:
        thaw_formation(self)  # a failure in the write in doubt may leave a node frozen: stop needs it running
        for name in [n for n in self.processes if n != "monitor"] + ["monitor"]:
            stop(self.processes.get(name), f"pg_autoctl {name}")
        for name in [*self.ports, "monitor"]:  # a postmaster its keeper left behind
            pidfile = self.pgdata(name) / "postmaster.pid"
            if pidfile.exists():
                pg_ctl = self.env["PATH"].split(":")[0] + "/pg_ctl"
                subprocess.run(
                    [pg_ctl, "stop", "-D", str(self.pgdata(name)), "-m", "immediate"],
                    env=self.env, capture_output=True, timeout=60, **self.account,
                )  # fmt: skip


# --- the load -----------------------------------------------------------------------------------------


@dataclass
class Acknowledged:
    citation: dict
    body: str
    event: str  # the event whose load window acknowledged it
    # When the 201 arrived (time.monotonic()) and how ("write", "replayed write", "conditional write"): a failure
    # says when, relative to its event, the lost writes were acknowledged.
    at: float = 0.0
    how: str = ""


@dataclass
class Tally:
    """What the clients saw: every answer's time and status, the acknowledged writes, the unexpected answers."""

    key: str
    event: str = "start"
    conflicts: int = 0  # conditional writes answered 409
    event_at: dict[str, float] = field(default_factory=dict)  # when each event was set off (time.monotonic())
    acknowledged: list[Acknowledged] = field(default_factory=list)
    answers: list[tuple[float, float, str, int]] = field(default_factory=list)  # sent, answered, kind, status
    errors: list[str] = field(default_factory=list)
    artifacts: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    serial: itertools.count = field(default_factory=lambda: itertools.count(1))

    def answer(self, kind: str, response: httpx.Response) -> None:
        answered = time.monotonic()
        with self.lock:
            self.answers.append((answered - response.elapsed.total_seconds(), answered, kind, response.status_code))
        if response.status_code == 503 and not response.headers.get("Retry-After"):
            self.error(f"{kind}: 503 without Retry-After")
        elif response.status_code == 500:
            self.error(f"{kind}: 500 {response.text[:200]}")

    def error(self, message: str) -> None:
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(f"{self.event}: {message}")


def _entry(tally: Tally, artifact: str, extra: dict) -> tuple[str, dict]:
    """A new memory entry's body and request (sent again unchanged when retried with its Idempotency-Key)."""
    number = next(tally.serial)
    body = f"Failover entry {number}: kept byte for byte, é and ✓ included."
    return body, {"scope_id": SCOPE, "artifact_id": artifact, "entry_id": f"entry-{number}", "body": body} | extra


def _post_entry(client: httpx.Client, base: str, tally: Tally, payload: dict, extra_headers: dict) -> httpx.Response:
    return client.post(f"{base}/v1/memory/entries", json=payload, headers=headers(tally.key) | extra_headers)


def _acknowledge(tally: Tally, body: str, response: httpx.Response, how: str) -> int:
    citation = response.json()["citation"]
    if response.headers.get("Idempotent-Replayed") == "true":
        how = f"replayed {how}"
    with tally.lock:
        tally.acknowledged.append(Acknowledged(citation, body, tally.event, time.monotonic(), how))
    return citation["revision"]


def _head_taken_back(response: httpx.Response, expected: int) -> bool:
    """Whether a conflict says the head is below the one this thread read: each thread alone writes its artifact,
    so only a write in doubt taken back by a failover explains it (any other conflict is an unexpected answer)."""
    message = response.json().get("error", {}).get("message", "")
    head = message.rsplit("but the head is ", 1)[-1]
    return head.isdigit() and int(head) < expected


def load_thread(servers: list[str], tally: Tally, number: int, stop_event: threading.Event) -> None:
    """One client: idempotent writes (retried with their key), conditional writes, exact reads and prepares."""
    rng = random.Random(number)
    artifact = f"failover-{number}-{rng.randrange(10**6)}"
    with tally.lock:
        tally.artifacts.add(artifact)
    head: int | None = None  # unknown: read from the history first (the artifact may exist from an earlier event)
    with httpx.Client(timeout=REQUEST_SECONDS, trust_env=False) as client:
        while not stop_event.is_set():
            base = rng.choice(servers)
            roll = rng.random()
            try:
                if roll < 0.35 or not tally.acknowledged:
                    key = f"failover-{number}-{next(tally.serial)}"
                    give_up = time.monotonic() + RETRY_WITH_SAME_KEY_SECONDS
                    body, payload = _entry(tally, artifact, {})
                    while True:
                        response = _post_entry(client, base, tally, payload, {"Idempotency-Key": key})
                        tally.answer("write", response)
                        if response.status_code == 201:
                            head = _acknowledge(tally, body, response, "write")
                            break
                        if response.status_code != 503 or time.monotonic() > give_up:
                            if response.status_code != 503:
                                tally.error(f"idempotent write: {response.status_code} {response.text[:200]}")
                            head = None
                            break
                        time.sleep(min(float(response.headers.get("Retry-After") or 1), 1.0))
                elif roll < 0.5:
                    if head is None:
                        params = {"scope_id": SCOPE, "family": "memory", "artifact_id": artifact, "limit": "1"}
                        response = client.get(f"{base}/v1/artifacts/history", params=params, headers=headers(tally.key))
                        tally.answer("history", response)
                        if response.status_code == 200:
                            revisions = response.json().get("revisions") or []
                            head = revisions[0]["citation"]["revision"] if revisions else 0
                        elif response.status_code == 404:
                            head = 0
                        elif response.status_code != 503:
                            tally.error(f"history: {response.status_code} {response.text[:200]}")
                        continue
                    body, payload = _entry(tally, artifact, {"expected_head_revision": head})
                    response = _post_entry(client, base, tally, payload, {})
                    tally.answer("conditional write", response)
                    if response.status_code == 201:
                        head = _acknowledge(tally, body, response, "conditional write")
                    elif response.status_code == 503:
                        head = None  # committed or not: only the history can tell
                    elif response.status_code == 409 and _head_taken_back(response, head):
                        # The head was read from a write in doubt that a failover then took back (docs/scaling.md
                        # §12: reads may see it, acknowledgements may not): read the history again, as a client does.
                        with tally.lock:
                            tally.conflicts += 1
                        head = None
                    else:
                        tally.error(f"conditional write at head {head}: {response.status_code} {response.text[:200]}")
                        head = None
                elif roll < 0.8:
                    with tally.lock:
                        written = rng.choice(tally.acknowledged)
                    response = client.get(
                        f"{base}/v1/artifacts/revision", params=written.citation, headers=headers(tally.key)
                    )
                    tally.answer("exact read", response)
                    if response.status_code == 200 and response.json()["entry"]["body"] != written.body:
                        tally.error(f"exact read {written.citation}: another body")
                    elif response.status_code not in (200, 503):
                        tally.error(f"exact read {written.citation}: {response.status_code} {response.text[:200]}")
                else:
                    payload = {"scope_id": SCOPE, "query": "failover entry bytes", "assembly": {}}
                    response = client.post(f"{base}/v1/context/prepare", json=payload, headers=headers(tally.key))
                    tally.answer("prepare", response)
                    if response.status_code not in (200, 503):
                        tally.error(f"prepare: {response.status_code} {response.text[:200]}")
            except httpx.HTTPError as error:
                tally.error(f"{base}: {type(error).__name__}: {error}")


# --- the events and the checks ------------------------------------------------------------------------


@dataclass
class EventFigures:
    label: str
    before: str
    after: str
    downtime: float | None
    longest_gap: float
    unavailable: int
    server_errors: int
    requests: int


def run_event(
    label: str, formation: Formation, servers: list[AppServer], tally: Tally, threads: int, event
) -> EventFigures:
    """Load, the event a few seconds in, load on until the formation settles again; the figures of the window."""
    before = formation.wait_settled()
    tally.event = label
    stop_event = threading.Event()
    answers_before = len(tally.answers)
    urls = [server.url for server in servers]
    workers = [
        threading.Thread(target=load_thread, args=(urls, tally, n, stop_event), daemon=True, name=f"load-{n}")
        for n in range(threads)
    ]
    for worker in workers:
        worker.start()
    try:
        time.sleep(BEFORE_EVENT_SECONDS)
        replication = formation.replication(before)
        at = time.monotonic()
        tally.event_at[label] = at
        event(before)
        after = formation.wait_settled(changing_from=before)
        time.sleep(AFTER_SETTLED_SECONDS)
    finally:
        stop_event.set()
        for worker in workers:
            worker.join(REQUEST_SECONDS + RETRY_WITH_SAME_KEY_SECONDS)
    if any(worker.is_alive() for worker in workers):
        raise Failed(f"{label}: load threads still running after the phase")
    window = tally.answers[answers_before:]
    # Acknowledged writes sent after the event (one in flight at the kill may have committed before it).
    writes_after = [
        done for sent, done, kind, status in window if sent > at and kind.endswith("write") and status == 201
    ]
    # The longest time without an acknowledged write around the event: a planned switchover's real pause.
    acknowledged = sorted(done for _, done, kind, status in window if kind.endswith("write") and status == 201)
    longest_gap = max((b - a for a, b in zip(acknowledged, acknowledged[1:], strict=False)), default=0.0)
    figures = EventFigures(
        label,
        before,
        after,
        (min(writes_after) - at) if writes_after else None,
        longest_gap,
        sum(1 for *_, status in window if status == 503),
        sum(1 for *_, status in window if status >= 500 and status != 503),
        len(window),
    )
    say(
        f"{label}: primary {before} -> {after}; first acknowledged write {figures.downtime:.1f} s after, longest "
        f"pause between acknowledged writes {longest_gap:.1f} s; "
        f"{figures.requests} requests, {figures.unavailable} answered 503, {figures.server_errors} 5xx other than 503; "
        f"{before}'s replication when it was set off: {replication}"
        if figures.downtime is not None
        else f"{label}: no write acknowledged after the event"
    )
    return figures


def check_everything_kept(label: str, servers: list[AppServer], tally: Tally) -> tuple[int, int]:
    """Every acknowledged write read back exactly through each server; each artifact's revisions gapless."""
    missing: list[tuple[Acknowledged, str]] = []
    heads: dict[str, int] = {}
    with httpx.Client(timeout=REQUEST_SECONDS, trust_env=False) as client:
        for number, written in enumerate(tally.acknowledged):
            server = servers[number % len(servers)]
            response = client.get(
                f"{server.url}/v1/artifacts/revision", params=written.citation, headers=headers(tally.key)
            )
            if response.status_code != 200 or response.json()["entry"]["body"] != written.body:
                missing.append((written, f"{written.citation}: {response.status_code} {response.text[:120]}"))
        gaps = []
        for artifact in sorted(tally.artifacts):
            revisions, before = [], None
            while True:
                params = {"scope_id": SCOPE, "family": "memory", "artifact_id": artifact, "limit": "100"}
                if before:
                    params["before"] = str(before)
                response = client.get(
                    f"{servers[0].url}/v1/artifacts/history", params=params, headers=headers(tally.key)
                )
                if response.status_code == 404:
                    break  # no write of this thread was ever acknowledged or made
                if response.status_code != 200:
                    raise Failed(f"history of {artifact}: {response.status_code} {response.text[:200]}")
                page = response.json()
                revisions += [r["citation"]["revision"] for r in page.get("revisions") or []]
                before = page.get("next_before")
                if not before:
                    break
            heads[artifact] = max(revisions, default=0)
            if sorted(revisions) != list(range(1, len(revisions) + 1)):
                gaps.append(f"{artifact}: revisions {sorted(revisions)[:20]}")
    if missing:
        raise Failed(
            f"after {label}: {len(missing)} of {len(tally.acknowledged)} acknowledged writes missing or changed; "
            f"{_describe_missing([written for written, _ in missing], tally, heads)}; "
            f"e.g. {[text for _, text in missing[:3]]}"
        )
    if gaps:
        raise Failed(f"after {label}: revisions with gaps: {gaps[:3]}")
    return len(tally.acknowledged), len(tally.artifacts)


def _describe_missing(missing: list[Acknowledged], tally: Tally, heads: dict[str, int]) -> str:
    """Per event, when (seconds from the event being set off) and how the lost writes were acknowledged, and per
    artifact the revisions lost against the head it has now: what a post-mortem asks first."""
    parts = []
    for event in sorted({written.event for written in missing}):
        lost = [written for written in missing if written.event == event]
        of = sum(1 for written in tally.acknowledged if written.event == event)
        hows = {how: sum(1 for written in lost if written.how == how) for how in {w.how for w in lost}}
        at = tally.event_at.get(event)
        when = (
            f", acknowledged {min(w.at for w in lost) - at:+.1f} to {max(w.at for w in lost) - at:+.1f} s from it"
            if at is not None
            else ""
        )
        parts.append(f"{event}: {len(lost)} of the {of} it acknowledged{when}, by kind {hows}")
    for artifact in sorted({written.citation["artifact_id"] for written in missing}):
        lost = sorted(w.citation["revision"] for w in missing if w.citation["artifact_id"] == artifact)
        parts.append(f"{artifact}: revisions {lost[0]}..{lost[-1]} ({len(lost)}) lost, head now {heads.get(artifact)}")
    return "; ".join(parts)


def database_retries(servers: list[AppServer]) -> dict[str, float]:
    """powercontext_database_retries_total by outcome, summed over the servers' workers."""
    totals: dict[str, float] = {}
    for server in servers:
        text = httpx.get(f"{server.url}/metrics", timeout=REQUEST_SECONDS, trust_env=False).text
        for line in text.splitlines():
            if line.startswith("powercontext_database_retries_total{"):
                outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
                totals[outcome] = totals.get(outcome, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def print_table(rows: list[EventFigures], tally: Tally) -> None:
    say(
        "| event | primary before → after | first write after (s) | longest write pause (s) | requests | 503 "
        "| other 5xx | lost writes |"
    )
    say("|---|---|---|---|---|---|---|---|")
    for row in rows:
        downtime = f"{row.downtime:.1f}" if row.downtime is not None else "none"
        say(
            f"| {row.label} | {row.before} → {row.after} | {downtime} | {row.longest_gap:.1f} | {row.requests} "
            f"| {row.unavailable} "
            f"| {row.server_errors} | 0 |"
        )
    say(f"{len(tally.acknowledged)} acknowledged writes over {len(tally.artifacts)} artifacts, all read back exactly")


def print_failure(error: BaseException, formation: Formation, servers: list[AppServer], directory: Path) -> None:
    """What an operator needs to tell why: the app servers' logs without their routine 4xx lines, each keeper's last
    lines, the formation's state, and the failure itself last (CI shows the end of the output)."""
    for server in servers:
        log = directory / f"{server.name}.log"
        if log.exists():
            lines = [line for line in log.read_text(errors="replace").splitlines(True) if not line.startswith(ROUTINE)]
            print(f"== {server.name} log without its 4xx lines (last lines):\n{''.join(lines[-15:])}")
    for name in [*formation.ports, "monitor"]:
        print(f"== pg_autoctl {name} log (last lines):\n{formation.log_tail(name)}")
    print(f"== formation: {formation.state_text()}", flush=True)  # before the failure, which goes to stderr
    print(f"== FAILED: {type(error).__name__}: {error}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=int, default=900, help="seconds for everything (default 900)")
    parser.add_argument("--kills", type=int, default=5, help="times the primary's postmaster is killed (default 5)")
    parser.add_argument("--threads", type=int, default=6, help="client threads (default 6)")
    parser.add_argument(
        "--keep-on-failure", action="store_true", help="leave the temporary directory (data, logs) after a failure"
    )
    options = parser.parse_args()
    if shutil.which("pg_autoctl") is None:
        print("== pg_autoctl is missing: apt-get install postgresql-15-auto-failover", file=sys.stderr)
        return 1
    try:
        programs = pg_bin()
    except Failed as error:
        print(
            f"== PostgreSQL on 127.0.0.1:5432 does not answer (its version picks the programs): {error}",
            file=sys.stderr,
        )
        return 1
    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGHUP, _raise_interrupted)
    signal.signal(signal.SIGALRM, lambda signum, frame: _raise_interrupted(signum, frame))
    signal.alarm(options.timeout)

    began = time.monotonic()
    directory = Path(tempfile.mkdtemp(prefix="powercontext-failover-"))
    os.chmod(directory, 0o755)
    formation_directory = directory / "formation"
    formation_directory.mkdir()
    account = postgres_account()
    if os.geteuid() == 0:
        os.chown(formation_directory, account.pw_uid, account.pw_gid)
    formation = Formation(formation_directory, programs)
    servers: list[AppServer] = []
    status = 0
    try:
        formation.start()
        secret = os.urandom(32).hex()
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("POWERCONTEXT_", "DATABASE_URL"))}
        base_env |= {
            "SECRET_KEY": secret,
            "DEBUG": "false",
            "DJANGO_SETTINGS_MODULE": "powercontext.settings",
            "DATABASE_URL": formation.database_url,
            "ALLOWED_HOSTS": "127.0.0.1",
            "POWERCONTEXT_RECALL_MODE": "lexical",
            # pg_auto_failover 2.0's switchover can leave the old primary writable and committing alone (its issue
            # #774): without this, writes acknowledged there are lost (docs/scaling.md §12).
            "POWERCONTEXT_DB_REQUIRE_STANDBY": "true",
        }
        key = migrate_with_scope_and_key(base_env, directory, scope=SCOPE, key_name="failover")
        say(f"database {DATABASE} migrated through {formation.database_url}")
        for name in ("app1", "app2"):
            server = AppServer(name, free_port(), replica=False)
            start_app_server(server, base_env | {"POWERCONTEXT_METRICS_LOOPBACK": "true"}, directory)
            servers.append(server)
        for server in servers:
            wait_ready(server)
        say(f"two app servers: {', '.join(server.url for server in servers)}")

        tally = Tally(key)
        rows = []
        for kill in range(1, options.kills + 1):
            rows.append(
                run_event(f"kill -9 #{kill}", formation, servers, tally, options.threads, formation.kill_postmaster)
            )
            check_everything_kept(rows[-1].label, servers, tally)
        citation, body = write_in_doubt(formation, servers[0].url, key, SCOPE)
        with tally.lock:
            tally.acknowledged.append(
                Acknowledged(citation, body, "in-doubt write", time.monotonic(), "in-doubt write")
            )
        check_everything_kept("in-doubt write", servers, tally)
        rows.append(
            run_event("switchover", formation, servers, tally, options.threads, lambda _: formation.switchover())
        )
        acknowledged, artifacts = check_everything_kept(rows[-1].label, servers, tally)
        print_table(rows, tally)
        say(f"database retries (both servers): {database_retries(servers)}")
        say(f"conditional writes answered 409 (a head read from a write in doubt, then taken back): {tally.conflicts}")
        say(f"the whole run took {time.monotonic() - began:.0f} s")
        if tally.errors:
            raise Failed(f"{len(tally.errors)} unexpected answers, e.g. {tally.errors[:3]}")
        if any(row.server_errors for row in rows):
            raise Failed("answers 5xx other than 503 during a failover")
        if any(row.downtime is None for row in rows):
            raise Failed("an event after which no write was acknowledged")
        say(f"PASSED: {len(rows)} events, {acknowledged} acknowledged writes kept over {artifacts} artifacts")
    except (Failed, Interrupted, KeyboardInterrupt, subprocess.SubprocessError, httpx.HTTPError) as error:
        print_failure(error, formation, servers, directory)
        status = 1
    finally:
        signal.alarm(0)
        for server in servers:
            stop(server.process, f"app server {server.name}")
        formation.stop()
        if status and options.keep_on_failure:
            say(f"kept for a post-mortem: {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
