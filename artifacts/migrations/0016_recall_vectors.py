"""Dense recall (issue 37): one embedding per live recall document and model (RecallVector)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts", "0015_selection_guards"),
    ]

    operations = [
        migrations.CreateModel(
            name="RecallVector",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("family", models.CharField(max_length=20)),
                ("model_id", models.CharField(max_length=200)),
                ("dimension", models.PositiveIntegerField()),
                ("encoding", models.CharField(max_length=8)),
                ("vector", models.BinaryField()),
                (
                    "document",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="vectors",
                        to="artifacts.recalldocument",
                    ),
                ),
                (
                    "scope",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="artifacts.scope",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["scope", "family", "model_id"], name="recall_vector_pair_idx")],
                "constraints": [models.UniqueConstraint(fields=("document", "model_id"), name="recall_vector_unique")],
            },
        ),
    ]
