"""The corpus generation: a token the database renews on every change of a scope and family's corpus row.

``RecallCorpusStat.generation`` tells each process holding a copy of a (family, scope) pair's postings
(``recall.resident``) whether its copy is current. Every index change of the pair updates that row in the same
transaction (``index``), so a trigger renews the token there, whatever writes the row: the services, a worker
of a version that predates the column (during a rolling upgrade), a shell or raw SQL. A row inserted without a token
(the column's database default, 0) gets one too. The database always chooses: a token a writer sets (a stale
model instance saved from a shell, an earlier value) is replaced, so no old token can come back. Tokens are
random, so no rollback, restore or reused test database can pair an old token with other postings. Writes that
change postings without touching the corpus row (raw SQL on the postings alone) are not seen: every index
change of any version updates the row.

A process also keeps the rows of the documents it has read with its copy (``recall.documents``), so the token covers
what those rows show too: a memory artifact's head (its entries are cited at it) and an entry's retirement. The
services change the pair's postings in the same transaction as either, and the database renews the token whoever
moves a head or retires an entry (a shell, raw SQL, a version that would not).

PostgreSQL's functions name their tables with a fixed schema and search path (``artifacts.triggers``): a temporary
table of the same name cannot take the renewal away from the real row.

Migration 0011 installs a frozen copy of ``STATEMENTS`` (0008 installed the first two triggers, 0009 the others): a
change here needs a new migration that installs it (``tests/api/test_trigger_migrations.py`` fails until there is
one).
"""

from __future__ import annotations

from artifacts.immutability import ARTIFACT_TABLE, ENTRY_VERSION_TABLE
from artifacts.recall.tables import CORPUS_TABLE
from artifacts.triggers import pg_table, pg_trigger_function

_TOKEN_BITS_MASK = (1 << 62) - 1

_SQLITE_NEW_TOKEN = f"(random() & {_TOKEN_BITS_MASK}) | 1"
SQLITE_TRIGGERS = {
    "powercontext_corpus_generation_update": (
        f"CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_update AFTER UPDATE ON {CORPUS_TABLE} "
        f"BEGIN UPDATE {CORPUS_TABLE} SET generation = {_SQLITE_NEW_TOKEN} WHERE id = NEW.id; END"
    ),
    "powercontext_corpus_generation_insert": (
        f"CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_insert AFTER INSERT ON {CORPUS_TABLE} "
        f"BEGIN UPDATE {CORPUS_TABLE} SET generation = {_SQLITE_NEW_TOKEN} WHERE id = NEW.id; END"
    ),
    "powercontext_corpus_generation_head": (
        f"CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_head AFTER UPDATE ON {ARTIFACT_TABLE} "
        "WHEN NEW.head_revision IS NOT OLD.head_revision "
        f"BEGIN UPDATE {CORPUS_TABLE} SET generation = 0 WHERE scope_id = NEW.scope_id AND family = NEW.family; END"
    ),
    "powercontext_corpus_generation_retired": (
        f"CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_retired AFTER UPDATE ON {ENTRY_VERSION_TABLE} "
        "WHEN NEW.retired_in_revision IS NOT OLD.retired_in_revision "
        f"BEGIN UPDATE {CORPUS_TABLE} SET generation = 0 WHERE family = 'memory' "
        f"AND scope_id = (SELECT scope_id FROM {ARTIFACT_TABLE} WHERE id = NEW.artifact_id); END"
    ),
}
"""SQLite: AFTER triggers that rewrite the row (a BEFORE trigger cannot change NEW there). A trigger's own
UPDATE does not fire it again (SQLite's recursive triggers are off, as Django leaves them); the head and retirement
triggers' UPDATE of the corpus row fires the row's own trigger, which chooses the token."""

_PG_CORPUS, _PG_ARTIFACT = pg_table(CORPUS_TABLE), pg_table(ARTIFACT_TABLE)
POSTGRESQL_INSTALL = [
    pg_trigger_function(
        "powercontext_corpus_generation",
        f"NEW.generation := floor(random() * {_TOKEN_BITS_MASK})::bigint + 1;\nRETURN NEW;",
    ),
    "CREATE OR REPLACE TRIGGER powercontext_corpus_generation BEFORE INSERT OR UPDATE ON "
    f"{CORPUS_TABLE} FOR EACH ROW EXECUTE FUNCTION powercontext_corpus_generation()",
    # Any UPDATE of the corpus row renews its token (the trigger above).
    pg_trigger_function(
        "powercontext_corpus_generation_head",
        "IF NEW.head_revision IS DISTINCT FROM OLD.head_revision THEN\n"
        f"  UPDATE {_PG_CORPUS} SET generation = 0 WHERE scope_id = NEW.scope_id AND family = NEW.family;\n"
        "END IF;\n"
        "RETURN NULL;",
    ),
    f"CREATE OR REPLACE TRIGGER powercontext_corpus_generation_head AFTER UPDATE ON {ARTIFACT_TABLE} "
    "FOR EACH ROW EXECUTE FUNCTION powercontext_corpus_generation_head()",
    pg_trigger_function(
        "powercontext_corpus_generation_retired",
        "IF NEW.retired_in_revision IS DISTINCT FROM OLD.retired_in_revision THEN\n"
        f"  UPDATE {_PG_CORPUS} SET generation = 0 WHERE family = 'memory' "
        f"AND scope_id = (SELECT scope_id FROM {_PG_ARTIFACT} WHERE id = NEW.artifact_id);\n"
        "END IF;\n"
        "RETURN NULL;",
    ),
    f"CREATE OR REPLACE TRIGGER powercontext_corpus_generation_retired AFTER UPDATE ON {ENTRY_VERSION_TABLE} "
    "FOR EACH ROW EXECUTE FUNCTION powercontext_corpus_generation_retired()",
]
POSTGRESQL_UNINSTALL = [
    f"DROP TRIGGER IF EXISTS powercontext_corpus_generation_retired ON {ENTRY_VERSION_TABLE}",
    "DROP FUNCTION IF EXISTS powercontext_corpus_generation_retired()",
    f"DROP TRIGGER IF EXISTS powercontext_corpus_generation_head ON {ARTIFACT_TABLE}",
    "DROP FUNCTION IF EXISTS powercontext_corpus_generation_head()",
    f"DROP TRIGGER IF EXISTS powercontext_corpus_generation ON {CORPUS_TABLE}",
    "DROP FUNCTION IF EXISTS powercontext_corpus_generation()",
]


STATEMENTS = {
    "sqlite": (
        list(SQLITE_TRIGGERS.values()),
        [f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS],
    ),
    "postgresql": (POSTGRESQL_INSTALL, POSTGRESQL_UNINSTALL),
}
