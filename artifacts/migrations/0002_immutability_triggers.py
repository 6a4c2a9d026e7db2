from django.db import migrations

from artifacts.immutability import install_triggers, uninstall_triggers


def _install(apps, schema_editor):
    install_triggers(schema_editor.connection)


def _uninstall(apps, schema_editor):
    uninstall_triggers(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0001_initial")]
    operations = [migrations.RunPython(_install, _uninstall)]
