"""The corpus generation also moves when a memory artifact's head moves or an entry is retired, whoever does it.

A process keeps the rows of the documents it read with its copy of a scope's postings (artifacts/recall/documents.py):
their citations are at the artifact's head and only live entries are recalled, so the token must move with both. The
services already change the postings in the same transaction; these triggers make it hold for any other writer too.

The statements are artifacts/recall/generation.py's, frozen here (the first two as 0008 installed them). A change to
that module needs a new migration that installs the changed triggers (tests/api/test_trigger_migrations.py fails
until one does).
"""

from django.db import migrations

FROZEN_FROM = "artifacts.recall.generation"
"""The module whose statements were frozen here (tests/api/test_trigger_migrations.py compares the latest freeze)."""

INSTALL = {
    "sqlite": (
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_update AFTER UPDATE ON "
            "artifacts_recallcorpusstat BEGIN UPDATE artifacts_recallcorpusstat SET generation = (random() & "
            "4611686018427387903) | 1 WHERE id = NEW.id; END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_insert AFTER INSERT ON "
            "artifacts_recallcorpusstat BEGIN UPDATE artifacts_recallcorpusstat SET generation = (random() & "
            "4611686018427387903) | 1 WHERE id = NEW.id; END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_head AFTER UPDATE ON "
            "artifacts_artifact WHEN NEW.head_revision IS NOT OLD.head_revision BEGIN UPDATE "
            "artifacts_recallcorpusstat SET generation = 0 WHERE scope_id = NEW.scope_id AND family = "
            "NEW.family; END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_retired AFTER UPDATE ON "
            "artifacts_memoryentryversion WHEN NEW.retired_in_revision IS NOT OLD.retired_in_revision BEGIN "
            "UPDATE artifacts_recallcorpusstat SET generation = 0 WHERE family = 'memory' AND scope_id = "
            "(SELECT scope_id FROM artifacts_artifact WHERE id = NEW.artifact_id); END"
        ),
    ),
    "postgresql": (
        (
            "CREATE OR REPLACE FUNCTION powercontext_corpus_generation() RETURNS trigger LANGUAGE plpgsql AS "
            "$$\nBEGIN\nNEW.generation := floor(random() * 4611686018427387903)::bigint + 1;\nRETURN NEW;\nEND "
            "$$"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_corpus_generation BEFORE INSERT OR UPDATE ON "
            "artifacts_recallcorpusstat FOR EACH ROW EXECUTE FUNCTION powercontext_corpus_generation()"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_corpus_generation_head() RETURNS trigger LANGUAGE "
            "plpgsql AS $$\nBEGIN\nIF NEW.head_revision IS DISTINCT FROM OLD.head_revision THEN\n  UPDATE "
            "artifacts_recallcorpusstat SET generation = 0 WHERE scope_id = NEW.scope_id AND family = "
            "NEW.family;\nEND IF;\nRETURN NULL;\nEND $$"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_corpus_generation_head AFTER UPDATE ON "
            "artifacts_artifact FOR EACH ROW EXECUTE FUNCTION powercontext_corpus_generation_head()"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_corpus_generation_retired() RETURNS trigger LANGUAGE "
            "plpgsql AS $$\nBEGIN\nIF NEW.retired_in_revision IS DISTINCT FROM OLD.retired_in_revision THEN\n  "
            "UPDATE artifacts_recallcorpusstat SET generation = 0 WHERE family = 'memory' AND scope_id = "
            "(SELECT scope_id FROM artifacts_artifact WHERE id = NEW.artifact_id);\nEND IF;\nRETURN NULL;\nEND "
            "$$"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_corpus_generation_retired AFTER UPDATE ON "
            "artifacts_memoryentryversion FOR EACH ROW EXECUTE FUNCTION "
            "powercontext_corpus_generation_retired()"
        ),
    ),
}
UNINSTALL = {
    "sqlite": (
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation_update",
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation_insert",
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation_head",
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation_retired",
    ),
    "postgresql": (
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation_retired ON artifacts_memoryentryversion",
        "DROP FUNCTION IF EXISTS powercontext_corpus_generation_retired()",
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation_head ON artifacts_artifact",
        "DROP FUNCTION IF EXISTS powercontext_corpus_generation_head()",
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation ON artifacts_recallcorpusstat",
        "DROP FUNCTION IF EXISTS powercontext_corpus_generation()",
    ),
}
ADDED_UNINSTALL = {"sqlite": UNINSTALL["sqlite"][2:], "postgresql": UNINSTALL["postgresql"][:4]}
"""Reverse: drops the two triggers (and functions) this migration adds, leaving 0008's."""


def _run(schema_editor, statements) -> None:
    vendor = schema_editor.connection.vendor
    if vendor not in statements:
        raise NotImplementedError(f"triggers are not written for {vendor}")
    for statement in statements[vendor]:
        schema_editor.execute(statement, params=None)  # no parameters: a "%" in the SQL is literal


def _install(apps, schema_editor):
    _run(schema_editor, INSTALL)


def _uninstall(apps, schema_editor):
    _run(schema_editor, ADDED_UNINSTALL)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0008_corpus_generation_triggers")]
    operations = [migrations.RunPython(_install, _uninstall)]
