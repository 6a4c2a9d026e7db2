"""SQL plumbing of the recall statements: which engine, running a statement, and values bound as literals.

Prepare binds hundreds of values per statement (query terms, weights, ranked rows); each helper here keeps the
statement's text independent of how many, so both engines reuse its compiled form, and reads every value back
exactly (tests/api/test_recall_literals.py).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterable, Sequence

from django.db import connection


@functools.cache
def postgresql() -> bool:
    """Whether the database is PostgreSQL: the rankings' SQL differs per engine, their results never do.

    Asked a few dozen times per prepare; the engine is the process's for its lifetime, and each look through
    Django's connection proxy costs about a microsecond."""
    return connection.vendor == "postgresql"


_PG_NUMBER_KINDS = frozenset({"int", "bigint", "float8"})


def pg_array(values: Iterable, kind: str) -> str:
    """A PostgreSQL array literal of ``values`` for a ``%s::kind[]`` parameter, built here in one join.

    psycopg adapts a list element by element in Python (a prepare binds hundreds of values: 7 % of its time at
    1,000 entries). Numbers are written as Python prints them (``repr`` of a double reads back as the same
    double); every text element is double-quoted with its ``"`` and ``\\`` escaped, so any string, ``NULL``
    or ``{a,b}`` included, is one element. Only the kinds below: another would need its own spelling.
    """
    if kind == "text":
        return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"
    if kind not in _PG_NUMBER_KINDS:
        raise ValueError(f"no array literal for {kind!r}")
    return "{" + ",".join(map(repr, values)) + "}"


def one_of(column: str, values: Sequence, kind: str) -> tuple[str, list]:
    """The condition ``column`` is one of ``values`` (of PostgreSQL type ``kind``: a ``pg_array`` kind), with one
    parameter however many values there are: the statement's text does not depend on them."""
    if postgresql():
        return f"{column} = ANY(%s::{kind}[])", [pg_array(values, kind)]
    return f"{column} IN (SELECT value FROM json_each(%s))", [json.dumps(list(values), ensure_ascii=False)]


def marks(values: Sequence) -> str:
    return ", ".join(["%s"] * len(values))


def fetch(sql: str, params: Sequence) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


_INTEGER_KINDS = frozenset({"int", "bigint"})


def literal_relation(name: str, columns: Sequence[tuple[str, str]], rows: Sequence[tuple]) -> tuple[str, list]:
    """Rows of literals as a relation ``name(columns…)``, each column with its PostgreSQL type.

    A single integer column (document ids) is one JSON array parameter on both engines: exact for every 64-bit
    integer, and the statement's text is the same for any number of rows (SQLite compiles it once per connection;
    a column of several values per row cost their extraction, about 40 % of a read of 44 rows with their bodies on
    SQLite, and is no longer used). On PostgreSQL a JSON array is
    also estimated alike in a prepared statement's generic and custom plans, where an ``unnest`` of arrays is
    estimated at 10 rows generically but at its length in a custom plan: with a few rows the generic plan looked
    dearer and the statement was planned again at every prepare (about 1 ms for the read of the ranked rows).
    Other rows: PostgreSQL gets one array parameter per column; SQLite a VALUES list with values bound as they are
    (doubles stay doubles: SQLite's own text-to-double conversion may be off by one unit in the last place).
    """
    names = ", ".join(column for column, _ in columns)
    if len(columns) == 1 and columns[0][1] in _INTEGER_KINDS:
        (column, kind), values_json = columns[0], json.dumps([value for (value,) in rows], separators=(",", ":"))
        if postgresql():
            return f"(SELECT value::{kind} AS {column} FROM jsonb_array_elements_text(%s::jsonb)) AS {name}", [
                values_json
            ]
        return f"(SELECT value AS {column} FROM json_each(%s)) AS {name}", [values_json]
    if postgresql():
        arrays = ", ".join(f"%s::{kind}[]" for _, kind in columns)
        return f"unnest({arrays}) AS {name}({names})", [
            pg_array([row[i] for row in rows], kind) for i, (_, kind) in enumerate(columns)
        ]
    values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(rows))
    renamed = ", ".join(f"column{i + 1} AS {column}" for i, (column, _) in enumerate(columns))
    return f"(SELECT {renamed} FROM (VALUES {values})) AS {name}", [value for row in rows for value in row]


WRITERS_POLL_SECONDS = 0.05
"""How often ``settled_watermark`` looks again whether the writes it waits for have ended."""


class WritesOpen(Exception):
    """Writes to a table that were open when a build read its highest id stayed open longer than the build waits: it
    cannot know which ids they hold, so it does not index past its previous watermark this time."""


def settled_watermark(table: str, wait_seconds: float) -> int:
    """The highest id of ``table`` such that every row with a lower id is visible or never will be; raises
    ``WritesOpen`` when that cannot be known within ``wait_seconds``.

    PostgreSQL hands out ids when a row is inserted, not when its transaction commits: a write still open may hold a
    lower id than one already visible, and indexing up to the higher one would leave it out for good. Any such
    write holds its table lock (taken before the id is drawn) when the highest id is read, so the database's own lock
    table names them all: they are waited for, however long they take up to ``wait_seconds``; a write that starts
    afterwards draws a higher id. SQLite runs one write transaction at a time, whose ids are above every committed
    one: there is nothing to wait for.
    """
    highest = fetch(f"SELECT COALESCE(MAX(id), 0) FROM {table}", [])[0][0]
    if connection.vendor != "postgresql":
        return highest
    deadline = time.monotonic() + wait_seconds
    open_writes = _open_writes(table)
    while open_writes:
        if time.monotonic() >= deadline:
            raise WritesOpen(f"{len(open_writes)} write(s) to {table} open for over {wait_seconds:g} s")
        time.sleep(WRITERS_POLL_SECONDS)
        open_writes &= _open_writes(table)
    return highest


def _open_writes(table: str) -> set[str]:
    """The (virtual) transactions other than this session's that hold ``table``'s write lock (``pg_locks`` is
    readable by every role)."""
    return {
        row[0]
        for row in fetch(
            "SELECT virtualtransaction FROM pg_locks WHERE locktype = 'relation' "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND relation = %s::regclass AND mode = 'RowExclusiveLock' AND pid IS DISTINCT FROM pg_backend_pid()",
            [table],
        )
    }
