"""History that proves itself: sealed revisions, guarded deletes, fixed search paths, and a hash chain.

- ArtifactRevision gains ``entries_born`` / ``entries_retired`` (how many entry versions it births and retires) and
  ``chain_sha256`` (the revision chained to its predecessor); MemoryEntryVersion gains ``born_ordinal`` /
  ``retired_ordinal`` (its position among them, unique per revision). All nullable, so SQLite adds them with
  ALTER TABLE ADD COLUMN and the tables keep their triggers.
- The backfill gives every existing revision its counts and chain hash (vocabulary/history.py's
  ``revision_chain_sha256``, frozen below as ``_chain_sha256``), and the versions born and retired in each artifact's
  head revision their positions: every other revision is no longer a head, so nothing can be born into it any more.
- Then the triggers of artifacts/immutability.py and artifacts/recall/generation.py are installed, frozen here (both
  modules: ``FROZEN_FROM`` names them, ``INSTALL`` and ``UNINSTALL`` are keyed by module). On PostgreSQL their
  functions name every table as ``{schema}.<table>`` and run with ``SET search_path = pg_catalog, {schema},
  pg_temp``: ``{schema}`` is a placeholder that ``_run`` replaces with ``quote_ident(current_schema())`` when the
  migration runs, so the literal text installs in whatever schema the database uses.

Between this migration and the restart, workers of an older version cannot write memory entries (their revisions
declare no entries); every other read and write goes on (docs/deployment.md, Upgrades).

Reverse: the triggers 0004 and 0009 froze come back (read from those migrations, which are frozen too), then the
columns go.
"""

import hashlib
import importlib
import json

from django.db import migrations, models

FROZEN_FROM = ("artifacts.immutability", "artifacts.recall.generation")
"""The modules whose statements were frozen here (tests/api/test_trigger_migrations.py compares the latest freeze)."""

SCHEMA = "{schema}"

INSTALL = {
    "artifacts.immutability": {
        "sqlite": (
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_update BEFORE UPDATE ON "
                "artifacts_artifactrevision BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutable'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_delete BEFORE DELETE ON "
                "artifacts_artifactrevision BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutable'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_revision_append_only BEFORE INSERT ON "
                "artifacts_artifactrevision WHEN NEW.revision IS NOT (SELECT head_revision FROM artifacts_artifact "
                "WHERE id = NEW.artifact_id) + 1 OR EXISTS (SELECT 1 FROM artifacts_artifactrevision WHERE id = "
                "NEW.id) BEGIN SELECT RAISE(ABORT, 'a revision is inserted only as the next revision of its "
                "artifact'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_update BEFORE UPDATE ON "
                "artifacts_memoryentryversion WHEN NOT (OLD.retired_in_revision IS NULL AND "
                "NEW.retired_in_revision IS (SELECT head_revision FROM artifacts_artifact WHERE id = "
                "NEW.artifact_id) AND COALESCE(NEW.retired_ordinal BETWEEN 1 AND (SELECT COALESCE(entries_retired, "
                "0) FROM artifacts_artifactrevision WHERE artifact_id = NEW.artifact_id AND revision = "
                "NEW.retired_in_revision), FALSE) AND NOT (NEW.id IS NOT OLD.id OR NEW.artifact_id IS NOT "
                "OLD.artifact_id OR NEW.entry_id IS NOT OLD.entry_id OR NEW.version_id IS NOT OLD.version_id OR "
                "NEW.body IS NOT OLD.body OR NEW.content_sha256 IS NOT OLD.content_sha256 OR NEW.born_in_revision "
                "IS NOT OLD.born_in_revision OR NEW.created_at IS NOT OLD.created_at OR NEW.born_ordinal IS NOT "
                "OLD.born_ordinal)) BEGIN SELECT RAISE(ABORT, 'memory entry versions are immutable; one is retired "
                "only by the write of the revision retiring it'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_delete BEFORE DELETE ON "
                "artifacts_memoryentryversion BEGIN SELECT RAISE(ABORT, 'memory entry versions are immutable'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_append_only BEFORE INSERT ON "
                "artifacts_memoryentryversion WHEN NEW.retired_in_revision IS NOT NULL OR NEW.retired_ordinal IS "
                "NOT NULL OR NEW.born_in_revision IS NOT (SELECT head_revision FROM artifacts_artifact WHERE id = "
                "NEW.artifact_id) OR NOT COALESCE(NEW.born_ordinal BETWEEN 1 AND (SELECT COALESCE(entries_born, 0) "
                "FROM artifacts_artifactrevision WHERE artifact_id = NEW.artifact_id AND revision = "
                "NEW.born_in_revision), FALSE) OR EXISTS (SELECT 1 FROM artifacts_memoryentryversion WHERE id = "
                "NEW.id OR (artifact_id = NEW.artifact_id AND (version_id = NEW.version_id OR (entry_id = "
                "NEW.entry_id AND retired_in_revision IS NULL)))) BEGIN SELECT RAISE(ABORT, 'an entry version is "
                "inserted only live, into the head revision, among the entries it declares, as a new version of an "
                "entry'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_guard BEFORE UPDATE ON artifacts_artifact WHEN "
                "NEW.id IS NOT OLD.id OR NEW.scope_id IS NOT OLD.scope_id OR NEW.family IS NOT OLD.family OR "
                "NEW.artifact_id IS NOT OLD.artifact_id OR NEW.created_at IS NOT OLD.created_at OR "
                "(NEW.head_revision IS NOT OLD.head_revision AND NOT (NEW.head_revision = OLD.head_revision + 1 "
                "AND EXISTS (SELECT 1 FROM artifacts_artifactrevision WHERE artifact_id = OLD.id AND revision = "
                "NEW.head_revision))) BEGIN SELECT RAISE(ABORT, 'an artifact keeps its identity; its head moves "
                "forward by one onto an existing revision'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_insert BEFORE INSERT ON artifacts_artifact "
                "WHEN NEW.head_revision IS NOT 0 OR EXISTS (SELECT 1 FROM artifacts_artifact WHERE id = NEW.id OR "
                "(scope_id = NEW.scope_id AND family = NEW.family AND artifact_id = NEW.artifact_id)) BEGIN SELECT "
                "RAISE(ABORT, 'a new artifact starts without revisions and never replaces another'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_no_delete BEFORE DELETE ON artifacts_artifact "
                "BEGIN SELECT RAISE(ABORT, 'an artifact is never deleted'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_scope_guard BEFORE UPDATE ON artifacts_scope WHEN "
                "NEW.id IS NOT OLD.id OR NEW.scope_id IS NOT OLD.scope_id BEGIN SELECT RAISE(ABORT, 'a scope id "
                "never changes'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_scope_insert BEFORE INSERT ON artifacts_scope WHEN "
                "EXISTS (SELECT 1 FROM artifacts_scope WHERE id = NEW.id OR scope_id = NEW.scope_id) BEGIN SELECT "
                "RAISE(ABORT, 'a new scope never replaces another'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_scope_no_delete BEFORE DELETE ON artifacts_scope WHEN "
                "EXISTS (SELECT 1 FROM artifacts_artifact WHERE scope_id = OLD.id) BEGIN SELECT RAISE(ABORT, 'a "
                "scope holding artifacts is never deleted'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_api_key_guard BEFORE UPDATE ON artifacts_apikey WHEN "
                "NEW.id IS NOT OLD.id OR NEW.key_sha256 IS NOT OLD.key_sha256 OR (OLD.revoked_at IS NOT NULL AND "
                "NEW.revoked_at IS NOT OLD.revoked_at) BEGIN SELECT RAISE(ABORT, 'an API key keeps its id and "
                "hash, and its revocation is final'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_api_key_insert BEFORE INSERT ON artifacts_apikey WHEN "
                "EXISTS (SELECT 1 FROM artifacts_apikey WHERE id = NEW.id OR key_sha256 = NEW.key_sha256 OR name = "
                "NEW.name) BEGIN SELECT RAISE(ABORT, 'a new API key never replaces another'); END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_api_key_no_delete BEFORE DELETE ON artifacts_apikey "
                "WHEN OLD.revoked_at IS NOT NULL BEGIN SELECT RAISE(ABORT, 'a revoked API key is never deleted'); "
                "END"
            ),
        ),
        "postgresql": (
            (
                "CREATE OR REPLACE FUNCTION powercontext_refuse_change() RETURNS trigger LANGUAGE plpgsql SET "
                "search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = "
                "'integrity_constraint_violation';\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE FUNCTION powercontext_refuse_truncate() RETURNS trigger LANGUAGE plpgsql SET "
                "search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "RAISE EXCEPTION '% is never truncated: history and revocations depend on its rows', TG_TABLE_NAME "
                "USING ERRCODE = 'integrity_constraint_violation';\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE FUNCTION powercontext_revision_guard() RETURNS trigger LANGUAGE plpgsql SET "
                "search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "IF NEW.revision IS DISTINCT FROM (SELECT head_revision FROM {schema}.artifacts_artifact WHERE id "
                "= NEW.artifact_id) + 1 THEN RAISE EXCEPTION 'a revision is inserted only as the next revision of "
                "its artifact' USING ERRCODE = 'integrity_constraint_violation'; END IF;\n"
                "RETURN NEW;\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE FUNCTION powercontext_entry_version_guard() RETURNS trigger LANGUAGE plpgsql "
                "SET search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "IF TG_OP = 'INSERT' THEN\n"
                "  IF NEW.retired_in_revision IS NULL AND NEW.retired_ordinal IS NULL AND NEW.born_in_revision IS "
                "NOT DISTINCT FROM (SELECT head_revision FROM {schema}.artifacts_artifact WHERE id = "
                "NEW.artifact_id) AND COALESCE(NEW.born_ordinal BETWEEN 1 AND (SELECT COALESCE(entries_born, 0) "
                "FROM {schema}.artifacts_artifactrevision WHERE artifact_id = NEW.artifact_id AND revision = "
                "NEW.born_in_revision), FALSE) THEN RETURN NEW; END IF;\n"
                "  RAISE EXCEPTION 'an entry version is inserted only live, into the head revision, among the "
                "entries it declares' USING ERRCODE = 'integrity_constraint_violation';\n"
                "END IF;\n"
                "IF TG_OP = 'UPDATE' AND OLD.retired_in_revision IS NULL AND NEW.retired_in_revision = (SELECT "
                "head_revision FROM {schema}.artifacts_artifact WHERE id = NEW.artifact_id) AND "
                "COALESCE(NEW.retired_ordinal BETWEEN 1 AND (SELECT COALESCE(entries_retired, 0) FROM "
                "{schema}.artifacts_artifactrevision WHERE artifact_id = NEW.artifact_id AND revision = "
                "NEW.retired_in_revision), FALSE) AND NOT (NEW.id IS DISTINCT FROM OLD.id OR NEW.artifact_id IS "
                "DISTINCT FROM OLD.artifact_id OR NEW.entry_id IS DISTINCT FROM OLD.entry_id OR NEW.version_id IS "
                "DISTINCT FROM OLD.version_id OR NEW.body IS DISTINCT FROM OLD.body OR NEW.content_sha256 IS "
                "DISTINCT FROM OLD.content_sha256 OR NEW.born_in_revision IS DISTINCT FROM OLD.born_in_revision OR "
                "NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.born_ordinal IS DISTINCT FROM "
                "OLD.born_ordinal) THEN RETURN NEW; END IF;\n"
                "RAISE EXCEPTION 'memory entry versions are immutable; one is retired only by the write of the "
                "revision retiring it' USING ERRCODE = 'integrity_constraint_violation';\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE FUNCTION powercontext_artifact_guard() RETURNS trigger LANGUAGE plpgsql SET "
                "search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "IF TG_OP = 'DELETE' THEN\n"
                "  RAISE EXCEPTION 'an artifact is never deleted' USING ERRCODE = "
                "'integrity_constraint_violation';\n"
                "END IF;\n"
                "IF TG_OP = 'INSERT' THEN\n"
                "  IF NEW.head_revision = 0 THEN RETURN NEW; END IF;\n"
                "  RAISE EXCEPTION 'a new artifact starts without revisions' USING ERRCODE = "
                "'integrity_constraint_violation';\n"
                "END IF;\n"
                "IF NEW.id IS DISTINCT FROM OLD.id OR NEW.scope_id IS DISTINCT FROM OLD.scope_id OR NEW.family IS "
                "DISTINCT FROM OLD.family OR NEW.artifact_id IS DISTINCT FROM OLD.artifact_id OR NEW.created_at IS "
                "DISTINCT FROM OLD.created_at THEN RAISE EXCEPTION 'an artifact keeps its identity' USING ERRCODE "
                "= 'integrity_constraint_violation'; END IF;\n"
                "IF NEW.head_revision IS DISTINCT FROM OLD.head_revision AND NOT (NEW.head_revision = "
                "OLD.head_revision + 1 AND EXISTS (SELECT 1 FROM {schema}.artifacts_artifactrevision WHERE "
                "artifact_id = OLD.id AND revision = NEW.head_revision)) THEN RAISE EXCEPTION 'an artifact head "
                "moves forward by one onto an existing revision' USING ERRCODE = 'integrity_constraint_violation'; "
                "END IF;\n"
                "RETURN NEW;\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE FUNCTION powercontext_scope_guard() RETURNS trigger LANGUAGE plpgsql SET "
                "search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "IF TG_OP = 'DELETE' THEN\n"
                "  IF EXISTS (SELECT 1 FROM {schema}.artifacts_artifact WHERE scope_id = OLD.id) THEN RAISE "
                "EXCEPTION 'a scope holding artifacts is never deleted' USING ERRCODE = "
                "'integrity_constraint_violation'; END IF;\n"
                "  RETURN OLD;\n"
                "END IF;\n"
                "IF NEW.id IS DISTINCT FROM OLD.id OR NEW.scope_id IS DISTINCT FROM OLD.scope_id THEN RAISE "
                "EXCEPTION 'a scope id never changes' USING ERRCODE = 'integrity_constraint_violation'; END IF;\n"
                "RETURN NEW;\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE FUNCTION powercontext_api_key_guard() RETURNS trigger LANGUAGE plpgsql SET "
                "search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "IF TG_OP = 'DELETE' THEN\n"
                "  IF OLD.revoked_at IS NOT NULL THEN RAISE EXCEPTION 'a revoked API key is never deleted' USING "
                "ERRCODE = 'integrity_constraint_violation'; END IF;\n"
                "  RETURN OLD;\n"
                "END IF;\n"
                "IF NEW.id IS DISTINCT FROM OLD.id OR NEW.key_sha256 IS DISTINCT FROM OLD.key_sha256 THEN RAISE "
                "EXCEPTION 'an API key keeps its id and hash' USING ERRCODE = 'integrity_constraint_violation'; "
                "END IF;\n"
                "IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN RAISE "
                "EXCEPTION 'the revocation of an API key is final' USING ERRCODE = "
                "'integrity_constraint_violation'; END IF;\n"
                "RETURN NEW;\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_revision_immutable BEFORE UPDATE OR DELETE ON "
                "artifacts_artifactrevision FOR EACH ROW EXECUTE FUNCTION powercontext_refuse_change()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_revision_append_only BEFORE INSERT ON "
                "artifacts_artifactrevision FOR EACH ROW EXECUTE FUNCTION powercontext_revision_guard()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_revision_no_truncate BEFORE TRUNCATE ON "
                "artifacts_artifactrevision FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_change()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_entry_version_immutable BEFORE INSERT OR UPDATE OR DELETE "
                "ON artifacts_memoryentryversion FOR EACH ROW EXECUTE FUNCTION powercontext_entry_version_guard()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_entry_version_no_truncate BEFORE TRUNCATE ON "
                "artifacts_memoryentryversion FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_change()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_artifact_guard BEFORE INSERT OR UPDATE OR DELETE ON "
                "artifacts_artifact FOR EACH ROW EXECUTE FUNCTION powercontext_artifact_guard()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_artifact_no_truncate BEFORE TRUNCATE ON artifacts_artifact "
                "FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_scope_guard BEFORE UPDATE OR DELETE ON artifacts_scope FOR "
                "EACH ROW EXECUTE FUNCTION powercontext_scope_guard()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_scope_no_truncate BEFORE TRUNCATE ON artifacts_scope FOR "
                "EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_api_key_guard BEFORE UPDATE OR DELETE ON artifacts_apikey "
                "FOR EACH ROW EXECUTE FUNCTION powercontext_api_key_guard()"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_api_key_no_truncate BEFORE TRUNCATE ON artifacts_apikey "
                "FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
            ),
        ),
    },
    "artifacts.recall.generation": {
        "sqlite": (
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_update AFTER UPDATE ON "
                "artifacts_recallcorpusstat BEGIN UPDATE artifacts_recallcorpusstat SET generation = (random() & "
                "4611686018427387903) | 1 WHERE id = NEW.id; END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_insert AFTER INSERT ON "
                "artifacts_recallcorpusstat BEGIN UPDATE artifacts_recallcorpusstat SET generation = (random() & "
                "4611686018427387903) | 1 WHERE id = NEW.id; END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_head AFTER UPDATE ON "
                "artifacts_artifact WHEN NEW.head_revision IS NOT OLD.head_revision BEGIN UPDATE "
                "artifacts_recallcorpusstat SET generation = 0 WHERE scope_id = NEW.scope_id AND family = "
                "NEW.family; END"
            ),
            (
                "CREATE TRIGGER IF NOT EXISTS powercontext_corpus_generation_retired AFTER UPDATE ON "
                "artifacts_memoryentryversion WHEN NEW.retired_in_revision IS NOT OLD.retired_in_revision BEGIN "
                "UPDATE artifacts_recallcorpusstat SET generation = 0 WHERE family = 'memory' AND scope_id = "
                "(SELECT scope_id FROM artifacts_artifact WHERE id = NEW.artifact_id); END"
            ),
        ),
        "postgresql": (
            (
                "CREATE OR REPLACE FUNCTION powercontext_corpus_generation() RETURNS trigger LANGUAGE plpgsql SET "
                "search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "NEW.generation := floor(random() * 4611686018427387903)::bigint + 1;\n"
                "RETURN NEW;\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_corpus_generation BEFORE INSERT OR UPDATE ON "
                "artifacts_recallcorpusstat FOR EACH ROW EXECUTE FUNCTION powercontext_corpus_generation()"
            ),
            (
                "CREATE OR REPLACE FUNCTION powercontext_corpus_generation_head() RETURNS trigger LANGUAGE plpgsql "
                "SET search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "IF NEW.head_revision IS DISTINCT FROM OLD.head_revision THEN\n"
                "  UPDATE {schema}.artifacts_recallcorpusstat SET generation = 0 WHERE scope_id = NEW.scope_id AND "
                "family = NEW.family;\n"
                "END IF;\n"
                "RETURN NULL;\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_corpus_generation_head AFTER UPDATE ON artifacts_artifact "
                "FOR EACH ROW EXECUTE FUNCTION powercontext_corpus_generation_head()"
            ),
            (
                "CREATE OR REPLACE FUNCTION powercontext_corpus_generation_retired() RETURNS trigger LANGUAGE "
                "plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\n"
                "BEGIN\n"
                "IF NEW.retired_in_revision IS DISTINCT FROM OLD.retired_in_revision THEN\n"
                "  UPDATE {schema}.artifacts_recallcorpusstat SET generation = 0 WHERE family = 'memory' AND "
                "scope_id = (SELECT scope_id FROM {schema}.artifacts_artifact WHERE id = NEW.artifact_id);\n"
                "END IF;\n"
                "RETURN NULL;\n"
                "END $$"
            ),
            (
                "CREATE OR REPLACE TRIGGER powercontext_corpus_generation_retired AFTER UPDATE ON "
                "artifacts_memoryentryversion FOR EACH ROW EXECUTE FUNCTION "
                "powercontext_corpus_generation_retired()"
            ),
        ),
    },
}
UNINSTALL = {
    "artifacts.immutability": {
        "sqlite": (
            "DROP TRIGGER IF EXISTS powercontext_revision_no_update",
            "DROP TRIGGER IF EXISTS powercontext_revision_no_delete",
            "DROP TRIGGER IF EXISTS powercontext_revision_append_only",
            "DROP TRIGGER IF EXISTS powercontext_entry_version_no_update",
            "DROP TRIGGER IF EXISTS powercontext_entry_version_no_delete",
            "DROP TRIGGER IF EXISTS powercontext_entry_version_append_only",
            "DROP TRIGGER IF EXISTS powercontext_artifact_guard",
            "DROP TRIGGER IF EXISTS powercontext_artifact_insert",
            "DROP TRIGGER IF EXISTS powercontext_artifact_no_delete",
            "DROP TRIGGER IF EXISTS powercontext_scope_guard",
            "DROP TRIGGER IF EXISTS powercontext_scope_insert",
            "DROP TRIGGER IF EXISTS powercontext_scope_no_delete",
            "DROP TRIGGER IF EXISTS powercontext_api_key_guard",
            "DROP TRIGGER IF EXISTS powercontext_api_key_insert",
            "DROP TRIGGER IF EXISTS powercontext_api_key_no_delete",
        ),
        "postgresql": (
            "DROP TRIGGER IF EXISTS powercontext_revision_immutable ON artifacts_artifactrevision",
            "DROP TRIGGER IF EXISTS powercontext_revision_append_only ON artifacts_artifactrevision",
            "DROP TRIGGER IF EXISTS powercontext_revision_no_truncate ON artifacts_artifactrevision",
            "DROP TRIGGER IF EXISTS powercontext_entry_version_immutable ON artifacts_memoryentryversion",
            "DROP TRIGGER IF EXISTS powercontext_entry_version_no_truncate ON artifacts_memoryentryversion",
            "DROP TRIGGER IF EXISTS powercontext_artifact_guard ON artifacts_artifact",
            "DROP TRIGGER IF EXISTS powercontext_artifact_no_truncate ON artifacts_artifact",
            "DROP TRIGGER IF EXISTS powercontext_scope_guard ON artifacts_scope",
            "DROP TRIGGER IF EXISTS powercontext_scope_no_truncate ON artifacts_scope",
            "DROP TRIGGER IF EXISTS powercontext_api_key_guard ON artifacts_apikey",
            "DROP TRIGGER IF EXISTS powercontext_api_key_no_truncate ON artifacts_apikey",
        ),
    },
    "artifacts.recall.generation": {
        "sqlite": (
            "DROP TRIGGER IF EXISTS powercontext_corpus_generation_update",
            "DROP TRIGGER IF EXISTS powercontext_corpus_generation_insert",
            "DROP TRIGGER IF EXISTS powercontext_corpus_generation_head",
            "DROP TRIGGER IF EXISTS powercontext_corpus_generation_retired",
        ),
        "postgresql": (
            "DROP TRIGGER IF EXISTS powercontext_corpus_generation_retired ON artifacts_memoryentryversion",
            "DROP FUNCTION IF EXISTS powercontext_corpus_generation_retired()",
            "DROP TRIGGER IF EXISTS powercontext_corpus_generation_head ON artifacts_artifact",
            "DROP FUNCTION IF EXISTS powercontext_corpus_generation_head()",
            "DROP TRIGGER IF EXISTS powercontext_corpus_generation ON artifacts_recallcorpusstat",
            "DROP FUNCTION IF EXISTS powercontext_corpus_generation()",
        ),
    },
}


def _canonical_json(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _chain_sha256(*, previous_chain, scope_id, family, artifact_id, revision, content_sha256, author, born, retired):
    """vocabulary.history.revision_chain_sha256 (encoding 1), frozen; born: (entry_id, version_id, content_sha256)
    triples, retired: (entry_id, version_id) pairs."""
    payload = {
        "encoding": 1,
        "scope_id": scope_id,
        "family": family,
        "artifact_id": artifact_id,
        "revision": revision,
        "previous": previous_chain,
        "content_sha256": content_sha256,
        "author": author,
        "added": sorted([entry_id, version_id, sha] for entry_id, version_id, sha in born),
        "retired": sorted([entry_id, version_id] for entry_id, version_id in retired),
    }
    return hashlib.sha256(_canonical_json(payload).encode("utf-8")).hexdigest()


def _run(schema_editor, statements) -> None:
    connection = schema_editor.connection
    if connection.vendor not in statements:
        raise NotImplementedError(f"triggers are not written for {connection.vendor}")
    schema = SCHEMA
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT quote_ident(current_schema())")
            schema = cursor.fetchone()[0]
    for statement in statements[connection.vendor]:
        # No parameters: a "%" in the SQL is literal.
        schema_editor.execute(statement.replace(SCHEMA, schema), params=None)


_BATCH = 1000
"""Artifacts backfilled per round of statements."""


def _backfill(connection) -> None:
    """Counts and chain hash of every revision; positions of the versions changed in each head revision."""
    last = 0
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT a.id, s.scope_id, a.family, a.artifact_id, a.head_revision FROM artifacts_artifact a "
                "JOIN artifacts_scope s ON s.id = a.scope_id WHERE a.id > %s ORDER BY a.id LIMIT %s",
                [last, _BATCH],
            )
            artifacts = cursor.fetchall()
            if not artifacts:
                return
            first, last = artifacts[0][0], artifacts[-1][0]
            span = [first, last]
            cursor.execute(
                "SELECT id, artifact_id, revision, content_sha256, author FROM artifacts_artifactrevision "
                "WHERE artifact_id BETWEEN %s AND %s ORDER BY artifact_id, revision",
                span,
            )
            revisions = cursor.fetchall()
            born, retired = {}, {}
            cursor.execute(
                "SELECT id, artifact_id, entry_id, version_id, content_sha256, born_in_revision, retired_in_revision "
                "FROM artifacts_memoryentryversion WHERE artifact_id BETWEEN %s AND %s ORDER BY id",
                span,
            )
            for pk, artifact, entry_id, version_id, sha, born_in, retired_in in cursor.fetchall():
                born.setdefault((artifact, born_in), []).append((pk, entry_id, version_id, sha))
                if retired_in is not None:
                    retired.setdefault((artifact, retired_in), []).append((pk, entry_id, version_id))
            identity = {pk: (scope_id, family, artifact_id, head) for pk, scope_id, family, artifact_id, head in artifacts}
            updates, born_positions, retired_positions = [], [], []
            previous_artifact, chain = None, ""
            for pk, artifact, number, content_sha256, author in revisions:
                if artifact != previous_artifact:
                    previous_artifact, chain = artifact, ""
                scope_id, family, artifact_id, head = identity[artifact]
                born_here = born.get((artifact, number), [])
                retired_here = retired.get((artifact, number), [])
                chain = _chain_sha256(
                    previous_chain=chain,
                    scope_id=scope_id,
                    family=family,
                    artifact_id=artifact_id,
                    revision=number,
                    content_sha256=content_sha256,
                    author=author,
                    born=[v[1:] for v in born_here],
                    retired=[v[1:] for v in retired_here],
                )
                updates.append((len(born_here), len(retired_here), chain, pk))
                if number == head:
                    born_positions += [(k, v[0]) for k, v in enumerate(born_here, 1)]
                    retired_positions += [(k, v[0]) for k, v in enumerate(retired_here, 1)]
            cursor.executemany(
                "UPDATE artifacts_artifactrevision SET entries_born = %s, entries_retired = %s, chain_sha256 = %s "
                "WHERE id = %s",
                updates,
            )
            cursor.executemany("UPDATE artifacts_memoryentryversion SET born_ordinal = %s WHERE id = %s", born_positions)
            cursor.executemany(
                "UPDATE artifacts_memoryentryversion SET retired_ordinal = %s WHERE id = %s", retired_positions
            )


def _forward(apps, schema_editor):
    guards, generation = FROZEN_FROM
    _run(schema_editor, UNINSTALL[guards])  # the backfill updates revisions and entry versions
    _backfill(schema_editor.connection)
    _run(schema_editor, INSTALL[guards])
    _run(schema_editor, INSTALL[generation])  # CREATE OR REPLACE: the functions gain their fixed search path


def _reverse(apps, schema_editor):
    guards, _ = FROZEN_FROM
    _run(schema_editor, UNINSTALL[guards])
    if schema_editor.connection.vendor == "postgresql":
        for function in ("powercontext_refuse_truncate", "powercontext_api_key_guard"):
            schema_editor.execute(f"DROP FUNCTION IF EXISTS {function}()", params=None)
    # The sets 0004 and 0009 froze (migrations never change, so reading them is reading frozen text).
    for name in ("0004_history_guards", "0009_corpus_generation_head_and_retirement"):
        _run(schema_editor, importlib.import_module(f"artifacts.migrations.{name}").INSTALL)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0010_operator_permissions")]

    operations = [
        migrations.AddField(
            model_name="artifactrevision",
            name="chain_sha256",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="artifactrevision",
            name="entries_born",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="artifactrevision",
            name="entries_retired",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memoryentryversion",
            name="born_ordinal",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memoryentryversion",
            name="retired_ordinal",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name="memoryentryversion",
            constraint=models.UniqueConstraint(
                condition=models.Q(("born_ordinal__isnull", False)),
                fields=("artifact", "born_in_revision", "born_ordinal"),
                name="entry_born_ordinal_unique",
            ),
        ),
        migrations.AddConstraint(
            model_name="memoryentryversion",
            constraint=models.UniqueConstraint(
                condition=models.Q(("retired_ordinal__isnull", False)),
                fields=("artifact", "retired_in_revision", "retired_ordinal"),
                name="entry_retired_ordinal_unique",
            ),
        ),
        migrations.RunPython(_forward, _reverse),
    ]
