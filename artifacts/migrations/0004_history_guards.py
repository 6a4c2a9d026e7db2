"""Guard the whole history, not only revision and entry version rows (see artifacts/immutability.py).

Adds the insert guards (next revision only, no SQLite REPLACE over existing rows), the artifact head and
identity guard, the scope id guard and the retire-by-the-head rule; replaces the earlier trigger set.
"""

from django.db import migrations

from artifacts.immutability import install_triggers, uninstall_triggers


def _reinstall(apps, schema_editor):
    uninstall_triggers(schema_editor.connection)
    install_triggers(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0003_recall_posting_covering_index")]
    operations = [migrations.RunPython(_reinstall, migrations.RunPython.noop)]
