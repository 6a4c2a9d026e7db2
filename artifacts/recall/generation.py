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

Migration 0008 installs a frozen copy of ``STATEMENTS``: a change here needs a new migration that installs it
(``tests/api/test_trigger_migrations.py`` fails until there is one).
"""

from __future__ import annotations

from artifacts.recall.ranking import CORPUS_TABLE

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
}
"""SQLite: AFTER triggers that rewrite the row (a BEFORE trigger cannot change NEW there). A trigger's own
UPDATE does not fire it again (SQLite's recursive triggers are off, as Django leaves them)."""

POSTGRESQL_INSTALL = [
    "CREATE OR REPLACE FUNCTION powercontext_corpus_generation() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    f"NEW.generation := floor(random() * {_TOKEN_BITS_MASK})::bigint + 1;\n"
    "RETURN NEW;\n"
    "END $$",
    "CREATE OR REPLACE TRIGGER powercontext_corpus_generation BEFORE INSERT OR UPDATE ON "
    f"{CORPUS_TABLE} FOR EACH ROW EXECUTE FUNCTION powercontext_corpus_generation()",
]
POSTGRESQL_UNINSTALL = [
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
