"""The database renews a corpus row's generation on every change (see artifacts/recall/generation.py).

Until now the write services renewed it themselves, so a writer that did not (a worker of a version before 0007
during a rolling upgrade, a shell, raw SQL) could leave a process's copy of the postings looking current.
Rows written before this migration get a fresh token, so no copy taken before it is used again.
"""

from django.db import migrations

from artifacts.recall.generation import generation_triggers_install, generation_triggers_uninstall


def _install(apps, schema_editor):
    generation_triggers_install(schema_editor.connection)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("UPDATE artifacts_recallcorpusstat SET generation = generation")


def _uninstall(apps, schema_editor):
    generation_triggers_uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0007_corpus_generation")]
    operations = [migrations.RunPython(_install, _uninstall)]
