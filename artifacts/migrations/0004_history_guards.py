"""Guard the whole history, not only revision and entry version rows (see artifacts/immutability.py).

Adds the insert guards (next revision only, no SQLite REPLACE over existing rows), the artifact head and
identity guard, the scope id guard and the retire-by-the-head rule; replaces the earlier trigger set.

The statements are artifacts/immutability.py's, frozen here when this migration stopped importing them, so that a
database migrated today gets the same triggers as one migrated when it was written. A change to that module needs a
new migration that installs the changed triggers (tests/api/test_trigger_migrations.py fails until one does).
"""

from django.db import migrations

FROZEN_FROM = "artifacts.immutability"
"""The module whose statements were frozen here (tests/api/test_trigger_migrations.py compares the latest freeze)."""

INSTALL = {
    "sqlite": (
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_update BEFORE UPDATE ON "
            "artifacts_artifactrevision BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_delete BEFORE DELETE ON "
            "artifacts_artifactrevision BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_append_only BEFORE INSERT ON "
            "artifacts_artifactrevision WHEN NEW.revision IS NOT (SELECT head_revision FROM artifacts_artifact "
            "WHERE id = NEW.artifact_id) + 1 OR EXISTS (SELECT 1 FROM artifacts_artifactrevision WHERE id = "
            "NEW.id) BEGIN SELECT RAISE(ABORT, 'a revision is inserted only as the next revision of its "
            "artifact'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_update BEFORE UPDATE ON "
            "artifacts_memoryentryversion WHEN NOT (OLD.retired_in_revision IS NULL AND "
            "NEW.retired_in_revision IS (SELECT head_revision FROM artifacts_artifact WHERE id = "
            "NEW.artifact_id) AND NOT (NEW.id IS NOT OLD.id OR NEW.artifact_id IS NOT OLD.artifact_id OR "
            "NEW.entry_id IS NOT OLD.entry_id OR NEW.version_id IS NOT OLD.version_id OR NEW.body IS NOT "
            "OLD.body OR NEW.content_sha256 IS NOT OLD.content_sha256 OR NEW.born_in_revision IS NOT "
            "OLD.born_in_revision OR NEW.created_at IS NOT OLD.created_at)) BEGIN SELECT RAISE(ABORT, 'memory "
            "entry versions are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_delete BEFORE DELETE ON "
            "artifacts_memoryentryversion BEGIN SELECT RAISE(ABORT, 'memory entry versions are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_append_only BEFORE INSERT ON "
            "artifacts_memoryentryversion WHEN NEW.retired_in_revision IS NOT NULL OR NEW.born_in_revision IS "
            "NOT (SELECT head_revision FROM artifacts_artifact WHERE id = NEW.artifact_id) OR EXISTS (SELECT 1 "
            "FROM artifacts_memoryentryversion WHERE id = NEW.id OR (artifact_id = NEW.artifact_id AND "
            "(version_id = NEW.version_id OR (entry_id = NEW.entry_id AND retired_in_revision IS NULL)))) "
            "BEGIN SELECT RAISE(ABORT, 'an entry version is inserted only live, into the head revision, as a "
            "new version of an entry'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_guard BEFORE UPDATE ON artifacts_artifact WHEN "
            "NEW.id IS NOT OLD.id OR NEW.scope_id IS NOT OLD.scope_id OR NEW.family IS NOT OLD.family OR "
            "NEW.artifact_id IS NOT OLD.artifact_id OR NEW.created_at IS NOT OLD.created_at OR "
            "(NEW.head_revision IS NOT OLD.head_revision AND NOT (NEW.head_revision = OLD.head_revision + 1 "
            "AND EXISTS (SELECT 1 FROM artifacts_artifactrevision WHERE artifact_id = OLD.id AND revision = "
            "NEW.head_revision))) BEGIN SELECT RAISE(ABORT, 'an artifact keeps its identity; its head moves "
            "forward by one onto an existing revision'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_insert BEFORE INSERT ON artifacts_artifact "
            "WHEN NEW.head_revision IS NOT 0 OR EXISTS (SELECT 1 FROM artifacts_artifact WHERE id = NEW.id OR "
            "(scope_id = NEW.scope_id AND family = NEW.family AND artifact_id = NEW.artifact_id)) BEGIN SELECT "
            "RAISE(ABORT, 'a new artifact starts without revisions and never replaces another'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_guard BEFORE UPDATE ON artifacts_scope WHEN "
            "NEW.id IS NOT OLD.id OR NEW.scope_id IS NOT OLD.scope_id BEGIN SELECT RAISE(ABORT, 'a scope id "
            "never changes'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_insert BEFORE INSERT ON artifacts_scope WHEN "
            "EXISTS (SELECT 1 FROM artifacts_scope WHERE id = NEW.id OR scope_id = NEW.scope_id) BEGIN SELECT "
            "RAISE(ABORT, 'a new scope never replaces another'); END"
        ),
    ),
    "postgresql": (
        (
            "CREATE OR REPLACE FUNCTION powercontext_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            "BEGIN\n"
            "RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = "
            "'integrity_constraint_violation';\n"
            "END $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_revision_guard() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            "BEGIN\n"
            "IF NEW.revision IS DISTINCT FROM (SELECT head_revision FROM artifacts_artifact WHERE id = "
            "NEW.artifact_id) + 1 THEN RAISE EXCEPTION 'a revision is inserted only as the next revision of "
            "its artifact' USING ERRCODE = 'integrity_constraint_violation'; END IF;\n"
            "RETURN NEW;\n"
            "END $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_entry_version_guard() RETURNS trigger LANGUAGE plpgsql AS "
            "$$\n"
            "BEGIN\n"
            "IF TG_OP = 'INSERT' THEN\n"
            "  IF NEW.retired_in_revision IS NULL AND NEW.born_in_revision IS NOT DISTINCT FROM (SELECT "
            "head_revision FROM artifacts_artifact WHERE id = NEW.artifact_id) THEN RETURN NEW; END IF;\n"
            "  RAISE EXCEPTION 'an entry version is inserted only live, into the head revision' USING ERRCODE "
            "= 'integrity_constraint_violation';\n"
            "END IF;\n"
            "IF TG_OP = 'UPDATE' AND OLD.retired_in_revision IS NULL AND NEW.retired_in_revision = (SELECT "
            "head_revision FROM artifacts_artifact WHERE id = NEW.artifact_id) AND NOT (NEW.id IS DISTINCT "
            "FROM OLD.id OR NEW.artifact_id IS DISTINCT FROM OLD.artifact_id OR NEW.entry_id IS DISTINCT FROM "
            "OLD.entry_id OR NEW.version_id IS DISTINCT FROM OLD.version_id OR NEW.body IS DISTINCT FROM "
            "OLD.body OR NEW.content_sha256 IS DISTINCT FROM OLD.content_sha256 OR NEW.born_in_revision IS "
            "DISTINCT FROM OLD.born_in_revision OR NEW.created_at IS DISTINCT FROM OLD.created_at) THEN RETURN "
            "NEW; END IF;\n"
            "RAISE EXCEPTION 'memory entry versions are immutable' USING ERRCODE = "
            "'integrity_constraint_violation';\n"
            "END $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_artifact_guard() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            "BEGIN\n"
            "IF TG_OP = 'INSERT' THEN\n"
            "  IF NEW.head_revision = 0 THEN RETURN NEW; END IF;\n"
            "  RAISE EXCEPTION 'a new artifact starts without revisions' USING ERRCODE = "
            "'integrity_constraint_violation';\n"
            "END IF;\n"
            "IF NEW.id IS DISTINCT FROM OLD.id OR NEW.scope_id IS DISTINCT FROM OLD.scope_id OR NEW.family IS "
            "DISTINCT FROM OLD.family OR NEW.artifact_id IS DISTINCT FROM OLD.artifact_id OR NEW.created_at IS "
            "DISTINCT FROM OLD.created_at THEN RAISE EXCEPTION 'an artifact keeps its identity' USING ERRCODE "
            "= 'integrity_constraint_violation'; END IF;\n"
            "IF NEW.head_revision IS DISTINCT FROM OLD.head_revision AND NOT (NEW.head_revision = "
            "OLD.head_revision + 1 AND EXISTS (SELECT 1 FROM artifacts_artifactrevision WHERE artifact_id = "
            "OLD.id AND revision = NEW.head_revision)) THEN RAISE EXCEPTION 'an artifact head moves forward by "
            "one onto an existing revision' USING ERRCODE = 'integrity_constraint_violation'; END IF;\n"
            "RETURN NEW;\n"
            "END $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_scope_guard() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            "BEGIN\n"
            "IF NEW.id IS DISTINCT FROM OLD.id OR NEW.scope_id IS DISTINCT FROM OLD.scope_id THEN RAISE "
            "EXCEPTION 'a scope id never changes' USING ERRCODE = 'integrity_constraint_violation'; END IF;\n"
            "RETURN NEW;\n"
            "END $$"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_immutable BEFORE UPDATE OR DELETE ON "
            "artifacts_artifactrevision FOR EACH ROW EXECUTE FUNCTION powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_append_only BEFORE INSERT ON "
            "artifacts_artifactrevision FOR EACH ROW EXECUTE FUNCTION powercontext_revision_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_no_truncate BEFORE TRUNCATE ON "
            "artifacts_artifactrevision FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_entry_version_immutable BEFORE INSERT OR UPDATE OR DELETE "
            "ON artifacts_memoryentryversion FOR EACH ROW EXECUTE FUNCTION powercontext_entry_version_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_entry_version_no_truncate BEFORE TRUNCATE ON "
            "artifacts_memoryentryversion FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_artifact_guard BEFORE INSERT OR UPDATE ON "
            "artifacts_artifact FOR EACH ROW EXECUTE FUNCTION powercontext_artifact_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_scope_guard BEFORE UPDATE ON artifacts_scope FOR EACH ROW "
            "EXECUTE FUNCTION powercontext_scope_guard()"
        ),
    ),
}
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


def _reinstall(apps, schema_editor):
    _run(schema_editor, UNINSTALL)
    _run(schema_editor, INSTALL)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0003_recall_posting_covering_index")]
    operations = [migrations.RunPython(_reinstall, migrations.RunPython.noop)]
