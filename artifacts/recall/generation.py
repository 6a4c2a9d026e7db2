"""The corpus generation: a token the database renews on every change of a scope and family's corpus row.

``RecallCorpusStat.generation`` tells each process holding a copy of a (family, scope) pair's postings
(``recall.resident``) whether its copy is current. Every index change of the pair updates that row in the same
transaction (``index``), so a trigger renews the token there, whatever writes: the services, a worker of a
version that predates the column (during a rolling upgrade), a shell or raw SQL. A row inserted without a token
(the column's database default, 0) gets one too. Tokens are random, so no rollback, restore or reused test
database can pair an old token with other postings; a writer that sets a new token itself keeps it.
"""

from __future__ import annotations

from artifacts.recall.ranking import CORPUS_TABLE
from artifacts.triggers import triggers_run

_TOKEN_BITS_MASK = (1 << 62) - 1

_SQLITE_NEW_TOKEN = f"(random() & {_TOKEN_BITS_MASK}) | 1"
SQLITE_TRIGGERS = {
    "powercontext_corpus_generation_update": (
        f"CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_update AFTER UPDATE ON {CORPUS_TABLE} "
        f"WHEN NEW.generation IS OLD.generation BEGIN UPDATE {CORPUS_TABLE} SET generation = {_SQLITE_NEW_TOKEN} "
        "WHERE id = NEW.id; END"
    ),
    "powercontext_corpus_generation_insert": (
        f"CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_insert AFTER INSERT ON {CORPUS_TABLE} "
        f"WHEN NEW.generation = 0 BEGIN UPDATE {CORPUS_TABLE} SET generation = {_SQLITE_NEW_TOKEN} "
        "WHERE id = NEW.id; END"
    ),
}
"""SQLite: AFTER triggers that rewrite the row (a BEFORE trigger cannot change NEW there); recursive triggers are
off by default, and the rewrite changes the token, so it does not fire again."""

POSTGRESQL_INSTALL = [
    "CREATE OR REPLACE FUNCTION powercontext_corpus_generation() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "IF (TG_OP = 'INSERT' AND NEW.generation <> 0) OR (TG_OP = 'UPDATE' AND NEW.generation <> OLD.generation) "
    "THEN RETURN NEW; END IF;\n"
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


def generation_triggers_install(connection) -> None:
    """Create the generation triggers on this connection's database (idempotent)."""
    triggers_run(connection, STATEMENTS, install=True)


def generation_triggers_uninstall(connection) -> None:
    """Drop them: only for the migration's reverse step."""
    triggers_run(connection, STATEMENTS, install=False)
