"""The triggers a migrated database has are the ones the code defines, and the migrations do not depend on the code.

Each trigger migration freezes its SQL statements (per engine, ``INSTALL`` and ``UNINSTALL``, with ``FROZEN_FROM``
naming the module they were generated from; or, for a migration freezing several modules, ``FROZEN_FROM`` a tuple and
the statements keyed by module first), so that changing artifacts/immutability.py or
artifacts/recall/generation.py never silently changes what an old migration does. The code's statements are still
what ``flush`` reinstalls and what these tests read, so a change to them must come with a new migration that
installs the changed triggers: the first tests compare, for both engines without either database, the code's
statements with the latest migration that froze each module's. The last ones read the triggers and their functions
(PostgreSQL: with each function's fixed ``search_path``, the tables' schema filled in, and whether each is deferred to
the commit; SQLite: with the table the guards keep) back from the test database (built by the migrations;
pytest-django runs these ``db`` tests before any transactional test's flush) on the current engine (CI runs SQLite
and PostgreSQL).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from artifacts import immutability
from artifacts.recall import generation
from artifacts.triggers import current_schema, schema_filled

APP = "artifacts"
VENDORS = ("sqlite", "postgresql")
TRIGGER_MODULES = {
    "artifacts.immutability": immutability.STATEMENTS,
    "artifacts.recall.generation": generation.STATEMENTS,
}
"""Every module that defines triggers, with its statements per engine: (install, uninstall)."""
MIGRATIONS = Path(immutability.__file__).resolve().parent / "migrations"


@dataclass(frozen=True)
class Freeze:
    """What one migration froze of one module: its statements per engine, as literals."""

    INSTALL: dict
    UNINSTALL: dict


def latest_freezes() -> dict[str, tuple[str, Freeze]]:
    """Per module named in ``FROZEN_FROM``, the last migration (in the app's migration order) freezing its triggers.

    ``FROZEN_FROM`` names one module (``INSTALL`` and ``UNINSTALL`` keyed by engine) or a tuple of them (keyed by
    module, then engine).
    """
    loader = MigrationLoader(None, ignore_no_migrations=True)
    (leaf,) = loader.graph.leaf_nodes(APP)
    latest = {}
    for app, name in loader.graph.forwards_plan(leaf):
        if app != APP:
            continue
        module = sys.modules[type(loader.disk_migrations[app, name]).__module__]
        frozen_from = getattr(module, "FROZEN_FROM", None)
        if isinstance(frozen_from, str):
            latest[frozen_from] = (name, Freeze(module.INSTALL, module.UNINSTALL))
        elif frozen_from is not None:
            for frozen in frozen_from:
                latest[frozen] = (name, Freeze(module.INSTALL[frozen], module.UNINSTALL[frozen]))
    return latest


LATEST = latest_freezes()


def test_every_trigger_module_has_a_migration_that_froze_its_statements():
    assert set(LATEST) == set(TRIGGER_MODULES)
    for module in TRIGGER_MODULES:
        assert set(TRIGGER_MODULES[module]) == set(VENDORS), module
        name, migration = LATEST[module]
        assert set(migration.INSTALL) == set(migration.UNINSTALL) == set(VENDORS), name


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("module", TRIGGER_MODULES)
def test_the_latest_trigger_migration_froze_the_statements_the_code_runs(module, vendor):
    name, migration = LATEST[module]
    install, uninstall = TRIGGER_MODULES[module][vendor]
    frozen = (migration.INSTALL[vendor], migration.UNINSTALL[vendor])
    assert (tuple(install), tuple(uninstall)) == frozen, (
        f"{module}.STATEMENTS[{vendor!r}] is not what migration {APP}.{name} froze: a database migrated now would "
        f"not have the triggers the code defines (and flush would install these over them). Add a new migration "
        f"that installs the changed triggers, like {name}: FROZEN_FROM = {module!r}, INSTALL and UNINSTALL pasted "
        f"as literals generated from {module}.STATEMENTS for every engine, a RunPython that drops the previous set "
        f"and installs the new one. Never edit {name} itself: databases that ran it keep what it installed."
    )


def test_no_migration_imports_the_app_s_code():
    # A migration runs the same whatever the code becomes. (A custom field class makemigrations writes an import
    # for would be the one exception to allow here.)
    imports = {}
    for path in sorted(MIGRATIONS.glob("[0-9]*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["." * node.level + (node.module or "")]
            else:
                continue
            names = [n for n in names if n.startswith(".") or n == APP or n.startswith(f"{APP}.")]
            if names:
                imports.setdefault(path.name, []).extend(names)
    assert imports == {}


# --- the database's triggers are exactly the code's ---------------------------------------------------

_SQLITE_CREATE = re.compile(r"CREATE (TRIGGER|TABLE) IF NOT EXISTS (\w+) ")
_PG_FUNCTION = re.compile(
    r"CREATE OR REPLACE FUNCTION (\w+)\(\) RETURNS trigger LANGUAGE plpgsql SET search_path = ([^$]+) AS \$\$(.*)\$\$",
    re.S,
)
_PG_TRIGGER = re.compile(
    r"CREATE (?:OR REPLACE|(CONSTRAINT)) TRIGGER (\w+) (BEFORE|AFTER|INSTEAD OF) (.+) ON (\w+) "
    r"(?:DEFERRABLE INITIALLY DEFERRED )?FOR EACH (ROW|STATEMENT) EXECUTE FUNCTION (\w+)\(\)"
)
# A constraint trigger cannot be created OR REPLACE: its install drops it first.
_PG_DROP_TRIGGER = re.compile(r"DROP TRIGGER IF EXISTS \w+ ON \w+")
# pg_trigger.tgtype bits (PostgreSQL's catalog/pg_trigger.h).
_ROW, _BEFORE, _INSTEAD = 1, 2, 64
_EVENTS = {"INSERT": 4, "DELETE": 8, "UPDATE": 16, "TRUNCATE": 32}


def code_triggers(vendor: str, schema: str = "public") -> dict[str, dict]:
    """What the code's install statements create on this engine, in the form ``database_triggers`` reads back
    (PostgreSQL: with the tables' schema ``schema``)."""
    statements = [
        schema_filled(s, schema)
        for install, _ in (TRIGGER_MODULES[m][vendor] for m in TRIGGER_MODULES)
        for s in install
    ]
    triggers, functions, tables = {}, {}, {}
    for statement in statements:
        if vendor == "sqlite":
            match = _SQLITE_CREATE.match(statement)
            assert match, f"not a trigger or table this test can read: {statement}"
            # SQLite keeps the statement's text, without IF NOT EXISTS.
            kind, name = match.groups()
            (triggers if kind == "TRIGGER" else tables)[name] = statement.replace(
                f"CREATE {kind} IF NOT EXISTS ", f"CREATE {kind} ", 1
            )
        elif match := _PG_FUNCTION.fullmatch(statement):
            # Every function runs with a fixed search path (a session's temporary tables never searched first).
            functions[match[1]] = (match[3], [f"search_path={match[2]}"])
        elif not _PG_DROP_TRIGGER.fullmatch(statement):
            match = _PG_TRIGGER.fullmatch(statement)
            assert match, f"not a function or trigger this test can read: {statement}"
            constraint, name, timing, events, table, level, function = match.groups()
            # A constraint trigger is deferred to the commit (the only kind the statements create).
            deferred = "deferred" if constraint else "immediate"
            triggers[name] = (table, timing, frozenset(events.split(" OR ")), level, function, "enabled", deferred)
    return {"triggers": triggers, "functions": functions, "tables": tables}


def database_triggers(connection) -> dict[str, dict]:
    """Every trigger in the database (not those PostgreSQL makes for constraints) and every trigger function; on
    SQLite also every table of ours that is not a model's (named ``powercontext_``)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
            triggers = dict(cursor.fetchall())
            cursor.execute(
                r"SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name LIKE 'powercontext\_%' ESCAPE '\'"
            )
            return {"triggers": triggers, "functions": {}, "tables": dict(cursor.fetchall())}
        cursor.execute(
            "SELECT t.tgname, c.relname, t.tgtype, p.proname, t.tgenabled, t.tgdeferrable, t.tginitdeferred "
            "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_proc p ON p.oid = t.tgfoid "
            "WHERE NOT t.tgisinternal"
        )
        triggers = {
            name: (
                table,
                "INSTEAD OF" if tgtype & _INSTEAD else "BEFORE" if tgtype & _BEFORE else "AFTER",
                frozenset(event for event, bit in _EVENTS.items() if tgtype & bit),
                "ROW" if tgtype & _ROW else "STATEMENT",
                function,
                "enabled" if enabled == "O" else f"tgenabled {enabled}",
                "immediate" if not deferrable else "deferred" if deferred else "deferrable, immediate",
            )
            for name, table, tgtype, function, enabled, deferrable, deferred in cursor.fetchall()
        }
        cursor.execute(
            "SELECT p.proname, l.lanname, p.prosrc, p.proconfig FROM pg_proc p JOIN pg_language l ON "
            "l.oid = p.prolang WHERE p.pronamespace = current_schema()::regnamespace AND "
            "p.prorettype = 'trigger'::regtype"
        )
        functions = {}
        for name, language, source, config in cursor.fetchall():
            assert language == "plpgsql", name
            functions[name] = (source, config)
        return {"triggers": triggers, "functions": functions, "tables": {}}


def test_the_code_defines_a_trigger_for_both_engines():
    for vendor in VENDORS:
        assert code_triggers(vendor)["triggers"]


def expected_triggers() -> dict[str, dict]:
    schema = current_schema(connection) if connection.vendor == "postgresql" else "public"
    return code_triggers(connection.vendor, schema)


def test_the_migrated_database_has_exactly_the_triggers_the_code_defines(db):
    assert database_triggers(connection) == expected_triggers()


def test_flush_puts_every_trigger_back_as_the_code_defines_it(transactional_db):
    call_command("flush", interactive=False, verbosity=0)
    assert database_triggers(connection) == expected_triggers()
