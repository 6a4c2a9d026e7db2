"""A covering index for BM25 ranking: one index range per (scope, family, term) yields every column the
score needs, so ranking reads no table rows (PostgreSQL: index-only scans; SQLite: covering index).

Plain SQL (same statement on SQLite and PostgreSQL) rather than a model index, so the model state, and
with it ``makemigrations --check``, is unchanged.
"""

from django.db import migrations

INDEX = "recall_posting_cover_idx"


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0002_immutability_triggers")]
    operations = [
        migrations.RunSQL(
            sql=(
                f"CREATE INDEX {INDEX} ON artifacts_recallposting "
                "(scope_id, family, term, document_id, term_frequency, document_length)"
            ),
            reverse_sql=f"DROP INDEX {INDEX}",
        )
    ]
