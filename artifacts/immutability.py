"""Database triggers that make revisions and entry versions append-only on SQLite and PostgreSQL.

Python-level checks can be bypassed by raw SQL, a shell or a bad migration; these cannot. The one
permitted change is stamping a live entry version's ``retired_in_revision`` once (NULL → number).
"""

REVISION_TABLE = "artifacts_artifactrevision"
ENTRY_VERSION_TABLE = "artifacts_memoryentryversion"

# Columns of an entry version that may never change, even while retiring it.
_ENTRY_FROZEN_COLUMNS = (
    "id",
    "artifact_id",
    "entry_id",
    "version_id",
    "body",
    "content_sha256",
    "born_in_revision",
    "created_at",
)

_SQLITE_ENTRY_UNCHANGED = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in _ENTRY_FROZEN_COLUMNS)
_PG_ENTRY_UNCHANGED = " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in _ENTRY_FROZEN_COLUMNS)

SQLITE_INSTALL = [
    f"""CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_update BEFORE UPDATE ON {REVISION_TABLE}
    BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutable'); END""",
    f"""CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_delete BEFORE DELETE ON {REVISION_TABLE}
    BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutable'); END""",
    f"""CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_update BEFORE UPDATE ON {ENTRY_VERSION_TABLE}
    WHEN NOT (OLD.retired_in_revision IS NULL AND NEW.retired_in_revision IS NOT NULL
              AND {_SQLITE_ENTRY_UNCHANGED})
    BEGIN SELECT RAISE(ABORT, 'memory entry versions are immutable'); END""",
    f"""CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_delete BEFORE DELETE ON {ENTRY_VERSION_TABLE}
    BEGIN SELECT RAISE(ABORT, 'memory entry versions are immutable'); END""",
]
SQLITE_UNINSTALL = [
    "DROP TRIGGER IF EXISTS powercontext_revision_no_update",
    "DROP TRIGGER IF EXISTS powercontext_revision_no_delete",
    "DROP TRIGGER IF EXISTS powercontext_entry_version_no_update",
    "DROP TRIGGER IF EXISTS powercontext_entry_version_no_delete",
]

POSTGRESQL_INSTALL = [
    """CREATE OR REPLACE FUNCTION powercontext_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
    END $$""",
    f"""CREATE OR REPLACE FUNCTION powercontext_entry_version_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'UPDATE' AND OLD.retired_in_revision IS NULL AND NEW.retired_in_revision IS NOT NULL
         AND {_PG_ENTRY_UNCHANGED} THEN
        RETURN NEW;
      END IF;
      RAISE EXCEPTION 'memory entry versions are immutable' USING ERRCODE = 'integrity_constraint_violation';
    END $$""",
    f"""CREATE OR REPLACE TRIGGER powercontext_revision_immutable BEFORE UPDATE OR DELETE ON {REVISION_TABLE}
    FOR EACH ROW EXECUTE FUNCTION powercontext_refuse_change()""",
    f"""CREATE OR REPLACE TRIGGER powercontext_entry_version_immutable BEFORE UPDATE OR DELETE
    ON {ENTRY_VERSION_TABLE} FOR EACH ROW EXECUTE FUNCTION powercontext_entry_version_guard()""",
    # Row triggers do not see TRUNCATE; statement triggers refuse it too.
    f"""CREATE OR REPLACE TRIGGER powercontext_revision_no_truncate BEFORE TRUNCATE ON {REVISION_TABLE}
    FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_change()""",
    f"""CREATE OR REPLACE TRIGGER powercontext_entry_version_no_truncate BEFORE TRUNCATE ON {ENTRY_VERSION_TABLE}
    FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_change()""",
]
POSTGRESQL_UNINSTALL = [
    f"DROP TRIGGER IF EXISTS powercontext_revision_immutable ON {REVISION_TABLE}",
    f"DROP TRIGGER IF EXISTS powercontext_entry_version_immutable ON {ENTRY_VERSION_TABLE}",
    f"DROP TRIGGER IF EXISTS powercontext_revision_no_truncate ON {REVISION_TABLE}",
    f"DROP TRIGGER IF EXISTS powercontext_entry_version_no_truncate ON {ENTRY_VERSION_TABLE}",
]


def _statements(vendor: str, *, install: bool) -> list[str]:
    if vendor == "sqlite":
        return SQLITE_INSTALL if install else SQLITE_UNINSTALL
    if vendor == "postgresql":
        return POSTGRESQL_INSTALL if install else POSTGRESQL_UNINSTALL
    raise NotImplementedError(f"immutability triggers are not written for {vendor}")


def install_triggers(connection) -> None:
    """Create the immutability triggers on this connection's database (idempotent)."""
    with connection.cursor() as cursor:
        for statement in _statements(connection.vendor, install=True):
            cursor.execute(statement)


def uninstall_triggers(connection) -> None:
    """Drop the triggers: only for migrations' reverse step and test-database teardown."""
    with connection.cursor() as cursor:
        for statement in _statements(connection.vendor, install=False):
            cursor.execute(statement)
