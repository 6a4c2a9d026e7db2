"""A write in doubt is never acknowledged: the event of ``tests/failover/run.py`` that proves it (docs/scaling.md §12).

A synchronous commit writes its record on the primary first, then waits for the standby. If the primary crashes
during that wait, the client hears nothing, yet the primary's recovery commits the write: back up, the primary
holds a write its standby never had, which a failover then loses. The app must not acknowledge it from there,
and an ``Idempotency-Key`` retry would (its record is committed too) unless the replay itself waits for the
standby. Random kills met this now and then (before the fix, one acknowledged write lost in four of 53 kills);
this event makes it happen every time:

1. the monitor and the standby are frozen (SIGSTOP: pg_autoctl's processes and PostgreSQL's), so nothing fails
   over and nothing confirms;
2. a write with an ``Idempotency-Key`` is sent; its commit waits for the standby (``wait_event`` SyncRep);
3. the primary's PostgreSQL is killed (SIGKILL, every process); its keeper starts it again, and its recovery
   commits the write;
4. the restarted primary must hold the write's record; the same write is sent again: while the standby stays
   frozen no answer may be a 201, and a replay must be waiting for the standby;
5. the standby and the monitor are thawed: the write is acknowledged, every 201 with one citation, the standby
   must hold its record, and it must then be kept like every other (the caller adds it to the writes it checks).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx

from tests.pgbouncer.run import psql
from tests.replica.run import Failed, headers, say

DATABASE = "powercontext"
WAIT_SECONDS = 60
# How long the retry must stay unanswered while the standby is frozen: long enough for a replay read at once to
# answer (a connection attempt to the frozen node costs connect_timeout, 2 s), short enough that the monitor
# (frozen too) does not find its nodes silent for long once thawed.
UNANSWERED_SECONDS = 5
# pg_auto_failover's own timeouts are about 20 s: a longer freeze tests another story (still a correct one).
FREEZE_WARNING_SECONDS = 15
REQUEST_SECONDS = 90


def _parent_and_group(pid: int) -> tuple[int, int] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name: state, ppid, pgrp, ...
    return int(fields[1]), int(fields[2])


def _processes(formation, name: str, *, with_pg_autoctl: bool) -> list[int]:
    group = formation.processes[name].pid  # started with start_new_session: the group's leader
    postmaster = formation.postmaster_pid(name)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        relation = _parent_and_group(pid)
        if relation is None:
            continue
        if pid == postmaster or relation[0] == postmaster or (with_pg_autoctl and relation[1] == group):
            found.append(pid)
    return found


def node_processes(formation, name: str) -> list[int]:
    """A node's pg_autoctl (its process group) and its PostgreSQL: the postmaster and its children, each of
    which PostgreSQL puts in a session of its own, out of reach of the group."""
    return _processes(formation, name, with_pg_autoctl=True)


def kill_postgres(formation, name: str) -> None:
    """SIGKILL to the node's postmaster and every child: none is left to finish a commit, nor to hold the shared
    memory its keeper's restart needs."""
    _signal(_processes(formation, name, with_pg_autoctl=False), signal.SIGKILL)


def _signal(pids: list[int], number: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)


def freeze(formation, name: str, frozen: list[int]) -> None:
    """SIGSTOP to a node's processes, adding each to ``frozen`` first (so a failure part-way still thaws it); the
    postmaster stopped first forks no more, and its children are listed again until no new one appears."""
    for _ in range(10):
        new = [pid for pid in node_processes(formation, name) if pid not in frozen]
        if not new:
            return
        frozen.extend(new)
        _signal(new, signal.SIGSTOP)
    raise Failed(f"in-doubt write: the processes of {name} kept changing while being frozen")


def thaw_formation(formation) -> None:
    """SIGCONT to every process of every node (harmless to a running one): nothing stays frozen, whatever failed."""
    for name in formation.processes:
        with contextlib.suppress(KeyError, OSError):
            _signal(node_processes(formation, name), signal.SIGCONT)


def _answer(port: int, statement: str) -> str | None:
    """One value from the node on ``port``, or None while it does not answer (crashed, starting, frozen)."""
    try:
        return psql(port, DATABASE, statement).strip()
    except (RuntimeError, OSError, subprocess.SubprocessError):
        return None


def _sync_waiters(port: int) -> int:
    """Backends of the primary whose commit waits for the synchronous standby."""
    return int(_answer(port, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") or 0)


def _records(port: int) -> int:
    return int(_answer(port, "SELECT count(*) FROM artifacts_idempotentwrite WHERE key = 'in-doubt'") or -1)


def _accepts_writes(port: int) -> bool:
    return _answer(port, "SELECT pg_is_in_recovery()") == "f"


def _until(condition, what: str, seconds: float = WAIT_SECONDS) -> None:
    # Not Formation._wait: on a timeout it asks the monitor for the formation's state, which waits 30 s while the
    # monitor is frozen.
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise Failed(f"in-doubt write: no {what} within {seconds:.0f} s")
        time.sleep(0.2)


class _Sent:
    """One request in a thread of its own: its answer (or error) once it has one."""

    def __init__(self, url: str, payload: dict, request_headers: dict) -> None:
        self.response: httpx.Response | None = None
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._send, args=(url, payload, request_headers), daemon=True)
        self._thread.start()

    def _send(self, url: str, payload: dict, request_headers: dict) -> None:
        try:
            self.response = httpx.post(
                url, json=payload, headers=request_headers, timeout=REQUEST_SECONDS, trust_env=False
            )
        except httpx.HTTPError as error:
            self.error = error

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self) -> None:
        self._thread.join(REQUEST_SECONDS + 5)

    def acknowledged(self) -> bool:
        return self.done() and self.response is not None and self.response.status_code == 201

    def describe(self) -> str:
        if not self.done():
            return "no answer yet"
        if self.response is None:
            return f"{type(self.error).__name__}"
        return f"{self.response.status_code} {self.response.text[:160]}"


def write_in_doubt(formation, base_url: str, api_key: str, scope: str) -> tuple[dict, str]:
    """The event of the module docstring; returns the write's citation and body once it was acknowledged."""
    primary = formation.wait_settled()
    standby = next(name for name in formation.ports if name != primary)
    port = formation.ports[primary]
    body = "In doubt: committed on the primary before its standby confirmed it, é and ✓ included."
    payload = {"scope_id": scope, "artifact_id": "in-doubt", "entry_id": "in-doubt", "body": body}
    url = f"{base_url}/v1/memory/entries"
    request_headers = headers(api_key) | {"Idempotency-Key": "in-doubt"}
    frozen: list[int] = []
    sent: list[_Sent] = []
    try:
        freeze(formation, "monitor", frozen)
        freeze(formation, standby, frozen)
        frozen_at = time.monotonic()
        sent.append(_Sent(url, payload, request_headers))
        _until(lambda: _sync_waiters(port) > 0 or sent[0].done(), "commit waiting for the frozen standby")
        if sent[0].done():
            raise Failed(f"in-doubt write: answered {sent[0].describe()} before the standby confirmed it")
        kill_postgres(formation, primary)
        _until(lambda: _accepts_writes(port), f"{primary} accepting writes again after its crash")
        _until(lambda: _records(port) == 1, f"record of the write on {primary} after its recovery")
        sent.append(_Sent(url, payload, request_headers))
        time.sleep(UNANSWERED_SECONDS)
        if any(one.acknowledged() for one in sent):
            raise Failed(
                "in-doubt write: acknowledged while the synchronous standby, frozen, never had it (a failover would "
                f"lose it): {'; '.join(one.describe() for one in sent)}"
            )
        waiting = _sync_waiters(port)
        if not waiting:
            raise Failed(
                f"in-doubt write: no replay waits for the standby on {primary} after {UNANSWERED_SECONDS} s: "
                f"{'; '.join(one.describe() for one in sent)}"
            )
        frozen_for = time.monotonic() - frozen_at
        too_long = frozen_for > FREEZE_WARNING_SECONDS
        say(
            f"in-doubt write: {primary} crashed while the write's commit waited for the frozen standby; back up, "
            f"it holds the write; the retry with the same Idempotency-Key is unanswered after "
            f"{UNANSWERED_SECONDS} s ({waiting} commit(s) waiting for the standby), answers so far: "
            f"{'; '.join(one.describe() for one in sent)}; frozen for {frozen_for:.1f} s"
            + (f" (over {FREEZE_WARNING_SECONDS} s: the monitor may act on it)" if too_long else "")
        )
    finally:
        _signal(frozen, signal.SIGCONT)
    thawed = time.monotonic()
    # Answered now, or (if the monitor fails over meanwhile) 503 and sent again with the same key.
    deadline = thawed + WAIT_SECONDS * 2
    answers: list[httpx.Response] = []
    while True:
        for one in sent:
            one.wait()
        answers += [one.response for one in sent if one.acknowledged()]
        if answers:
            break
        if time.monotonic() > deadline:
            raise Failed(f"in-doubt write: not acknowledged after the thaw: {'; '.join(o.describe() for o in sent)}")
        time.sleep(1)
        sent = [_Sent(url, payload, request_headers)]
    citations = {json.dumps(answer.json()["citation"], sort_keys=True) for answer in answers}
    if len(citations) != 1:
        raise Failed(f"in-doubt write: acknowledged with different citations: {sorted(citations)}")
    acknowledged = answers[0]
    took = time.monotonic() - thawed
    standby_port = formation.ports[standby]
    _until(
        lambda: _records(standby_port) == 1, f"idempotency record of the acknowledged write on {standby}", WAIT_SECONDS
    )
    say(
        f"in-doubt write: acknowledged {took:.2f} s after the standby and the monitor resumed "
        f"({'; '.join(one.describe()[:3] for one in sent)}), and {standby} holds it"
    )
    return acknowledged.json()["citation"], body
