"""The first immutability triggers: revisions and entry versions append-only (0004_history_guards replaces them).

The statements are frozen here, not imported from artifacts/immutability.py, so that changing that module never
changes what this migration does (see 0004_history_guards).
"""

from django.db import migrations

FROZEN_FROM = "artifacts.immutability"
"""The module whose statements were frozen here (tests/api/test_trigger_migrations.py compares the latest freeze)."""

# What this migration installed when it last imported them from artifacts/immutability.py, as of commit 587427e,
# the module's last version before 0004 (the first version, dccfad9, lacked the two PostgreSQL TRUNCATE triggers).
# 0004 drops every one of them and installs the current set, so a database migrated to the end is the same
# whichever of these it ran.
INSTALL = {
    "sqlite": (
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_update BEFORE UPDATE ON "
            "artifacts_artifactrevision\n"
            "    BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_delete BEFORE DELETE ON "
            "artifacts_artifactrevision\n"
            "    BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_update BEFORE UPDATE ON "
            "artifacts_memoryentryversion\n"
            "    WHEN NOT (OLD.retired_in_revision IS NULL AND NEW.retired_in_revision IS NOT NULL\n"
            "              AND NEW.id IS OLD.id AND NEW.artifact_id IS OLD.artifact_id AND NEW.entry_id IS "
            "OLD.entry_id AND NEW.version_id IS OLD.version_id AND NEW.body IS OLD.body AND NEW.content_sha256 "
            "IS OLD.content_sha256 AND NEW.born_in_revision IS OLD.born_in_revision AND NEW.created_at IS "
            "OLD.created_at)\n"
            "    BEGIN SELECT RAISE(ABORT, 'memory entry versions are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_delete BEFORE DELETE ON "
            "artifacts_memoryentryversion\n"
            "    BEGIN SELECT RAISE(ABORT, 'memory entry versions are immutable'); END"
        ),
    ),
    "postgresql": (
        (
            "CREATE OR REPLACE FUNCTION powercontext_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            "    BEGIN RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = "
            "'integrity_constraint_violation';\n"
            "    END $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_entry_version_guard() RETURNS trigger LANGUAGE plpgsql AS "
            "$$\n"
            "    BEGIN\n"
            "      IF TG_OP = 'UPDATE' AND OLD.retired_in_revision IS NULL AND NEW.retired_in_revision IS NOT "
            "NULL\n"
            "         AND NEW.id IS NOT DISTINCT FROM OLD.id AND NEW.artifact_id IS NOT DISTINCT FROM "
            "OLD.artifact_id AND NEW.entry_id IS NOT DISTINCT FROM OLD.entry_id AND NEW.version_id IS NOT "
            "DISTINCT FROM OLD.version_id AND NEW.body IS NOT DISTINCT FROM OLD.body AND NEW.content_sha256 IS "
            "NOT DISTINCT FROM OLD.content_sha256 AND NEW.born_in_revision IS NOT DISTINCT FROM "
            "OLD.born_in_revision AND NEW.created_at IS NOT DISTINCT FROM OLD.created_at THEN\n"
            "        RETURN NEW;\n"
            "      END IF;\n"
            "      RAISE EXCEPTION 'memory entry versions are immutable' USING ERRCODE = "
            "'integrity_constraint_violation';\n"
            "    END $$"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_immutable BEFORE UPDATE OR DELETE ON "
            "artifacts_artifactrevision\n"
            "    FOR EACH ROW EXECUTE FUNCTION powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_entry_version_immutable BEFORE UPDATE OR DELETE\n"
            "    ON artifacts_memoryentryversion FOR EACH ROW EXECUTE FUNCTION "
            "powercontext_entry_version_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_no_truncate BEFORE TRUNCATE ON "
            "artifacts_artifactrevision\n"
            "    FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_entry_version_no_truncate BEFORE TRUNCATE ON "
            "artifacts_memoryentryversion\n"
            "    FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_change()"
        ),
    ),
}

# The reverse step drops the set 0004 installs (a superset of the names above), as it did while it imported them:
# 0004's own reverse step is a no-op, so those triggers are still there when this one is reversed.
UNINSTALL = {
    "sqlite": (
        "DROP TRIGGER IF EXISTS powercontext_revision_no_update",
        "DROP TRIGGER IF EXISTS powercontext_revision_no_delete",
        "DROP TRIGGER IF EXISTS powercontext_revision_append_only",
        "DROP TRIGGER IF EXISTS powercontext_entry_version_no_update",
        "DROP TRIGGER IF EXISTS powercontext_entry_version_no_delete",
        "DROP TRIGGER IF EXISTS powercontext_entry_version_append_only",
        "DROP TRIGGER IF EXISTS powercontext_artifact_guard",
        "DROP TRIGGER IF EXISTS powercontext_artifact_insert",
        "DROP TRIGGER IF EXISTS powercontext_scope_guard",
        "DROP TRIGGER IF EXISTS powercontext_scope_insert",
    ),
    "postgresql": (
        "DROP TRIGGER IF EXISTS powercontext_revision_immutable ON artifacts_artifactrevision",
        "DROP TRIGGER IF EXISTS powercontext_revision_append_only ON artifacts_artifactrevision",
        "DROP TRIGGER IF EXISTS powercontext_revision_no_truncate ON artifacts_artifactrevision",
        "DROP TRIGGER IF EXISTS powercontext_entry_version_immutable ON artifacts_memoryentryversion",
        "DROP TRIGGER IF EXISTS powercontext_entry_version_no_truncate ON artifacts_memoryentryversion",
        "DROP TRIGGER IF EXISTS powercontext_artifact_guard ON artifacts_artifact",
        "DROP TRIGGER IF EXISTS powercontext_scope_guard ON artifacts_scope",
    ),
}


def _run(schema_editor, statements) -> None:
    vendor = schema_editor.connection.vendor
    if vendor not in statements:
        raise NotImplementedError(f"triggers are not written for {vendor}")
    for statement in statements[vendor]:
        schema_editor.execute(statement, params=None)  # no parameters: a "%" in the SQL is literal


def _install(apps, schema_editor):
    _run(schema_editor, INSTALL)


def _uninstall(apps, schema_editor):
    _run(schema_editor, UNINSTALL)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0001_initial")]
    operations = [migrations.RunPython(_install, _uninstall)]
