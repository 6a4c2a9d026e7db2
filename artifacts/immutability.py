"""Database triggers that keep history append-only on SQLite and PostgreSQL, whatever writes the rows.

Python-level checks can be bypassed by raw SQL, a shell or a bad migration; these cannot (short of
dropping them, which the least-privilege runtime role of docs/deployment.md may not do). What they allow:

- a revision is inserted only as its artifact's next one (head + 1), and never changes or disappears; a transaction
  that inserts one commits only with the head moved onto it (or past it), so no revision is ever stored above its
  artifact's head (PostgreSQL: a deferred constraint trigger checks each new revision at the commit; SQLite, which
  has no commit trigger, records each new revision in ``REVISION_ABOVE_HEAD_TABLE``, whose rows fail a deferred
  foreign key, and so the commit, unless the head reached them and deleted them first);
- an artifact's head moves forward by one, and only onto a revision that exists; its identity (scope,
  family, id) never changes, a new artifact starts without revisions, and no artifact is ever deleted;
- a scope's authority tier (set by operators, seeds/003) is one of ``vocabulary.authority``'s tiers or null (the
  default), so no stored value can name a tier the selection policy does not know;
- a scope's public id never changes (its title and tier may), and a scope is deleted only while no artifact is in it
  (checked by the trigger itself: a foreign key deferred to the commit would let a row be deleted and inserted
  again under another id);
- an entry version is inserted only into its artifact's head revision, for an entry without a live version,
  and never changes except being retired once, by the revision that retires it (the head);
- a revision births and retires at most the entry versions it declares (``entries_born``, ``entries_retired``):
  each version takes a position 1..N among them (``born_ordinal``, ``retired_ordinal``), unique per revision.
  The services declare exactly what their transaction writes, so once it commits every position is taken and
  nothing can be born into or retired by that revision any more, even while it is the head: retirement (and
  birth) happens only in the transaction that writes the revision;
- an API key keeps its id and hash; once revoked, its revocation time never changes and the key is never
  deleted (so it cannot be inserted again unrevoked);
- on SQLite, ``INSERT OR REPLACE`` / ``REPLACE INTO`` / ``UPDATE OR REPLACE`` that would collide with another row on
  any unique key (the primary key, an identity, a position of a revision's births or retirements, a key's name) is
  refused before its implicit delete, which fires no delete trigger: each insert and each allowed update checks every
  unique index of its table; on PostgreSQL, ``TRUNCATE`` of these tables is refused.

PostgreSQL functions name tables through ``artifacts.triggers.SCHEMA`` with a fixed ``search_path``, so no
temporary table can shadow one (SQLite resolves a main-schema trigger's tables in the main schema).

The write services follow exactly that order: lock the artifact, insert revision head + 1 declaring its changes,
move the head, retire the replaced entry versions, insert the new ones. An entry version is born and retired only in
the head, so none is ever above it either.

Erasure (issue 51, migrations 0020 and 0021): an erasure record (``ERASURE_TABLE``) is inserted only as the next of
its chain and never changes or disappears; while one names a revision or an entry version (itself, the revision
bearing it, or its scope's when the scope held the row as it was erased: ``revisions_through``, ``versions_through``),
that row's texts (``ERASABLE_REVISION_COLUMNS``, ``ERASABLE_ENTRY_COLUMNS``) may be set to the empty text, and nothing
else of it may change: every hash its chain was built from stays.

Migrations install a frozen copy of ``STATEMENTS`` (0023, the latest): a change here needs a new migration that
installs it (``tests/api/test_trigger_migrations.py`` fails until there is one).
"""

from artifacts.triggers import pg_table, pg_trigger_function, triggers_run
from vocabulary.authority import AUTHORITY_TIERS

SCOPE_TABLE = "artifacts_scope"
ARTIFACT_TABLE = "artifacts_artifact"
REVISION_TABLE = "artifacts_artifactrevision"
ENTRY_VERSION_TABLE = "artifacts_memoryentryversion"
API_KEY_TABLE = "artifacts_apikey"
ERASURE_TABLE = "artifacts_erasure"
REVISION_ABOVE_HEAD_TABLE = "powercontext_revision_above_head"
"""SQLite: the revisions inserted by the open transaction that their artifact's head has not reached yet; empty
whenever no transaction is open (a row left fails the commit, see ``SQLITE_REVISION_ABOVE_HEAD``)."""

ENTRY_FROZEN_COLUMNS = (
    "id",
    "artifact_id",
    "entry_id",
    "version_id",
    "body",
    "content_sha256",
    "conflict_key",
    "born_in_revision",
    "created_at",
    "born_ordinal",
)
"""Columns of an entry version that may never change, even while retiring it."""

ERASABLE_ENTRY_COLUMNS = ("body",)
"""What an erasure blanks in an entry version (to ``''``); every other column stays."""
ENTRY_ERASURE_KEPT_COLUMNS = (
    *(column for column in ENTRY_FROZEN_COLUMNS if column not in ERASABLE_ENTRY_COLUMNS),
    "retired_in_revision",
    "retired_ordinal",
)
ERASABLE_REVISION_COLUMNS = ("body", "title", "summary")
"""What an erasure blanks in a revision (each to ``''``, or left as it is: a NULL stays NULL)."""
REVISION_ERASURE_KEPT_COLUMNS = (
    "id",
    "artifact_id",
    "revision",
    "content_sha256",
    "author",
    "created_at",
    "entries_born",
    "entries_retired",
    "chain_sha256",
    "texts_sha256",
)
"""Every other column of a revision: the hashes its chain was built from (``texts_sha256``, the hash of the texts an
erasure blanks, included: migration 0023), and where it sits."""

ARTIFACT_FROZEN_COLUMNS = ("id", "scope_id", "family", "artifact_id", "created_at")
SCOPE_FROZEN_COLUMNS = ("id", "scope_id")
API_KEY_FROZEN_COLUMNS = ("id", "key_sha256")

_UNKNOWN_TIER = "NEW.authority IS NOT NULL AND NEW.authority NOT IN ({})".format(
    ", ".join(f"'{tier}'" for tier in AUTHORITY_TIERS)
)
"""A scope row naming an authority tier that is none of the tiers (null is the default tier)."""
_UNKNOWN_TIER_MESSAGE = f"a scope authority is {', '.join(AUTHORITY_TIERS)} or null"


def _head(artifact_table: str) -> str:
    return f"(SELECT head_revision FROM {artifact_table} WHERE id = NEW.artifact_id)"


def _declared(revision_table: str, count: str, revision: str) -> str:
    """How many entry versions revision ``NEW.<revision>`` of NEW's artifact declares it births or retires."""
    return (
        f"(SELECT COALESCE({count}, 0) FROM {revision_table} "
        f"WHERE artifact_id = NEW.artifact_id AND revision = NEW.{revision})"
    )


def _within(ordinal: str, count: str, revision: str, revision_table: str) -> str:
    """``NEW.<ordinal>`` is one of the positions 1..N its revision declares (false, never null, when it is not)."""
    return f"COALESCE(NEW.{ordinal} BETWEEN 1 AND {_declared(revision_table, count, revision)}, FALSE)"


def _sqlite_changed(columns: tuple[str, ...]) -> str:
    return " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in columns)


def _pg_changed(columns: tuple[str, ...]) -> str:
    return " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in columns)


def _blanked(columns: tuple[str, ...], unchanged: str) -> str:
    """Each column left as it was or set to the empty text (never null: a null would let a WHEN NOT (…) pass)."""
    return " AND ".join(f"(NEW.{c} {unchanged} OLD.{c} OR COALESCE(NEW.{c} = '', FALSE))" for c in columns)


def _erasure_names(kinds: str, artifact_table: str, erasure_table: str) -> str:
    """An erasure record names OLD (a revision: ``kinds`` "revision"; an entry version: "entry_version"). One EXISTS
    per way of naming it, so that each is one index search."""
    through = "revisions_through" if kinds == "revision" else "versions_through"
    ways = [
        f"e.kind = 'scope' AND e.scope_id = (SELECT scope_id FROM {artifact_table} WHERE id = OLD.artifact_id) "
        f"AND OLD.id <= e.{through}"
    ]
    if kinds == "revision":
        ways.append("e.artifact_id = OLD.artifact_id AND e.revision = OLD.revision AND e.kind = 'revision'")
    else:
        ways.append("e.artifact_id = OLD.artifact_id AND e.version_id = OLD.version_id AND e.kind = 'entry_version'")
        ways.append("e.artifact_id = OLD.artifact_id AND e.revision = OLD.born_in_revision AND e.kind = 'revision'")
    return "(" + " OR ".join(f"EXISTS (SELECT 1 FROM {erasure_table} e WHERE {way})" for way in ways) + ")"


def _erasure_allowed(kinds: str, *, pg: bool) -> str:
    """The one update an erasure makes: only the erasable texts blanked, while a record names the row."""
    changed, unchanged = (_pg_changed, "IS NOT DISTINCT FROM") if pg else (_sqlite_changed, "IS")
    kept, erasable = (
        (REVISION_ERASURE_KEPT_COLUMNS, ERASABLE_REVISION_COLUMNS)
        if kinds == "revision"
        else (ENTRY_ERASURE_KEPT_COLUMNS, ERASABLE_ENTRY_COLUMNS)
    )
    tables = (pg_table(ARTIFACT_TABLE), pg_table(ERASURE_TABLE)) if pg else (ARTIFACT_TABLE, ERASURE_TABLE)
    return f"NOT ({changed(kept)}) AND {_blanked(erasable, unchanged)} AND {_erasure_names(kinds, *tables)}"


def _erasure_next(erasure_table: str, *, pg: bool) -> str:
    """A new erasure record is the next of the chain: the next sequence, naming the last record's chain hash."""
    same = "IS NOT DISTINCT FROM" if pg else "IS"
    return (
        f"NEW.sequence {same} COALESCE((SELECT MAX(sequence) FROM {erasure_table}), 0) + 1 "
        f"AND NEW.previous_sha256 {same} COALESCE((SELECT chain_sha256 FROM {erasure_table} "
        "WHERE sequence = NEW.sequence - 1), '')"
    )


def _sqlite_refuse(name: str, event: str, table: str, message: str, when: str | None = None) -> str:
    condition = f" WHEN {when}" if when else ""
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {event} ON {table}{condition} "
        f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
    )


def _sqlite_after(name: str, event: str, table: str, action: str, when: str | None = None) -> str:
    condition = f" WHEN {when}" if when else ""
    return f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} ON {table}{condition} BEGIN {action}; END"


SQLITE_REVISION_ABOVE_HEAD = (
    f"CREATE TABLE IF NOT EXISTS {REVISION_ABOVE_HEAD_TABLE} (artifact_id integer NOT NULL, "
    "revision integer NOT NULL, refuses_commit integer NOT NULL "
    f"REFERENCES {ARTIFACT_TABLE} (id) DEFERRABLE INITIALLY DEFERRED, PRIMARY KEY (artifact_id, revision))"
)
"""SQLite checks a trigger's condition per statement only, and the services' first statement (revision head + 1, the
head not moved yet) is exactly a revision planted above the head: only the commit can tell them apart, and a deferred
foreign key is the one check SQLite makes there. Each new revision gets a row here whose ``refuses_commit`` is 0, an
artifact id that never exists (ids start at 1); moving the head deletes the rows it reaches, so a transaction leaving
a revision above its head fails at COMMIT ("FOREIGN KEY constraint failed") and rolls back. Every connection of the
server enforces foreign keys (Django turns them on); a client that turns them off, like one that drops a trigger, is
beyond what SQLite can refuse (docs/design-notes.md)."""

_SQLITE_HEAD = _head(ARTIFACT_TABLE)
SQLITE_TRIGGERS = {
    "powercontext_revision_no_update": _sqlite_refuse(
        "powercontext_revision_no_update",
        "UPDATE",
        REVISION_TABLE,
        "artifact revisions are immutable; only an erasure blanks their texts",
        f"NOT ({_erasure_allowed('revision', pg=False)})",
    ),
    "powercontext_revision_no_delete": _sqlite_refuse(
        "powercontext_revision_no_delete", "DELETE", REVISION_TABLE, "artifact revisions are immutable"
    ),
    "powercontext_revision_append_only": _sqlite_refuse(
        "powercontext_revision_append_only",
        "INSERT",
        REVISION_TABLE,
        "a revision is inserted only as the next revision of its artifact",
        f"NEW.revision IS NOT {_SQLITE_HEAD} + 1 OR EXISTS (SELECT 1 FROM {REVISION_TABLE} WHERE id = NEW.id "
        "OR (artifact_id = NEW.artifact_id AND revision = NEW.revision))",
    ),
    "powercontext_entry_version_no_update": _sqlite_refuse(
        "powercontext_entry_version_no_update",
        "UPDATE",
        ENTRY_VERSION_TABLE,
        "memory entry versions are immutable; one is retired only by the write of the revision retiring it",
        f"NOT (OLD.retired_in_revision IS NULL AND NEW.retired_in_revision IS {_SQLITE_HEAD} "
        f"AND {_within('retired_ordinal', 'entries_retired', 'retired_in_revision', REVISION_TABLE)} "
        f"AND NOT ({_sqlite_changed(ENTRY_FROZEN_COLUMNS)}) "
        f"AND NOT EXISTS (SELECT 1 FROM {ENTRY_VERSION_TABLE} WHERE artifact_id = NEW.artifact_id "
        "AND retired_in_revision = NEW.retired_in_revision AND retired_ordinal = NEW.retired_ordinal "
        f"AND id IS NOT OLD.id)) AND NOT ({_erasure_allowed('entry_version', pg=False)})",
    ),
    "powercontext_entry_version_no_delete": _sqlite_refuse(
        "powercontext_entry_version_no_delete", "DELETE", ENTRY_VERSION_TABLE, "memory entry versions are immutable"
    ),
    "powercontext_entry_version_append_only": _sqlite_refuse(
        "powercontext_entry_version_append_only",
        "INSERT",
        ENTRY_VERSION_TABLE,
        "an entry version is inserted only live, into the head revision, among the entries it declares, "
        "as a new version of an entry",
        f"NEW.retired_in_revision IS NOT NULL OR NEW.retired_ordinal IS NOT NULL "
        f"OR NEW.born_in_revision IS NOT {_SQLITE_HEAD} "
        f"OR NOT {_within('born_ordinal', 'entries_born', 'born_in_revision', REVISION_TABLE)} "
        f"OR EXISTS (SELECT 1 FROM {ENTRY_VERSION_TABLE} WHERE id = NEW.id OR (artifact_id = NEW.artifact_id "
        "AND (version_id = NEW.version_id OR (entry_id = NEW.entry_id AND retired_in_revision IS NULL)))) "
        # Apart, so that each lookup is one index's: joined to the ORs above, SQLite scanned the artifact's versions.
        f"OR EXISTS (SELECT 1 FROM {ENTRY_VERSION_TABLE} WHERE artifact_id = NEW.artifact_id "
        "AND born_in_revision = NEW.born_in_revision AND born_ordinal = NEW.born_ordinal)",
    ),
    "powercontext_artifact_guard": _sqlite_refuse(
        "powercontext_artifact_guard",
        "UPDATE",
        ARTIFACT_TABLE,
        "an artifact keeps its identity; its head moves forward by one onto an existing revision",
        f"{_sqlite_changed(ARTIFACT_FROZEN_COLUMNS)} OR (NEW.head_revision IS NOT OLD.head_revision "
        "AND NOT (NEW.head_revision = OLD.head_revision + 1 "
        f"AND EXISTS (SELECT 1 FROM {REVISION_TABLE} WHERE artifact_id = OLD.id AND revision = NEW.head_revision)))",
    ),
    "powercontext_artifact_insert": _sqlite_refuse(
        "powercontext_artifact_insert",
        "INSERT",
        ARTIFACT_TABLE,
        "a new artifact starts without revisions and never replaces another",
        f"NEW.head_revision IS NOT 0 OR EXISTS (SELECT 1 FROM {ARTIFACT_TABLE} WHERE id = NEW.id OR "
        "(scope_id = NEW.scope_id AND family = NEW.family AND artifact_id = NEW.artifact_id))",
    ),
    "powercontext_artifact_no_delete": _sqlite_refuse(
        "powercontext_artifact_no_delete", "DELETE", ARTIFACT_TABLE, "an artifact is never deleted"
    ),
    "powercontext_scope_guard": _sqlite_refuse(
        "powercontext_scope_guard",
        "UPDATE",
        SCOPE_TABLE,
        "a scope id never changes",
        _sqlite_changed(SCOPE_FROZEN_COLUMNS),
    ),
    "powercontext_scope_insert": _sqlite_refuse(
        "powercontext_scope_insert",
        "INSERT",
        SCOPE_TABLE,
        "a new scope never replaces another",
        f"EXISTS (SELECT 1 FROM {SCOPE_TABLE} WHERE id = NEW.id OR scope_id = NEW.scope_id)",
    ),
    "powercontext_scope_authority_insert": _sqlite_refuse(
        "powercontext_scope_authority_insert", "INSERT", SCOPE_TABLE, _UNKNOWN_TIER_MESSAGE, _UNKNOWN_TIER
    ),
    "powercontext_scope_authority_update": _sqlite_refuse(
        "powercontext_scope_authority_update", "UPDATE", SCOPE_TABLE, _UNKNOWN_TIER_MESSAGE, _UNKNOWN_TIER
    ),
    "powercontext_scope_no_delete": _sqlite_refuse(
        "powercontext_scope_no_delete",
        "DELETE",
        SCOPE_TABLE,
        "a scope holding artifacts is never deleted",
        f"EXISTS (SELECT 1 FROM {ARTIFACT_TABLE} WHERE scope_id = OLD.id)",
    ),
    "powercontext_api_key_guard": _sqlite_refuse(
        "powercontext_api_key_guard",
        "UPDATE",
        API_KEY_TABLE,
        "an API key keeps its id and hash, and its revocation is final",
        f"{_sqlite_changed(API_KEY_FROZEN_COLUMNS)} "
        "OR (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS NOT OLD.revoked_at) "
        f"OR EXISTS (SELECT 1 FROM {API_KEY_TABLE} WHERE name = NEW.name AND id IS NOT OLD.id)",
    ),
    "powercontext_api_key_insert": _sqlite_refuse(
        "powercontext_api_key_insert",
        "INSERT",
        API_KEY_TABLE,
        "a new API key never replaces another",
        f"EXISTS (SELECT 1 FROM {API_KEY_TABLE} WHERE id = NEW.id OR key_sha256 = NEW.key_sha256 OR name = NEW.name)",
    ),
    "powercontext_api_key_no_delete": _sqlite_refuse(
        "powercontext_api_key_no_delete",
        "DELETE",
        API_KEY_TABLE,
        "a revoked API key is never deleted",
        "OLD.revoked_at IS NOT NULL",
    ),
    # Erasure records (migration 0020): append-only, each the next of their chain.
    "powercontext_erasure_no_update": _sqlite_refuse(
        "powercontext_erasure_no_update", "UPDATE", ERASURE_TABLE, "erasure records are immutable"
    ),
    "powercontext_erasure_no_delete": _sqlite_refuse(
        "powercontext_erasure_no_delete", "DELETE", ERASURE_TABLE, "erasure records are immutable"
    ),
    "powercontext_erasure_append_only": _sqlite_refuse(
        "powercontext_erasure_append_only",
        "INSERT",
        ERASURE_TABLE,
        "an erasure record is inserted only as the next record of the erasure chain",
        f"NOT ({_erasure_next(ERASURE_TABLE, pg=False)}) OR EXISTS (SELECT 1 FROM {ERASURE_TABLE} WHERE id = NEW.id)",
    ),
    # Nothing above the head (migration 0019): see SQLITE_REVISION_ABOVE_HEAD.
    "powercontext_revision_awaits_head": _sqlite_after(
        "powercontext_revision_awaits_head",
        "INSERT",
        REVISION_TABLE,
        f"INSERT INTO {REVISION_ABOVE_HEAD_TABLE} (artifact_id, revision, refuses_commit) "
        "VALUES (NEW.artifact_id, NEW.revision, 0)",
    ),
    "powercontext_artifact_head_reached": _sqlite_after(
        "powercontext_artifact_head_reached",
        "UPDATE",
        ARTIFACT_TABLE,
        f"DELETE FROM {REVISION_ABOVE_HEAD_TABLE} WHERE artifact_id = NEW.id AND revision <= NEW.head_revision",
        "NEW.head_revision IS NOT OLD.head_revision",
    ),
}
SQLITE_INSTALL = [SQLITE_REVISION_ABOVE_HEAD, *SQLITE_TRIGGERS.values()]
SQLITE_UNINSTALL = [f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS]


def _pg_raise(message: str) -> str:
    return f"RAISE EXCEPTION '{message}' USING ERRCODE = 'integrity_constraint_violation';"


_PG_ARTIFACT, _PG_REVISION = pg_table(ARTIFACT_TABLE), pg_table(REVISION_TABLE)
_PG_HEAD = _head(_PG_ARTIFACT)
POSTGRESQL_FUNCTIONS = [
    pg_trigger_function(
        "powercontext_refuse_change",
        "RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';",
    ),
    pg_trigger_function(
        "powercontext_refuse_truncate",
        "RAISE EXCEPTION '% is never truncated: history and revocations depend on its rows', TG_TABLE_NAME "
        "USING ERRCODE = 'integrity_constraint_violation';",
    ),
    pg_trigger_function(
        "powercontext_revision_change_guard",
        f"IF TG_OP = 'UPDATE' AND {_erasure_allowed('revision', pg=True)} THEN RETURN NEW; END IF;\n"
        "RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';",
    ),
    pg_trigger_function(
        "powercontext_erasure_guard",
        f"IF {_erasure_next(pg_table(ERASURE_TABLE), pg=True)} THEN RETURN NEW; END IF;\n"
        + _pg_raise("an erasure record is inserted only as the next record of the erasure chain"),
    ),
    pg_trigger_function(
        "powercontext_revision_guard",
        f"IF NEW.revision IS DISTINCT FROM {_PG_HEAD} + 1 THEN "
        f"{_pg_raise('a revision is inserted only as the next revision of its artifact')} END IF;\nRETURN NEW;",
    ),
    pg_trigger_function(
        "powercontext_revision_head_check",
        f"IF NOT COALESCE(NEW.revision <= {_PG_HEAD}, FALSE) THEN "
        f"{_pg_raise('a revision commits only with the head of its artifact moved onto it')} END IF;\nRETURN NULL;",
    ),
    pg_trigger_function(
        "powercontext_entry_version_guard",
        "IF TG_OP = 'INSERT' THEN\n"
        "  IF NEW.retired_in_revision IS NULL AND NEW.retired_ordinal IS NULL "
        f"AND NEW.born_in_revision IS NOT DISTINCT FROM {_PG_HEAD} "
        f"AND {_within('born_ordinal', 'entries_born', 'born_in_revision', _PG_REVISION)} THEN RETURN NEW; END IF;\n"
        "  "
        + _pg_raise("an entry version is inserted only live, into the head revision, among the entries it declares")
        + "\nEND IF;\n"
        f"IF TG_OP = 'UPDATE' AND OLD.retired_in_revision IS NULL AND NEW.retired_in_revision = {_PG_HEAD} "
        f"AND {_within('retired_ordinal', 'entries_retired', 'retired_in_revision', _PG_REVISION)} "
        f"AND NOT ({_pg_changed(ENTRY_FROZEN_COLUMNS)}) THEN RETURN NEW; END IF;\n"
        f"IF TG_OP = 'UPDATE' AND {_erasure_allowed('entry_version', pg=True)} THEN RETURN NEW; END IF;\n"
        + _pg_raise(
            "memory entry versions are immutable; one is retired only by the write of the revision retiring it"
        ),
    ),
    pg_trigger_function(
        "powercontext_artifact_guard",
        "IF TG_OP = 'DELETE' THEN\n"
        "  " + _pg_raise("an artifact is never deleted") + "\nEND IF;\n"
        "IF TG_OP = 'INSERT' THEN\n"
        "  IF NEW.head_revision = 0 THEN RETURN NEW; END IF;\n"
        "  " + _pg_raise("a new artifact starts without revisions") + "\nEND IF;\n"
        f"IF {_pg_changed(ARTIFACT_FROZEN_COLUMNS)} THEN {_pg_raise('an artifact keeps its identity')} END IF;\n"
        "IF NEW.head_revision IS DISTINCT FROM OLD.head_revision AND NOT (NEW.head_revision = OLD.head_revision + 1 "
        f"AND EXISTS (SELECT 1 FROM {_PG_REVISION} WHERE artifact_id = OLD.id AND revision = NEW.head_revision)) "
        f"THEN {_pg_raise('an artifact head moves forward by one onto an existing revision')} END IF;\n"
        "RETURN NEW;",
    ),
    pg_trigger_function(
        "powercontext_scope_guard",
        "IF TG_OP = 'DELETE' THEN\n"
        f"  IF EXISTS (SELECT 1 FROM {_PG_ARTIFACT} WHERE scope_id = OLD.id) THEN "
        f"{_pg_raise('a scope holding artifacts is never deleted')} END IF;\n"
        "  RETURN OLD;\nEND IF;\n"
        f"IF {_pg_changed(SCOPE_FROZEN_COLUMNS)} THEN {_pg_raise('a scope id never changes')} END IF;\nRETURN NEW;",
    ),
    pg_trigger_function(
        "powercontext_scope_authority_guard",
        f"IF {_UNKNOWN_TIER} THEN {_pg_raise(_UNKNOWN_TIER_MESSAGE)} END IF;\nRETURN NEW;",
    ),
    pg_trigger_function(
        "powercontext_api_key_guard",
        "IF TG_OP = 'DELETE' THEN\n"
        f"  IF OLD.revoked_at IS NOT NULL THEN {_pg_raise('a revoked API key is never deleted')} END IF;\n"
        "  RETURN OLD;\nEND IF;\n"
        f"IF {_pg_changed(API_KEY_FROZEN_COLUMNS)} THEN {_pg_raise('an API key keeps its id and hash')} END IF;\n"
        "IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN "
        f"{_pg_raise('the revocation of an API key is final')} END IF;\nRETURN NEW;",
    ),
]

POSTGRESQL_TRIGGERS = {
    "powercontext_revision_immutable": (
        REVISION_TABLE,
        "BEFORE UPDATE OR DELETE",
        "ROW",
        "powercontext_revision_change_guard",
    ),
    "powercontext_revision_append_only": (REVISION_TABLE, "BEFORE INSERT", "ROW", "powercontext_revision_guard"),
    "powercontext_revision_no_truncate": (REVISION_TABLE, "BEFORE TRUNCATE", "STATEMENT", "powercontext_refuse_change"),
    "powercontext_entry_version_immutable": (
        ENTRY_VERSION_TABLE,
        "BEFORE INSERT OR UPDATE OR DELETE",
        "ROW",
        "powercontext_entry_version_guard",
    ),
    "powercontext_entry_version_no_truncate": (
        ENTRY_VERSION_TABLE,
        "BEFORE TRUNCATE",
        "STATEMENT",
        "powercontext_refuse_change",
    ),
    "powercontext_artifact_guard": (
        ARTIFACT_TABLE,
        "BEFORE INSERT OR UPDATE OR DELETE",
        "ROW",
        "powercontext_artifact_guard",
    ),
    "powercontext_artifact_no_truncate": (
        ARTIFACT_TABLE,
        "BEFORE TRUNCATE",
        "STATEMENT",
        "powercontext_refuse_truncate",
    ),
    "powercontext_scope_guard": (SCOPE_TABLE, "BEFORE UPDATE OR DELETE", "ROW", "powercontext_scope_guard"),
    "powercontext_scope_authority": (
        SCOPE_TABLE,
        "BEFORE INSERT OR UPDATE",
        "ROW",
        "powercontext_scope_authority_guard",
    ),
    "powercontext_scope_no_truncate": (SCOPE_TABLE, "BEFORE TRUNCATE", "STATEMENT", "powercontext_refuse_truncate"),
    "powercontext_api_key_guard": (API_KEY_TABLE, "BEFORE UPDATE OR DELETE", "ROW", "powercontext_api_key_guard"),
    "powercontext_api_key_no_truncate": (API_KEY_TABLE, "BEFORE TRUNCATE", "STATEMENT", "powercontext_refuse_truncate"),
    "powercontext_erasure_immutable": (ERASURE_TABLE, "BEFORE UPDATE OR DELETE", "ROW", "powercontext_refuse_change"),
    "powercontext_erasure_append_only": (ERASURE_TABLE, "BEFORE INSERT", "ROW", "powercontext_erasure_guard"),
    "powercontext_erasure_no_truncate": (ERASURE_TABLE, "BEFORE TRUNCATE", "STATEMENT", "powercontext_refuse_truncate"),
}
POSTGRESQL_DEFERRED_TRIGGERS = {
    "powercontext_revision_under_head": (REVISION_TABLE, "AFTER INSERT", "ROW", "powercontext_revision_head_check"),
}
"""Constraint triggers checked at the commit (or at ``SET CONSTRAINTS … IMMEDIATE``): a revision is inserted before
its head moves onto it, so only the commit can tell the services' write from a revision left above the head.
PostgreSQL cannot ``CREATE OR REPLACE`` a constraint trigger: installing drops it first."""

POSTGRESQL_INSTALL = (
    POSTGRESQL_FUNCTIONS
    + [
        f"CREATE OR REPLACE TRIGGER {name} {event} ON {table} FOR EACH {level} EXECUTE FUNCTION {function}()"
        for name, (table, event, level, function) in POSTGRESQL_TRIGGERS.items()
    ]
    + [
        statement
        for name, (table, event, level, function) in POSTGRESQL_DEFERRED_TRIGGERS.items()
        for statement in (
            f"DROP TRIGGER IF EXISTS {name} ON {table}",
            f"CREATE CONSTRAINT TRIGGER {name} {event} ON {table} DEFERRABLE INITIALLY DEFERRED "
            f"FOR EACH {level} EXECUTE FUNCTION {function}()",
        )
    ]
)
POSTGRESQL_UNINSTALL = [
    f"DROP TRIGGER IF EXISTS {name} ON {table}"
    for name, (table, *_) in {**POSTGRESQL_TRIGGERS, **POSTGRESQL_DEFERRED_TRIGGERS}.items()
]

STATEMENTS = {
    "sqlite": (SQLITE_INSTALL, SQLITE_UNINSTALL),
    "postgresql": (POSTGRESQL_INSTALL, POSTGRESQL_UNINSTALL),
}


def install_triggers(connection) -> None:
    """Create the immutability triggers on this connection's database (idempotent)."""
    triggers_run(connection, STATEMENTS, install=True)


def uninstall_triggers(connection) -> None:
    """Drop the triggers: only for ``flush`` and benchmark bulk loads (migrations run their own frozen copy)."""
    triggers_run(connection, STATEMENTS, install=False)
