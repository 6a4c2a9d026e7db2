"""Database triggers that keep history append-only on SQLite and PostgreSQL, whatever writes the rows.

Python-level checks can be bypassed by raw SQL, a shell or a bad migration; these cannot (short of
dropping them, which the least-privilege runtime role of docs/deployment.md may not do). What they allow:

- a revision is inserted only as its artifact's next one (head + 1), and never changes or disappears;
- an artifact's head moves forward by one, and only onto a revision that exists; its identity (scope,
  family, id) never changes, and a new artifact starts without revisions;
- a scope's public id never changes (its title may);
- an entry version is inserted only into its artifact's head revision, for an entry without a live
  version, and never changes except being retired once, by the revision that retires it (the head);
- on SQLite, ``INSERT OR REPLACE`` / ``REPLACE INTO`` over an existing row is refused before its
  implicit delete (which fires no delete trigger).

The write services follow exactly that order: lock the artifact, insert revision head + 1, move the
head, retire the replaced entry versions, insert the new ones.

Migrations install a frozen copy of ``STATEMENTS`` (0004, the latest): a change here needs a new migration that
installs it (``tests/api/test_trigger_migrations.py`` fails until there is one).
"""

from artifacts.triggers import triggers_run

SCOPE_TABLE = "artifacts_scope"
ARTIFACT_TABLE = "artifacts_artifact"
REVISION_TABLE = "artifacts_artifactrevision"
ENTRY_VERSION_TABLE = "artifacts_memoryentryversion"

ENTRY_FROZEN_COLUMNS = (
    "id",
    "artifact_id",
    "entry_id",
    "version_id",
    "body",
    "content_sha256",
    "born_in_revision",
    "created_at",
)
"""Columns of an entry version that may never change, even while retiring it."""

ARTIFACT_FROZEN_COLUMNS = ("id", "scope_id", "family", "artifact_id", "created_at")
SCOPE_FROZEN_COLUMNS = ("id", "scope_id")

_HEAD = f"(SELECT head_revision FROM {ARTIFACT_TABLE} WHERE id = NEW.artifact_id)"


def _sqlite_changed(columns: tuple[str, ...]) -> str:
    return " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in columns)


def _pg_changed(columns: tuple[str, ...]) -> str:
    return " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in columns)


def _sqlite_refuse(name: str, event: str, table: str, message: str, when: str | None = None) -> str:
    condition = f" WHEN {when}" if when else ""
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {event} ON {table}{condition} "
        f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
    )


SQLITE_TRIGGERS = {
    "powercontext_revision_no_update": _sqlite_refuse(
        "powercontext_revision_no_update", "UPDATE", REVISION_TABLE, "artifact revisions are immutable"
    ),
    "powercontext_revision_no_delete": _sqlite_refuse(
        "powercontext_revision_no_delete", "DELETE", REVISION_TABLE, "artifact revisions are immutable"
    ),
    "powercontext_revision_append_only": _sqlite_refuse(
        "powercontext_revision_append_only",
        "INSERT",
        REVISION_TABLE,
        "a revision is inserted only as the next revision of its artifact",
        f"NEW.revision IS NOT {_HEAD} + 1 OR EXISTS (SELECT 1 FROM {REVISION_TABLE} WHERE id = NEW.id)",
    ),
    "powercontext_entry_version_no_update": _sqlite_refuse(
        "powercontext_entry_version_no_update",
        "UPDATE",
        ENTRY_VERSION_TABLE,
        "memory entry versions are immutable",
        f"NOT (OLD.retired_in_revision IS NULL AND NEW.retired_in_revision IS {_HEAD} "
        f"AND NOT ({_sqlite_changed(ENTRY_FROZEN_COLUMNS)}))",
    ),
    "powercontext_entry_version_no_delete": _sqlite_refuse(
        "powercontext_entry_version_no_delete", "DELETE", ENTRY_VERSION_TABLE, "memory entry versions are immutable"
    ),
    "powercontext_entry_version_append_only": _sqlite_refuse(
        "powercontext_entry_version_append_only",
        "INSERT",
        ENTRY_VERSION_TABLE,
        "an entry version is inserted only live, into the head revision, as a new version of an entry",
        f"NEW.retired_in_revision IS NOT NULL OR NEW.born_in_revision IS NOT {_HEAD} "
        f"OR EXISTS (SELECT 1 FROM {ENTRY_VERSION_TABLE} WHERE id = NEW.id OR (artifact_id = NEW.artifact_id "
        "AND (version_id = NEW.version_id OR (entry_id = NEW.entry_id AND retired_in_revision IS NULL))))",
    ),
    "powercontext_artifact_guard": _sqlite_refuse(
        "powercontext_artifact_guard",
        "UPDATE",
        ARTIFACT_TABLE,
        "an artifact keeps its identity; its head moves forward by one onto an existing revision",
        f"{_sqlite_changed(ARTIFACT_FROZEN_COLUMNS)} OR (NEW.head_revision IS NOT OLD.head_revision "
        "AND NOT (NEW.head_revision = OLD.head_revision + 1 "
        f"AND EXISTS (SELECT 1 FROM {REVISION_TABLE} WHERE artifact_id = OLD.id AND revision = NEW.head_revision)))",
    ),
    "powercontext_artifact_insert": _sqlite_refuse(
        "powercontext_artifact_insert",
        "INSERT",
        ARTIFACT_TABLE,
        "a new artifact starts without revisions and never replaces another",
        f"NEW.head_revision IS NOT 0 OR EXISTS (SELECT 1 FROM {ARTIFACT_TABLE} WHERE id = NEW.id OR "
        "(scope_id = NEW.scope_id AND family = NEW.family AND artifact_id = NEW.artifact_id))",
    ),
    "powercontext_scope_guard": _sqlite_refuse(
        "powercontext_scope_guard",
        "UPDATE",
        SCOPE_TABLE,
        "a scope id never changes",
        _sqlite_changed(SCOPE_FROZEN_COLUMNS),
    ),
    "powercontext_scope_insert": _sqlite_refuse(
        "powercontext_scope_insert",
        "INSERT",
        SCOPE_TABLE,
        "a new scope never replaces another",
        f"EXISTS (SELECT 1 FROM {SCOPE_TABLE} WHERE id = NEW.id OR scope_id = NEW.scope_id)",
    ),
}
SQLITE_INSTALL = list(SQLITE_TRIGGERS.values())
SQLITE_UNINSTALL = [f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS]


def _pg_function(name: str, body: str) -> str:
    return f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n{body}\nEND $$"


def _pg_raise(message: str) -> str:
    return f"RAISE EXCEPTION '{message}' USING ERRCODE = 'integrity_constraint_violation';"


POSTGRESQL_FUNCTIONS = [
    _pg_function(
        "powercontext_refuse_change",
        "RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';",
    ),
    _pg_function(
        "powercontext_revision_guard",
        f"IF NEW.revision IS DISTINCT FROM {_HEAD} + 1 THEN "
        f"{_pg_raise('a revision is inserted only as the next revision of its artifact')} END IF;\nRETURN NEW;",
    ),
    _pg_function(
        "powercontext_entry_version_guard",
        "IF TG_OP = 'INSERT' THEN\n"
        f"  IF NEW.retired_in_revision IS NULL AND NEW.born_in_revision IS NOT DISTINCT FROM {_HEAD} THEN "
        "RETURN NEW; END IF;\n"
        "  " + _pg_raise("an entry version is inserted only live, into the head revision") + "\nEND IF;\n"
        f"IF TG_OP = 'UPDATE' AND OLD.retired_in_revision IS NULL AND NEW.retired_in_revision = {_HEAD} "
        f"AND NOT ({_pg_changed(ENTRY_FROZEN_COLUMNS)}) THEN RETURN NEW; END IF;\n"
        + _pg_raise("memory entry versions are immutable"),
    ),
    _pg_function(
        "powercontext_artifact_guard",
        "IF TG_OP = 'INSERT' THEN\n"
        "  IF NEW.head_revision = 0 THEN RETURN NEW; END IF;\n"
        "  " + _pg_raise("a new artifact starts without revisions") + "\nEND IF;\n"
        f"IF {_pg_changed(ARTIFACT_FROZEN_COLUMNS)} THEN {_pg_raise('an artifact keeps its identity')} END IF;\n"
        "IF NEW.head_revision IS DISTINCT FROM OLD.head_revision AND NOT (NEW.head_revision = OLD.head_revision + 1 "
        f"AND EXISTS (SELECT 1 FROM {REVISION_TABLE} WHERE artifact_id = OLD.id AND revision = NEW.head_revision)) "
        f"THEN {_pg_raise('an artifact head moves forward by one onto an existing revision')} END IF;\n"
        "RETURN NEW;",
    ),
    _pg_function(
        "powercontext_scope_guard",
        f"IF {_pg_changed(SCOPE_FROZEN_COLUMNS)} THEN {_pg_raise('a scope id never changes')} END IF;\nRETURN NEW;",
    ),
]

POSTGRESQL_TRIGGERS = {
    "powercontext_revision_immutable": (REVISION_TABLE, "BEFORE UPDATE OR DELETE", "ROW", "powercontext_refuse_change"),
    "powercontext_revision_append_only": (REVISION_TABLE, "BEFORE INSERT", "ROW", "powercontext_revision_guard"),
    "powercontext_revision_no_truncate": (REVISION_TABLE, "BEFORE TRUNCATE", "STATEMENT", "powercontext_refuse_change"),
    "powercontext_entry_version_immutable": (
        ENTRY_VERSION_TABLE,
        "BEFORE INSERT OR UPDATE OR DELETE",
        "ROW",
        "powercontext_entry_version_guard",
    ),
    "powercontext_entry_version_no_truncate": (
        ENTRY_VERSION_TABLE,
        "BEFORE TRUNCATE",
        "STATEMENT",
        "powercontext_refuse_change",
    ),
    "powercontext_artifact_guard": (ARTIFACT_TABLE, "BEFORE INSERT OR UPDATE", "ROW", "powercontext_artifact_guard"),
    "powercontext_scope_guard": (SCOPE_TABLE, "BEFORE UPDATE", "ROW", "powercontext_scope_guard"),
}
POSTGRESQL_INSTALL = POSTGRESQL_FUNCTIONS + [
    f"CREATE OR REPLACE TRIGGER {name} {event} ON {table} FOR EACH {level} EXECUTE FUNCTION {function}()"
    for name, (table, event, level, function) in POSTGRESQL_TRIGGERS.items()
]
POSTGRESQL_UNINSTALL = [
    f"DROP TRIGGER IF EXISTS {name} ON {table}" for name, (table, *_) in POSTGRESQL_TRIGGERS.items()
]

STATEMENTS = {
    "sqlite": (SQLITE_INSTALL, SQLITE_UNINSTALL),
    "postgresql": (POSTGRESQL_INSTALL, POSTGRESQL_UNINSTALL),
}


def install_triggers(connection) -> None:
    """Create the immutability triggers on this connection's database (idempotent)."""
    triggers_run(connection, STATEMENTS, install=True)


def uninstall_triggers(connection) -> None:
    """Drop the triggers: only for ``flush`` and benchmark bulk loads (migrations run their own frozen copy)."""
    triggers_run(connection, STATEMENTS, install=False)
