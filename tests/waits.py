"""Bounded waits for tests: every wait ends, and a wait that runs out fails the test with a clear message.

A test that waits without a bound (a barrier, a thread join, an event, a subprocess) turns a deadlock
into a hung CI run; these helpers turn it into a failure naming what did not happen in time.
"""

import subprocess
import threading
import time
from collections.abc import Callable, Sequence

import pytest

BARRIER_SECONDS = 60
"""How long a thread waits for the others at a start line (they only have to be started)."""
THREADS_SECONDS = 180
"""How long all the threads of one test may run together."""
SUBPROCESS_SECONDS = 120
"""How long one command of a test may run."""


def barrier(parties: int, timeout: float = BARRIER_SECONDS) -> threading.Barrier:
    """A barrier whose waits time out (raising ``threading.BrokenBarrierError`` in every waiting thread)."""
    return threading.Barrier(parties, timeout=timeout)


def run_threads(
    targets: Sequence[Callable[[], object]],
    *,
    what: str,
    timeout: float = THREADS_SECONDS,
    barriers: Sequence[threading.Barrier] = (),
) -> list[BaseException]:
    """Runs each target in its own daemon thread; returns the exceptions they raised.

    One deadline bounds all the joins together. A failing thread aborts the ``barriers`` the threads
    meet at, so the others stop waiting for it at once instead of running out their own timeouts.
    Threads still running at the deadline fail the test.
    """
    errors: list[BaseException] = []

    def run(target: Callable[[], object]) -> None:
        try:
            target()
        except BaseException as exc:  # reported to the test below
            errors.append(exc)
            for line in barriers:
                line.abort()

    threads = [threading.Thread(target=run, args=(t,), name=f"{what}-{n}", daemon=True) for n, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    join_all(threads, what=what, timeout=timeout)
    return errors


def join_all(threads: Sequence[threading.Thread], *, what: str, timeout: float = THREADS_SECONDS) -> None:
    """Joins the threads within one overall deadline; fails the test naming the ones still running."""
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    hung = [thread.name for thread in threads if thread.is_alive()]
    if hung:
        pytest.fail(f"{what}: {len(hung)} thread(s) still running after {timeout:g} s (deadlock?): {hung}")


def wait_event(event: threading.Event, *, what: str, timeout: float) -> None:
    """Waits for the event; fails the test if it is not set in time."""
    if not event.wait(timeout):
        pytest.fail(f"{what}: not signalled within {timeout:g} s")


def run(command: Sequence[str], *, timeout: float = SUBPROCESS_SECONDS, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` with a timeout that fails the test, naming the command (the process is killed)."""
    try:
        return subprocess.run(command, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"command did not finish within {timeout:g} s: {' '.join(map(str, command))}\n{exc.output or ''}")


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    """Terminates a process the test started, killing it if it does not exit in time."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


def wait_until(condition: Callable[[], object], *, what: str, timeout: float, every: float = 0.05) -> None:
    """Polls ``condition`` until it is true; fails the test, naming ``what``, if it is not true in time."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not true within {timeout:g} s")
        time.sleep(every)
