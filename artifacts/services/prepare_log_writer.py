"""The prepare log's background writer: rows queued by the request, inserted in batches by a thread of their own.

With ``POWERCONTEXT_PREPARE_LOG_WRITER=background`` (the default) a prepare's response closer only queues its row
(``prepare_log_enqueue``): no statement runs in the request's worker at all. One daemon thread per worker process
(started on the first row, again after a fork) wakes every ``FLUSH_SECONDS``, or as soon as ``BATCH_ROWS`` rows
wait, and inserts what is queued in one transaction (``services.prepare_log_write_many``), on a database connection
of its own (with psycopg's pool, borrowed for one batch at a time). Each row keeps the time its prepare answered.

Shutdown: a clean exit of the process (gunicorn's graceful stop or restart, ``max_requests``, the end of a
management command) runs ``prepare_log_flush`` (registered with ``atexit``), which writes every queued row before
the process ends; gunicorn's ``worker_exit`` hook may call it as well. A crash (SIGKILL, the OOM killer, a
worker timeout, a power cut) loses the rows still queued: at most ``FLUSH_SECONDS`` of prepares (or ``QUEUE_MAX``
rows while the database refuses them), on top of what PostgreSQL's asynchronous commit of the log already risks.
A failed batch is written again row by row, so one bad row costs only itself; failures are counted and logged as
for an inline write.
"""

from __future__ import annotations

import atexit
import datetime
import os
import threading
from collections import deque
from typing import Any

from django.db import connection
from django.utils import timezone

from artifacts.services import prepare_log

FLUSH_SECONDS = 0.2
BATCH_ROWS = 256
QUEUE_MAX = 50_000
"""Rows kept while the database refuses them; the oldest beyond it are dropped (and counted as failed writes)."""

_queue: deque[tuple[datetime.datetime, prepare_log.PrepareLogWrite]] = deque()
_wake = threading.Condition()
_writing = threading.Lock()  # one batch at a time: the thread's, or the exit's flush
_state: dict[str, Any] = {"pid": None, "thread": None}


def prepare_log_enqueue(*, entry: prepare_log.PrepareLogWrite) -> None:
    """Queue one prepare's row, stamped now; the writer thread inserts it within ``FLUSH_SECONDS``."""
    stamped = (timezone.now(), entry)
    with _wake:
        if _state["pid"] != os.getpid():  # the first row of this process (a forked worker inherits no thread)
            _start()
        _queue.append(stamped)
        dropped = len(_queue) - QUEUE_MAX
        for _ in range(max(0, dropped)):
            _queue.popleft()
        if len(_queue) >= BATCH_ROWS:
            _wake.notify()
    if dropped > 0:
        prepare_log.prepare_log_failures_count(dropped, RuntimeError("the prepare log's queue is full"))


def prepare_log_flush() -> int:
    """Write every queued row now, in the calling thread; returns how many were written. A batch the writer thread
    has taken is written first (taking and writing hold one lock), so an exit's flush never leaves it half done."""
    written = 0
    with _writing:
        while batch := _take():
            written += prepare_log.prepare_log_write_many(entries=batch)
    return written


def prepare_log_queued() -> int:
    """How many rows wait to be written (tests, metrics)."""
    return len(_queue)


def _start() -> None:
    _queue.clear()  # rows queued by the parent before a fork are the parent's to write
    _state["pid"] = os.getpid()
    _state["thread"] = threading.Thread(target=_run, name="prepare-log-writer", daemon=True)
    _state["thread"].start()


def _take() -> list:
    with _wake:
        batch = [_queue.popleft() for _ in range(min(len(_queue), BATCH_ROWS))]
    return batch


def _run() -> None:
    while True:
        with _wake:
            if len(_queue) < BATCH_ROWS:
                _wake.wait(FLUSH_SECONDS)
        with _writing:  # taken and written under one lock: a flush waits for this batch rather than miss it
            batch = _take()
            failed = bool(batch) and prepare_log.prepare_log_write_many(entries=batch) < len(batch)
        if batch:
            if failed or connection.settings_dict.get("OPTIONS", {}).get("pool"):
                # A failed batch: the connection may be broken, the next one opens a new one. Pooled: given back
                # to the process's pool after each batch, which a sync worker's requests share (a pool of one).
                connection.close()
        elif connection.connection is not None and not connection.in_atomic_block:
            # Idle: give the connection back (PgBouncer, max_connections) until the next row.
            connection.close()


atexit.register(prepare_log_flush)
