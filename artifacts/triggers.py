"""Running a set of per-engine trigger statements (``TriggerStatements``: the history guards' in ``immutability``, the
corpus generation's in ``recall.generation``): ``flush`` and benchmark bulk loads drop and reinstall the history
guards here. Migrations run their own frozen copy of the statements, and of this loop, so what they do never changes.

PostgreSQL trigger functions run with a fixed ``search_path`` (``pg_catalog``, then the schema the tables live in,
``pg_temp`` explicitly last) and name every table with that schema: a temporary table or function the connected role
creates can never stand in for one of ours (``pg_temp`` is otherwise searched first). The statements hold the schema
as the placeholder ``SCHEMA``, filled with ``current_schema()`` when they run, so the same literal text (frozen in
the migrations) installs correctly in whatever schema the migrations run in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TriggerStatements = Mapping[str, tuple[Sequence[str], Sequence[str]]]
"""Per database vendor, (statements that install, statements that drop)."""

SCHEMA = "{schema}"
"""PostgreSQL: where a statement names the tables' schema; replaced by ``quote_ident(current_schema())``."""


def pg_table(table: str) -> str:
    """A table named with the placeholder schema (PostgreSQL trigger functions only)."""
    return f"{SCHEMA}.{table}"


def pg_trigger_function(name: str, body: str) -> str:
    """``CREATE OR REPLACE FUNCTION`` of a PL/pgSQL trigger function whose lookups no session can redirect."""
    return (
        f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
        f"SET search_path = pg_catalog, {SCHEMA}, pg_temp AS $$\nBEGIN\n{body}\nEND $$"
    )


def current_schema(connection) -> str:
    """The schema unqualified names resolve to on this PostgreSQL connection, quoted as an identifier."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT quote_ident(current_schema())")
        return cursor.fetchone()[0]


def schema_filled(statement: str, schema: str) -> str:
    """The statement with ``SCHEMA`` replaced by ``schema`` (a quoted identifier)."""
    return statement.replace(SCHEMA, schema)


def triggers_run(connection, statements: TriggerStatements, *, install: bool) -> None:
    """Install (or drop) one set of triggers on this connection's database; both directions are idempotent."""
    if connection.vendor not in statements:
        raise NotImplementedError(f"triggers are not written for {connection.vendor}")
    schema = current_schema(connection) if connection.vendor == "postgresql" else SCHEMA
    with connection.cursor() as cursor:
        for statement in statements[connection.vendor][0 if install else 1]:
            cursor.execute(schema_filled(statement, schema))
