"""The prepare log's writes: one INSERT per prepare or per batch (never failing a prepare), and the retention purge.

``record`` is compact JSON: ``{"scopes": [scope ids read, in order], "options": {"sections": [[family, limit], …],
"show": [...]} (the legacy envelope: null, or only ``"recall"`` under hybrid recall; ``assembly.replay``),
"recalled": {family: [[candidate, …] per scope]}}``,
each candidate ``[scope index, artifact id, revision]`` plus ``entry id, entry version`` for memory.
Citations only: bodies are immutable, so the content is re-rendered from the revisions they name.

The query is kept as text up to ``POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES`` (0: never), and always as its
SHA-256 and size. Replay needs the query for one thing, the Match line of a topic memory; a row without the
query's text records instead which body each topic memory showed (``"topic_shown": [[digest, …] per scope]``,
``projection_digest``), so it replays exactly too. ``stored_bytes`` estimates the row's size for the total cap
the purge enforces (oldest rows first).
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Field
from django.utils import timezone

from artifacts import selectors
from artifacts.conf import prepare_log_settings
from artifacts.models import Family, PrepareLog, Scope
from artifacts.recall.projection import projection_digest
from artifacts.selectors.prepare_logs import RECORD_TOPIC_SHOWN
from artifacts.services.common import rows_purge
from infrastructure import metrics
from vocabulary.citation import Candidate, Citation
from vocabulary.escaping import encodable
from vocabulary.limits import MAX_IDENTIFIER_CHARACTERS
from vocabulary.text import sha256_text

logger = logging.getLogger("powercontext.prepare_log")

WARN_INTERVAL_SECONDS = 60.0
# What a row takes besides its texts (fixed columns, row header, index entries), for ``stored_bytes``.
ROW_OVERHEAD_BYTES = 160
WRITE_FAILURES: dict[str, float] = {"count": 0}
"""Prepare-log writes that failed since the process started (also counted by ``infrastructure.metrics``)."""


@dataclass(frozen=True)
class PrepareLogWrite:
    """What one prepare request left to record; ``recalled`` and ``options`` only for a 200."""

    http_status: int
    duration_ms: float | None = None
    api_key_id: int | None = None
    scope_sent: str = ""
    error_code: str = ""
    mode: str = ""
    query: str = ""
    max_bytes: int | None = None
    options: dict | None = None
    scopes: Sequence[str] = ()
    recalled: Mapping[str, Sequence[Sequence[Candidate]]] | None = None
    result_status: str = ""
    content_bytes: int = 0
    content_sha256: str = ""


def _candidate_item(citation: Citation, scope_index: dict[str, int]) -> list:
    item: list[int | str | None] = [
        scope_index.get(citation.scope_id, citation.scope_id),
        citation.artifact_id,
        citation.revision,
    ]
    if citation.has_entry:
        item += [citation.entry_id, citation.entry_version]
    return item


def prepare_record_encode(
    *,
    scopes: Sequence[str],
    options: dict | None,
    recalled: Mapping[str, Sequence[Sequence[Candidate]]],
    query_kept: bool = True,
) -> str:
    """The ``record`` column: scopes read, effective options and candidate citations, compact JSON.

    Without the query's text (``query_kept`` False) it also names the body each topic memory showed.
    """
    scope_index = {scope_id: index for index, scope_id in enumerate(scopes)}
    encoded = {
        family: [[_candidate_item(c.citation, scope_index) for c in hits] for hits in per_scope]
        for family, per_scope in recalled.items()
    }
    record: dict[str, object] = {"scopes": list(scopes), "options": options, "recalled": encoded}
    if not query_kept and Family.TOPIC_MEMORY in recalled:
        record[RECORD_TOPIC_SHOWN] = [
            [projection_digest(c.body or "") for c in hits] for hits in recalled[Family.TOPIC_MEMORY]
        ]
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _row(entry: PrepareLogWrite) -> PrepareLog:
    scope_sent = encodable(entry.scope_sent[: MAX_IDENTIFIER_CHARACTERS + 1]).replace("\x00", "\\u0000")
    query_bytes = _utf8_bytes(entry.query)
    query_kept = query_bytes <= prepare_log_settings().query_max_bytes
    query = entry.query if query_kept else ""
    record = ""
    if entry.recalled is not None:
        record = prepare_record_encode(
            scopes=entry.scopes, options=entry.options, recalled=entry.recalled, query_kept=query_kept
        )
    return PrepareLog(
        created_at=timezone.now(),
        api_key_id=entry.api_key_id,
        scope_sent=scope_sent,
        http_status=entry.http_status,
        error_code=entry.error_code,
        mode=entry.mode,
        query=query,
        query_sha256=sha256_text(entry.query) if entry.mode else "",
        query_bytes=query_bytes,
        max_bytes=entry.max_bytes,
        result_status=entry.result_status,
        content_bytes=entry.content_bytes,
        content_sha256=entry.content_sha256,
        duration_ms=entry.duration_ms,
        record=record,
        stored_bytes=_utf8_bytes(query) + _utf8_bytes(record) + _utf8_bytes(scope_sent) + ROW_OVERHEAD_BYTES,
    )


_INSERTED_FIELDS = tuple(field for field in PrepareLog._meta.concrete_fields if not field.primary_key)


def _column(field: Field) -> str:
    """A concrete field's column (only a field that is not concrete has none)."""
    if field.column is None:
        raise ValueError(f"{field} has no column")
    return field.column


@functools.cache
def _insert_sql(vendor: str) -> str:
    """The one INSERT, built once per engine: the ORM spent more time compiling it than the database running it.

    The scope is looked up inside the INSERT by the id as sent (NULL when no scope has it).
    """
    quote = connection.ops.quote_name
    scope_lookup = (
        f"(SELECT {quote(_column(Scope._meta.pk))} FROM {quote(Scope._meta.db_table)} "
        f"WHERE {quote(_column(Scope._meta.get_field('scope_id')))} = %s)"
    )
    columns = ", ".join(quote(_column(field)) for field in _INSERTED_FIELDS)
    values = ", ".join(scope_lookup if field.name == "scope" else "%s" for field in _INSERTED_FIELDS)
    insert = f"INSERT INTO {quote(PrepareLog._meta.db_table)} ({columns})"
    if vendor == "postgresql":
        # A log row may be lost in a crash (the last few hundred milliseconds); the prepare must not wait for the
        # WAL flush. set_config(..., true) lasts until the end of the transaction, whose commit reads it: run alone,
        # the statement is its own transaction, so the commit is asynchronous in one round trip (BEGIN, SET LOCAL,
        # INSERT, COMMIT were four).
        return f"{insert} SELECT {values} FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous"
    return f"{insert} VALUES ({values})"


def _params(row: PrepareLog) -> list:
    return [
        (row.scope_sent or None)
        if field.name == "scope"
        else field.get_db_prep_save(getattr(row, field.attname), connection)
        for field in _INSERTED_FIELDS
    ]


def _insert(row: PrepareLog) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(connection.vendor), _params(row))


def _insert_many(rows: Sequence[PrepareLog]) -> None:
    # The same statement per row (executemany: one round trip per batch with psycopg's pipeline, one prepared
    # statement on SQLite); on PostgreSQL each sets synchronous_commit off for the caller's transaction.
    with connection.cursor() as cursor:
        cursor.executemany(_insert_sql(connection.vendor), [_params(row) for row in rows])


def prepare_log_write(*, entry: PrepareLogWrite) -> bool:
    """Record one prepare in one INSERT. Never raises: a failure is counted, logged in one line, and False.

    The INSERT autocommits, one statement (inside a caller's transaction, in a savepoint, so that a failed write
    cannot break it). On PostgreSQL it commits asynchronously (``synchronous_commit`` off for its own
    transaction, or for the caller's): the prepare never waits for a WAL flush, and a crash loses at most the
    last moments of log.
    """
    try:
        row = _row(entry)
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            _insert(row)
    except Exception as exc:  # noqa: BLE001 - the log must never fail a prepare
        prepare_log_failures_count(1, exc)
        return False
    return True


def prepare_log_write_many(*, entries: Sequence[tuple[datetime.datetime, PrepareLogWrite]]) -> int:
    """Record many prepares, each stamped with the time it answered, in one transaction (the background writer).

    Never raises: when the batch fails, its rows are written one by one, so that one bad row loses only itself;
    every row that could not be written is counted and logged as ``prepare_log_write`` does. Returns how many rows
    were written.
    """
    try:
        rows = []
        for created_at, entry in entries:
            row = _row(entry)
            row.created_at = created_at
            rows.append(row)
        with transaction.atomic():
            _insert_many(rows)
    except Exception:  # noqa: BLE001 - written again row by row below
        written = 0
        for created_at, entry in entries:
            try:
                row = _row(entry)
                row.created_at = created_at
                with transaction.atomic():
                    _insert_many([row])
            except Exception as exc:  # noqa: BLE001 - the log must never fail a prepare
                prepare_log_failures_count(1, exc)
            else:
                written += 1
        return written
    return len(rows)


def prepare_log_failures_count(count: int, exc: BaseException) -> None:
    """Count ``count`` rows that could not be written; one warning line at most once a minute."""
    WRITE_FAILURES["count"] += count
    metrics.PREPARE_LOG_WRITE_FAILURES.inc(count)
    # One line, at most once a minute: an outage already logs its own line per failed request.
    now = time.monotonic()
    if now - WRITE_FAILURES.get("warned_at", -WARN_INTERVAL_SECONDS) >= WARN_INTERVAL_SECONDS:
        WRITE_FAILURES["warned_at"] = now
        first_line = (str(exc).splitlines() or [""])[0]
        logger.warning(
            "prepare log write failed: %s: %s (%d failures so far)",
            type(exc).__name__,
            first_line,
            WRITE_FAILURES["count"],
        )


def _retention_cutoff() -> datetime.datetime:
    return timezone.now() - datetime.timedelta(days=prepare_log_settings().retention_days)


def prepare_log_purge(*, batch: int = 1000, progress: Callable[[int], None] = lambda deleted: None) -> int:
    """Delete log entries older than the retention, then the oldest beyond the size cap, in batches.

    ``progress`` gets the running total. The cap (``POWERCONTEXT_PREPARE_LOG_MAX_MB``, 0: none) counts the rows'
    ``stored_bytes`` from the newest back: every row from the first that would exceed it on is deleted.
    """
    deleted = rows_purge(
        queryset=PrepareLog.objects.filter(created_at__lt=_retention_cutoff()), batch=batch, progress=progress
    )
    cap = prepare_log_settings().max_mb * 1024 * 1024
    newest_over = selectors.prepare_log_newest_over_cap(cap_bytes=cap) if cap else None
    if newest_over is not None:
        deleted += rows_purge(
            queryset=PrepareLog.objects.filter(pk__lte=newest_over),
            batch=batch,
            progress=lambda total: progress(deleted + total),
        )
    return deleted
