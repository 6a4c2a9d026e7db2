from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts", "0009_corpus_generation_head_and_retirement"),
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
                "verbose_name_plural": "prepare log",
            },
        ),
    ]
