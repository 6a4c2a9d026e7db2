# The prepare log's plural name, so that the admin's list counts "4 prepare log entries". Options only: no SQL.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts", "0012_prepare_log_bounds"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="preparelog",
            options={
                "ordering": ["-created_at", "-id"],
                "permissions": [
                    ("view_prepare_log_content", "Can read logged queries and re-rendered content"),
                    ("run_prepare_inspector", "Can run the prepare inspector over every scope"),
                ],
                "verbose_name": "prepare log entry",
                "verbose_name_plural": "prepare log entries",
            },
        ),
    ]
