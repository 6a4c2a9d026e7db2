from django.db import migrations, models
from django.db.models.functions import Length

# Rows written before this migration: their size estimated from their characters (at most a third of the
# bytes for CJK text), so that the size cap counts them too.
ROW_OVERHEAD_BYTES = 160


def estimate_stored_bytes(apps, schema_editor):
    PrepareLog = apps.get_model("artifacts", "PrepareLog")
    PrepareLog.objects.update(
        stored_bytes=Length("query") + Length("record") + Length("scope_sent") + ROW_OVERHEAD_BYTES
    )


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts", "0011_history_chain"),
    ]

    operations = [
        migrations.AddField(
            model_name="preparelog",
            name="query_bytes",
            field=models.PositiveIntegerField(default=0, help_text="UTF-8 bytes of the query, kept or not"),
        ),
        migrations.AddField(
            model_name="preparelog",
            name="query_sha256",
            field=models.CharField(blank=True, help_text="SHA-256 of the query, kept or not", max_length=64),
        ),
        migrations.AddField(
            model_name="preparelog",
            name="stored_bytes",
            field=models.PositiveIntegerField(
                default=0, help_text="estimated bytes this row takes, counted against POWERCONTEXT_PREPARE_LOG_MAX_MB"
            ),
        ),
        migrations.AlterField(
            model_name="preparelog",
            name="query",
            field=models.TextField(
                blank=True,
                help_text="the query's text, when at most POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES (else empty)",
            ),
        ),
        migrations.RunPython(estimate_stored_bytes, migrations.RunPython.noop),
    ]
