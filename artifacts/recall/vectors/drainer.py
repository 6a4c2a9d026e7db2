"""Deferred vectors (issue 52, ``POWERCONTEXT_EMBEDDINGS["write"] = "deferred"``): a write stores no vector and
answers at once (its documents are found by their words), and a background thread of the process embeds them
moments later with ``recall_vectors_embed_pending``, the service ``manage.py recall_embed`` runs.

One daemon thread per process, started when a server process loads the application (``powercontext/wsgi.py``:
gunicorn imports it in each worker after the fork; runserver in the process that serves) and by a process's first
deferred write (a management command's, or a worker forked from a process that had one: a thread does not survive
a fork), never at import. Started at load, its first pass embeds what was written while no server ran (a load by
a command, a restart). Each deferred write wakes it once
its transaction commits; it also looks every ``POLL_SECONDS`` for other processes' writes, whose wake it did not
hear. A pass embeds the backlog ``BATCH_SIZE`` documents at a time, holding an exclusive, non-blocking lock on one
file per database (``drain_lock_path``): at most one passage embedding at a time on the machine, so that the
drainers of every worker never take more than one core from the requests (the experiment of issue 52 recorded in
docs/benchmarks.md). A process that finds the lock taken leaves the work to its holder and looks again later.

While writes keep coming the drainer yields most of its core to them: every deferred write touches the lock file
(its modification time is the machine's "a write just committed"), and after a batch embedded less than
``BUSY_SECONDS`` after such a touch the drainer sleeps ``THROTTLE`` times the batch's time (25 % of one core).
Once the writes stop it embeds at full speed: the backlog of a burst is embedded after the burst rather than
taken from the burst's throughput (issue 52's target (c)).

A pass looks only at documents newer than what the process's last pass saw, less ``RECENT_SLACK`` ids (a
transaction that took its ids before another's and committed after it): finding the documents without a vector
costs an anti-join over every document it looks at, too much every few seconds at a million. Every
``FULL_PASS_SECONDS`` (and first) a pass looks at all of them: a document missed by the incremental passes (an
inline write's miss, a very late commit) waits at most that long.

Two drainers on one document (two machines, or ``recall_embed`` beside one) are safe: storing locks the documents
and inserts with the unique constraint's conflicts ignored, so the second vector is dropped, never a duplicate nor
an error. A failed pass (the provider down, the database away) is logged and counted
(``powercontext_recall_vectors_drain_failures``); the thread waits ``RETRY_SECONDS`` and tries again. The backlog
is ``powercontext_recall_vector_lag`` (``vectors.lag``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from artifacts.recall.conf import embeddings_settings, recall_settings
from artifacts.recall.vectors.providers import EmbeddingProvider, configured_provider
from artifacts.recall.vectors.selectors import recall_document_newest
from artifacts.recall.vectors.services import EmbedProgress, recall_vectors_embed_pending
from infrastructure import metrics
from vocabulary.recall_modes import EMBEDDINGS_WRITE_DEFERRED, RECALL_MODE_HYBRID

logger = logging.getLogger(__name__)

POLL_SECONDS = 2.0
"""How often an idle drainer looks for other processes' deferred writes."""
RETRY_SECONDS = 5.0
"""How long a drainer waits after a failed pass."""
BATCH_SIZE = 8
"""Documents embedded and stored per transaction: short transactions, and a lock file released soon after a pass."""
BUSY_SECONDS = 1.0
"""A write committed this recently (the lock file's modification time) means writes are still coming."""
THROTTLE = 3.0
"""While writes are coming, the drainer sleeps this many times each batch's time after it."""
RECENT_SLACK = 1_000
"""Ids below the newest one a pass saw that the next pass looks at again."""
FULL_PASS_SECONDS = 300.0
"""How often a drainer's pass looks at every document."""

_state: dict[str, Any] = {"pid": None, "thread": None, "wake": threading.Event(), "seen": 0, "full_at": None}
_start_lock = threading.Lock()


def deferred_provider() -> EmbeddingProvider | None:
    """The provider whose vectors writes leave to the drainer: the configured one while recall is hybrid and
    ``POWERCONTEXT_EMBEDDINGS["write"]`` is ``deferred``, else None (nothing to drain)."""
    if recall_settings().mode != RECALL_MODE_HYBRID or embeddings_settings().write != EMBEDDINGS_WRITE_DEFERRED:
        return None
    return configured_provider()


def drainer_start() -> bool:
    """Start this process's drainer when writes are deferred and it has none yet (a server loading the
    application); returns whether one runs. Its first pass looks at every document."""
    if deferred_provider() is None:
        return False
    _ensure_started()
    return True


def drainer_wake() -> None:
    """Have this process's drainer look for documents without a vector now, starting it if this process has none
    yet (its first deferred write, or the first after a fork)."""
    _ensure_started()
    with contextlib.suppress(OSError):  # no lock file yet: no drainer has run, none to slow down
        os.utime(drain_lock_path())
    _state["wake"].set()


def drainer_running() -> bool:
    """Whether this process's drainer thread is alive (tests, health)."""
    thread = _state["thread"]
    return _state["pid"] == os.getpid() and thread is not None and thread.is_alive()


def _ensure_started() -> None:
    if _state["pid"] != os.getpid():
        with _start_lock:
            if _state["pid"] != os.getpid():
                _start()


def _start() -> None:
    # A forked worker inherits the parent's state but no thread: a new event too, whose lock no parent thread holds.
    _state["wake"] = threading.Event()
    _state["seen"], _state["full_at"] = 0, None
    _state["pid"] = os.getpid()
    _state["thread"] = threading.Thread(target=_run, args=(_state["wake"],), name="recall-vectors-drainer", daemon=True)
    _state["thread"].start()


def _run(wake: threading.Event) -> None:
    while True:
        wake.wait(POLL_SECONDS)
        wake.clear()  # a write committed from here on wakes the next pass; this one may already see it
        try:
            _pass()
        except Exception:  # never ends the thread: logged, counted, tried again
            metrics.RECALL_VECTORS_DRAIN_FAILURES.inc()
            logger.exception("recall vectors drainer: a pass failed; trying again in %g s", RETRY_SECONDS)
            time.sleep(RETRY_SECONDS)
        finally:
            # Given back between passes (PgBouncer, max_connections, a connection broken by the failure).
            connection.close()


def drain_lock_path() -> Path:
    """The lock file the drainers of one database share on this machine: in the search index's directory when it
    has one, else the data directory; named after the database, so that two deployments do not share it."""
    database = connection.settings_dict
    identity = "|".join(str(database.get(key) or "") for key in ("ENGINE", "NAME", "HOST", "PORT"))
    directory = Path(recall_settings().search_index_dir or settings.DATA_DIR)
    return directory / f"recall-drainer-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.lock"


@contextlib.contextmanager
def drain_lock() -> Iterator[bool]:
    """Take the machine's drain lock without waiting: yields whether this process holds it (released on exit)."""
    path = drain_lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _pass() -> None:
    """The thread's pass: from what the last one saw, or over every document every ``FULL_PASS_SECONDS``."""
    if deferred_provider() is None:  # writes not deferred (any more): no query at all
        return
    now, newest = time.monotonic(), recall_document_newest()
    full = _state["full_at"] is None or now - _state["full_at"] >= FULL_PASS_SECONDS or newest < _state["seen"]
    after = 0 if full else max(0, _state["seen"] - RECENT_SLACK)
    if recall_vectors_drain(after=after) is not None:  # every document up to ``newest`` looked at
        _state["seen"] = newest
        if full:
            _state["full_at"] = now


def recall_vectors_drain(*, exclusive: bool = True, after: int = 0) -> int | None:
    """Embed and store every live document (with an id above ``after``) still without a vector by the deferred
    provider, ``BATCH_SIZE`` at a time; returns how many were stored. With ``exclusive``, only while holding the
    machine's drain lock: None when another process holds it (the holder embeds them). 0 when writes are not
    deferred."""
    provider = deferred_provider()
    if provider is None:
        return 0
    with drain_lock() if exclusive else contextlib.nullcontext(True) as held:
        if not held:
            return None
        stored = recall_vectors_embed_pending(
            provider=provider, batch_size=BATCH_SIZE, after=after, progress=_yielding_to_writes(drain_lock_path())
        ).embedded
    if stored:
        metrics.RECALL_VECTORS_DRAINED.inc(stored)
    return stored


def _yielding_to_writes(lock_path: Path) -> Callable[[EmbedProgress], None]:
    """A ``progress`` callback that, after a batch, sleeps ``THROTTLE`` times the batch's time while writes are
    still coming (the lock file touched within ``BUSY_SECONDS``)."""
    last = {"seconds": 0.0}

    def progress(state: EmbedProgress) -> None:
        batch_seconds, last["seconds"] = state.seconds - last["seconds"], state.seconds
        try:
            busy = time.time() - lock_path.stat().st_mtime < BUSY_SECONDS
        except OSError:
            busy = False
        if busy:
            time.sleep(THROTTLE * batch_seconds)
            last["seconds"] += THROTTLE * batch_seconds  # the pass's clock counts the sleep too

    return progress
