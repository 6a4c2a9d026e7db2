"""The database renews a corpus row's generation on every change (see artifacts/recall/generation.py).

Until now the write services renewed it themselves, so a writer that did not (a worker of a version before 0007
during a rolling upgrade, a shell, raw SQL) could leave a process's copy of the postings looking current.
Rows written before this migration get a fresh token, so no copy taken before it is used again.

The statements are artifacts/recall/generation.py's, frozen here when this migration stopped importing them, so that
a database migrated today gets the same triggers as one migrated when it was written. A change to that module needs
a new migration that installs the changed triggers (tests/api/test_trigger_migrations.py fails until one does).
"""

from django.db import migrations

FROZEN_FROM = "artifacts.recall.generation"
"""The module whose statements were frozen here (tests/api/test_trigger_migrations.py compares the latest freeze)."""

# As of commit cf5c2ae: the database always chooses the token. The module's first version (bd48dbf, when this
# migration was added) kept a token the writer set; a database migrated in between still has those triggers.
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
    ),
    "postgresql": (
        (
            "CREATE OR REPLACE FUNCTION powercontext_corpus_generation() RETURNS trigger LANGUAGE plpgsql AS "
            "$$\n"
            "BEGIN\n"
            "NEW.generation := floor(random() * 4611686018427387903)::bigint + 1;\n"
            "RETURN NEW;\n"
            "END $$"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_corpus_generation BEFORE INSERT OR UPDATE ON "
            "artifacts_recallcorpusstat FOR EACH ROW EXECUTE FUNCTION powercontext_corpus_generation()"
        ),
    ),
}
UNINSTALL = {
    "sqlite": (
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation_update",
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation_insert",
    ),
    "postgresql": (
        "DROP TRIGGER IF EXISTS powercontext_corpus_generation ON artifacts_recallcorpusstat",
        "DROP FUNCTION IF EXISTS powercontext_corpus_generation()",
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
    schema_editor.execute("UPDATE artifacts_recallcorpusstat SET generation = generation", params=None)


def _uninstall(apps, schema_editor):
    _run(schema_editor, UNINSTALL)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0007_corpus_generation")]
    operations = [migrations.RunPython(_install, _uninstall)]
