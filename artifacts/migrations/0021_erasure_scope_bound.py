"""A scope's erasure record names only the rows the scope held when it was erased (issue 51, item 3).

Migration 0020 let any row of an erased scope be blanked under its record's cover, so a row written into the scope
later could be blanked (and verify_history took it for erased) without a record of its own. The record now keeps the
largest revision and entry version ids it erased (``revisions_through``, ``versions_through``, covered by its chain
hash) and the guards allow a scope's record to cover only rows up to them. The statements are
artifacts/immutability.py's, frozen here; the forward step drops the set 0020 installed and installs this one, the
reverse step puts 0020's back.
"""

import importlib

from django.db import migrations, models

FROZEN_FROM = "artifacts.immutability"
"""The module whose statements were frozen here (tests/api/test_trigger_migrations.py compares the latest freeze)."""

_PREVIOUS = importlib.import_module("artifacts.migrations.0020_erasure")

INSTALL = {
    "sqlite": (
        (
            "CREATE TABLE IF NOT EXISTS powercontext_revision_above_head (artifact_id integer NOT"
            " NULL, revision integer NOT NULL, refuses_commit integer NOT NULL REFERENCES "
            "artifacts_artifact (id) DEFERRABLE INITIALLY DEFERRED, PRIMARY KEY (artifact_id, "
            "revision))"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_update BEFORE UPDATE ON "
            "artifacts_artifactrevision WHEN NOT (NOT (NEW.id IS NOT OLD.id OR NEW.artifact_id IS"
            " NOT OLD.artifact_id OR NEW.revision IS NOT OLD.revision OR NEW.content_sha256 IS "
            "NOT OLD.content_sha256 OR NEW.author IS NOT OLD.author OR NEW.created_at IS NOT "
            "OLD.created_at OR NEW.entries_born IS NOT OLD.entries_born OR NEW.entries_retired IS"
            " NOT OLD.entries_retired OR NEW.chain_sha256 IS NOT OLD.chain_sha256) AND (NEW.body "
            "IS OLD.body OR COALESCE(NEW.body = '', FALSE)) AND (NEW.title IS OLD.title OR "
            "COALESCE(NEW.title = '', FALSE)) AND (NEW.summary IS OLD.summary OR "
            "COALESCE(NEW.summary = '', FALSE)) AND (EXISTS (SELECT 1 FROM artifacts_erasure e "
            "WHERE e.kind = 'scope' AND e.scope_id = (SELECT scope_id FROM artifacts_artifact "
            "WHERE id = OLD.artifact_id) AND OLD.id <= e.revisions_through) OR EXISTS (SELECT 1 "
            "FROM artifacts_erasure e WHERE e.artifact_id = OLD.artifact_id AND e.revision = "
            "OLD.revision AND e.kind = 'revision'))) BEGIN SELECT RAISE(ABORT, 'artifact "
            "revisions are immutable; only an erasure blanks their texts'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_delete BEFORE DELETE ON "
            "artifacts_artifactrevision BEGIN SELECT RAISE(ABORT, 'artifact revisions are "
            "immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_append_only BEFORE INSERT ON "
            "artifacts_artifactrevision WHEN NEW.revision IS NOT (SELECT head_revision FROM "
            "artifacts_artifact WHERE id = NEW.artifact_id) + 1 OR EXISTS (SELECT 1 FROM "
            "artifacts_artifactrevision WHERE id = NEW.id OR (artifact_id = NEW.artifact_id AND "
            "revision = NEW.revision)) BEGIN SELECT RAISE(ABORT, 'a revision is inserted only as "
            "the next revision of its artifact'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_update BEFORE UPDATE ON "
            "artifacts_memoryentryversion WHEN NOT (OLD.retired_in_revision IS NULL AND "
            "NEW.retired_in_revision IS (SELECT head_revision FROM artifacts_artifact WHERE id = "
            "NEW.artifact_id) AND COALESCE(NEW.retired_ordinal BETWEEN 1 AND (SELECT "
            "COALESCE(entries_retired, 0) FROM artifacts_artifactrevision WHERE artifact_id = "
            "NEW.artifact_id AND revision = NEW.retired_in_revision), FALSE) AND NOT (NEW.id IS "
            "NOT OLD.id OR NEW.artifact_id IS NOT OLD.artifact_id OR NEW.entry_id IS NOT "
            "OLD.entry_id OR NEW.version_id IS NOT OLD.version_id OR NEW.body IS NOT OLD.body OR "
            "NEW.content_sha256 IS NOT OLD.content_sha256 OR NEW.conflict_key IS NOT "
            "OLD.conflict_key OR NEW.born_in_revision IS NOT OLD.born_in_revision OR "
            "NEW.created_at IS NOT OLD.created_at OR NEW.born_ordinal IS NOT OLD.born_ordinal) "
            "AND NOT EXISTS (SELECT 1 FROM artifacts_memoryentryversion WHERE artifact_id = "
            "NEW.artifact_id AND retired_in_revision = NEW.retired_in_revision AND "
            "retired_ordinal = NEW.retired_ordinal AND id IS NOT OLD.id)) AND NOT (NOT (NEW.id IS"
            " NOT OLD.id OR NEW.artifact_id IS NOT OLD.artifact_id OR NEW.entry_id IS NOT "
            "OLD.entry_id OR NEW.version_id IS NOT OLD.version_id OR NEW.content_sha256 IS NOT "
            "OLD.content_sha256 OR NEW.conflict_key IS NOT OLD.conflict_key OR "
            "NEW.born_in_revision IS NOT OLD.born_in_revision OR NEW.created_at IS NOT "
            "OLD.created_at OR NEW.born_ordinal IS NOT OLD.born_ordinal OR "
            "NEW.retired_in_revision IS NOT OLD.retired_in_revision OR NEW.retired_ordinal IS NOT"
            " OLD.retired_ordinal) AND (NEW.body IS OLD.body OR COALESCE(NEW.body = '', FALSE)) "
            "AND (EXISTS (SELECT 1 FROM artifacts_erasure e WHERE e.kind = 'scope' AND e.scope_id"
            " = (SELECT scope_id FROM artifacts_artifact WHERE id = OLD.artifact_id) AND OLD.id "
            "<= e.versions_through) OR EXISTS (SELECT 1 FROM artifacts_erasure e WHERE "
            "e.artifact_id = OLD.artifact_id AND e.version_id = OLD.version_id AND e.kind = "
            "'entry_version') OR EXISTS (SELECT 1 FROM artifacts_erasure e WHERE e.artifact_id = "
            "OLD.artifact_id AND e.revision = OLD.born_in_revision AND e.kind = 'revision'))) "
            "BEGIN SELECT RAISE(ABORT, 'memory entry versions are immutable; one is retired only "
            "by the write of the revision retiring it'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_delete BEFORE DELETE ON "
            "artifacts_memoryentryversion BEGIN SELECT RAISE(ABORT, 'memory entry versions are "
            "immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_append_only BEFORE INSERT ON"
            " artifacts_memoryentryversion WHEN NEW.retired_in_revision IS NOT NULL OR "
            "NEW.retired_ordinal IS NOT NULL OR NEW.born_in_revision IS NOT (SELECT head_revision"
            " FROM artifacts_artifact WHERE id = NEW.artifact_id) OR NOT "
            "COALESCE(NEW.born_ordinal BETWEEN 1 AND (SELECT COALESCE(entries_born, 0) FROM "
            "artifacts_artifactrevision WHERE artifact_id = NEW.artifact_id AND revision = "
            "NEW.born_in_revision), FALSE) OR EXISTS (SELECT 1 FROM artifacts_memoryentryversion "
            "WHERE id = NEW.id OR (artifact_id = NEW.artifact_id AND (version_id = NEW.version_id"
            " OR (entry_id = NEW.entry_id AND retired_in_revision IS NULL)))) OR EXISTS (SELECT 1"
            " FROM artifacts_memoryentryversion WHERE artifact_id = NEW.artifact_id AND "
            "born_in_revision = NEW.born_in_revision AND born_ordinal = NEW.born_ordinal) BEGIN "
            "SELECT RAISE(ABORT, 'an entry version is inserted only live, into the head revision,"
            " among the entries it declares, as a new version of an entry'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_guard BEFORE UPDATE ON "
            "artifacts_artifact WHEN NEW.id IS NOT OLD.id OR NEW.scope_id IS NOT OLD.scope_id OR "
            "NEW.family IS NOT OLD.family OR NEW.artifact_id IS NOT OLD.artifact_id OR "
            "NEW.created_at IS NOT OLD.created_at OR (NEW.head_revision IS NOT OLD.head_revision "
            "AND NOT (NEW.head_revision = OLD.head_revision + 1 AND EXISTS (SELECT 1 FROM "
            "artifacts_artifactrevision WHERE artifact_id = OLD.id AND revision = "
            "NEW.head_revision))) BEGIN SELECT RAISE(ABORT, 'an artifact keeps its identity; its "
            "head moves forward by one onto an existing revision'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_insert BEFORE INSERT ON "
            "artifacts_artifact WHEN NEW.head_revision IS NOT 0 OR EXISTS (SELECT 1 FROM "
            "artifacts_artifact WHERE id = NEW.id OR (scope_id = NEW.scope_id AND family = "
            "NEW.family AND artifact_id = NEW.artifact_id)) BEGIN SELECT RAISE(ABORT, 'a new "
            "artifact starts without revisions and never replaces another'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_no_delete BEFORE DELETE ON "
            "artifacts_artifact BEGIN SELECT RAISE(ABORT, 'an artifact is never deleted'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_guard BEFORE UPDATE ON "
            "artifacts_scope WHEN NEW.id IS NOT OLD.id OR NEW.scope_id IS NOT OLD.scope_id BEGIN "
            "SELECT RAISE(ABORT, 'a scope id never changes'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_insert BEFORE INSERT ON "
            "artifacts_scope WHEN EXISTS (SELECT 1 FROM artifacts_scope WHERE id = NEW.id OR "
            "scope_id = NEW.scope_id) BEGIN SELECT RAISE(ABORT, 'a new scope never replaces "
            "another'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_authority_insert BEFORE INSERT ON "
            "artifacts_scope WHEN NEW.authority IS NOT NULL AND NEW.authority NOT IN "
            "('current_turn', 'workspace_override', 'user_default') BEGIN SELECT RAISE(ABORT, 'a "
            "scope authority is current_turn, workspace_override, user_default or null'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_authority_update BEFORE UPDATE ON "
            "artifacts_scope WHEN NEW.authority IS NOT NULL AND NEW.authority NOT IN "
            "('current_turn', 'workspace_override', 'user_default') BEGIN SELECT RAISE(ABORT, 'a "
            "scope authority is current_turn, workspace_override, user_default or null'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_no_delete BEFORE DELETE ON "
            "artifacts_scope WHEN EXISTS (SELECT 1 FROM artifacts_artifact WHERE scope_id = "
            "OLD.id) BEGIN SELECT RAISE(ABORT, 'a scope holding artifacts is never deleted'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_api_key_guard BEFORE UPDATE ON "
            "artifacts_apikey WHEN NEW.id IS NOT OLD.id OR NEW.key_sha256 IS NOT OLD.key_sha256 "
            "OR (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS NOT OLD.revoked_at) OR EXISTS "
            "(SELECT 1 FROM artifacts_apikey WHERE name = NEW.name AND id IS NOT OLD.id) BEGIN "
            "SELECT RAISE(ABORT, 'an API key keeps its id and hash, and its revocation is "
            "final'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_api_key_insert BEFORE INSERT ON "
            "artifacts_apikey WHEN EXISTS (SELECT 1 FROM artifacts_apikey WHERE id = NEW.id OR "
            "key_sha256 = NEW.key_sha256 OR name = NEW.name) BEGIN SELECT RAISE(ABORT, 'a new API"
            " key never replaces another'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_api_key_no_delete BEFORE DELETE ON "
            "artifacts_apikey WHEN OLD.revoked_at IS NOT NULL BEGIN SELECT RAISE(ABORT, 'a "
            "revoked API key is never deleted'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_erasure_no_update BEFORE UPDATE ON "
            "artifacts_erasure BEGIN SELECT RAISE(ABORT, 'erasure records are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_erasure_no_delete BEFORE DELETE ON "
            "artifacts_erasure BEGIN SELECT RAISE(ABORT, 'erasure records are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_erasure_append_only BEFORE INSERT ON "
            "artifacts_erasure WHEN NOT (NEW.sequence IS COALESCE((SELECT MAX(sequence) FROM "
            "artifacts_erasure), 0) + 1 AND NEW.previous_sha256 IS COALESCE((SELECT chain_sha256 "
            "FROM artifacts_erasure WHERE sequence = NEW.sequence - 1), '')) OR EXISTS (SELECT 1 "
            "FROM artifacts_erasure WHERE id = NEW.id) BEGIN SELECT RAISE(ABORT, 'an erasure "
            "record is inserted only as the next record of the erasure chain'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_awaits_head AFTER INSERT ON "
            "artifacts_artifactrevision BEGIN INSERT INTO powercontext_revision_above_head "
            "(artifact_id, revision, refuses_commit) VALUES (NEW.artifact_id, NEW.revision, 0); "
            "END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_head_reached AFTER UPDATE ON "
            "artifacts_artifact WHEN NEW.head_revision IS NOT OLD.head_revision BEGIN DELETE FROM"
            " powercontext_revision_above_head WHERE artifact_id = NEW.id AND revision <= "
            "NEW.head_revision; END"
        ),
    ),
    "postgresql": (
        (
            "CREATE OR REPLACE FUNCTION powercontext_refuse_change() RETURNS trigger LANGUAGE "
            "plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nRAISE EXCEPTION "
            "'% rows are immutable', TG_TABLE_NAME USING ERRCODE = "
            "'integrity_constraint_violation';\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_refuse_truncate() RETURNS trigger LANGUAGE "
            "plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nRAISE EXCEPTION "
            "'% is never truncated: history and revocations depend on its rows', TG_TABLE_NAME "
            "USING ERRCODE = 'integrity_constraint_violation';\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_revision_change_guard() RETURNS trigger "
            "LANGUAGE plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF "
            "TG_OP = 'UPDATE' AND NOT (NEW.id IS DISTINCT FROM OLD.id OR NEW.artifact_id IS "
            "DISTINCT FROM OLD.artifact_id OR NEW.revision IS DISTINCT FROM OLD.revision OR "
            "NEW.content_sha256 IS DISTINCT FROM OLD.content_sha256 OR NEW.author IS DISTINCT "
            "FROM OLD.author OR NEW.created_at IS DISTINCT FROM OLD.created_at OR "
            "NEW.entries_born IS DISTINCT FROM OLD.entries_born OR NEW.entries_retired IS "
            "DISTINCT FROM OLD.entries_retired OR NEW.chain_sha256 IS DISTINCT FROM "
            "OLD.chain_sha256) AND (NEW.body IS NOT DISTINCT FROM OLD.body OR COALESCE(NEW.body ="
            " '', FALSE)) AND (NEW.title IS NOT DISTINCT FROM OLD.title OR COALESCE(NEW.title = "
            "'', FALSE)) AND (NEW.summary IS NOT DISTINCT FROM OLD.summary OR "
            "COALESCE(NEW.summary = '', FALSE)) AND (EXISTS (SELECT 1 FROM "
            "{schema}.artifacts_erasure e WHERE e.kind = 'scope' AND e.scope_id = (SELECT "
            "scope_id FROM {schema}.artifacts_artifact WHERE id = OLD.artifact_id) AND OLD.id <= "
            "e.revisions_through) OR EXISTS (SELECT 1 FROM {schema}.artifacts_erasure e WHERE "
            "e.artifact_id = OLD.artifact_id AND e.revision = OLD.revision AND e.kind = "
            "'revision')) THEN RETURN NEW; END IF;\nRAISE EXCEPTION '% rows are immutable', "
            "TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_erasure_guard() RETURNS trigger LANGUAGE "
            "plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF NEW.sequence "
            "IS NOT DISTINCT FROM COALESCE((SELECT MAX(sequence) FROM "
            "{schema}.artifacts_erasure), 0) + 1 AND NEW.previous_sha256 IS NOT DISTINCT FROM "
            "COALESCE((SELECT chain_sha256 FROM {schema}.artifacts_erasure WHERE sequence = "
            "NEW.sequence - 1), '') THEN RETURN NEW; END IF;\nRAISE EXCEPTION 'an erasure record "
            "is inserted only as the next record of the erasure chain' USING ERRCODE = "
            "'integrity_constraint_violation';\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_revision_guard() RETURNS trigger LANGUAGE "
            "plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF NEW.revision "
            "IS DISTINCT FROM (SELECT head_revision FROM {schema}.artifacts_artifact WHERE id = "
            "NEW.artifact_id) + 1 THEN RAISE EXCEPTION 'a revision is inserted only as the next "
            "revision of its artifact' USING ERRCODE = 'integrity_constraint_violation'; END IF;\n"
            "RETURN NEW;\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_revision_head_check() RETURNS trigger "
            "LANGUAGE plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF NOT "
            "COALESCE(NEW.revision <= (SELECT head_revision FROM {schema}.artifacts_artifact "
            "WHERE id = NEW.artifact_id), FALSE) THEN RAISE EXCEPTION 'a revision commits only "
            "with the head of its artifact moved onto it' USING ERRCODE = "
            "'integrity_constraint_violation'; END IF;\nRETURN NULL;\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_entry_version_guard() RETURNS trigger "
            "LANGUAGE plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF "
            "TG_OP = 'INSERT' THEN\n  IF NEW.retired_in_revision IS NULL AND NEW.retired_ordinal "
            "IS NULL AND NEW.born_in_revision IS NOT DISTINCT FROM (SELECT head_revision FROM "
            "{schema}.artifacts_artifact WHERE id = NEW.artifact_id) AND "
            "COALESCE(NEW.born_ordinal BETWEEN 1 AND (SELECT COALESCE(entries_born, 0) FROM "
            "{schema}.artifacts_artifactrevision WHERE artifact_id = NEW.artifact_id AND revision"
            " = NEW.born_in_revision), FALSE) THEN RETURN NEW; END IF;\n  RAISE EXCEPTION 'an "
            "entry version is inserted only live, into the head revision, among the entries it "
            "declares' USING ERRCODE = 'integrity_constraint_violation';\nEND IF;\nIF TG_OP = "
            "'UPDATE' AND OLD.retired_in_revision IS NULL AND NEW.retired_in_revision = (SELECT "
            "head_revision FROM {schema}.artifacts_artifact WHERE id = NEW.artifact_id) AND "
            "COALESCE(NEW.retired_ordinal BETWEEN 1 AND (SELECT COALESCE(entries_retired, 0) FROM"
            " {schema}.artifacts_artifactrevision WHERE artifact_id = NEW.artifact_id AND "
            "revision = NEW.retired_in_revision), FALSE) AND NOT (NEW.id IS DISTINCT FROM OLD.id "
            "OR NEW.artifact_id IS DISTINCT FROM OLD.artifact_id OR NEW.entry_id IS DISTINCT FROM"
            " OLD.entry_id OR NEW.version_id IS DISTINCT FROM OLD.version_id OR NEW.body IS "
            "DISTINCT FROM OLD.body OR NEW.content_sha256 IS DISTINCT FROM OLD.content_sha256 OR "
            "NEW.conflict_key IS DISTINCT FROM OLD.conflict_key OR NEW.born_in_revision IS "
            "DISTINCT FROM OLD.born_in_revision OR NEW.created_at IS DISTINCT FROM OLD.created_at"
            " OR NEW.born_ordinal IS DISTINCT FROM OLD.born_ordinal) THEN RETURN NEW; END IF;\nIF "
            "TG_OP = 'UPDATE' AND NOT (NEW.id IS DISTINCT FROM OLD.id OR NEW.artifact_id IS "
            "DISTINCT FROM OLD.artifact_id OR NEW.entry_id IS DISTINCT FROM OLD.entry_id OR "
            "NEW.version_id IS DISTINCT FROM OLD.version_id OR NEW.content_sha256 IS DISTINCT "
            "FROM OLD.content_sha256 OR NEW.conflict_key IS DISTINCT FROM OLD.conflict_key OR "
            "NEW.born_in_revision IS DISTINCT FROM OLD.born_in_revision OR NEW.created_at IS "
            "DISTINCT FROM OLD.created_at OR NEW.born_ordinal IS DISTINCT FROM OLD.born_ordinal "
            "OR NEW.retired_in_revision IS DISTINCT FROM OLD.retired_in_revision OR "
            "NEW.retired_ordinal IS DISTINCT FROM OLD.retired_ordinal) AND (NEW.body IS NOT "
            "DISTINCT FROM OLD.body OR COALESCE(NEW.body = '', FALSE)) AND (EXISTS (SELECT 1 FROM"
            " {schema}.artifacts_erasure e WHERE e.kind = 'scope' AND e.scope_id = (SELECT "
            "scope_id FROM {schema}.artifacts_artifact WHERE id = OLD.artifact_id) AND OLD.id <= "
            "e.versions_through) OR EXISTS (SELECT 1 FROM {schema}.artifacts_erasure e WHERE "
            "e.artifact_id = OLD.artifact_id AND e.version_id = OLD.version_id AND e.kind = "
            "'entry_version') OR EXISTS (SELECT 1 FROM {schema}.artifacts_erasure e WHERE "
            "e.artifact_id = OLD.artifact_id AND e.revision = OLD.born_in_revision AND e.kind = "
            "'revision')) THEN RETURN NEW; END IF;\nRAISE EXCEPTION 'memory entry versions are "
            "immutable; one is retired only by the write of the revision retiring it' USING "
            "ERRCODE = 'integrity_constraint_violation';\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_artifact_guard() RETURNS trigger LANGUAGE "
            "plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF TG_OP = "
            "'DELETE' THEN\n  RAISE EXCEPTION 'an artifact is never deleted' USING ERRCODE = "
            "'integrity_constraint_violation';\nEND IF;\nIF TG_OP = 'INSERT' THEN\n  IF "
            "NEW.head_revision = 0 THEN RETURN NEW; END IF;\n  RAISE EXCEPTION 'a new artifact "
            "starts without revisions' USING ERRCODE = 'integrity_constraint_violation';\nEND IF;\n"
            "IF NEW.id IS DISTINCT FROM OLD.id OR NEW.scope_id IS DISTINCT FROM OLD.scope_id OR "
            "NEW.family IS DISTINCT FROM OLD.family OR NEW.artifact_id IS DISTINCT FROM "
            "OLD.artifact_id OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN RAISE "
            "EXCEPTION 'an artifact keeps its identity' USING ERRCODE = "
            "'integrity_constraint_violation'; END IF;\nIF NEW.head_revision IS DISTINCT FROM "
            "OLD.head_revision AND NOT (NEW.head_revision = OLD.head_revision + 1 AND EXISTS "
            "(SELECT 1 FROM {schema}.artifacts_artifactrevision WHERE artifact_id = OLD.id AND "
            "revision = NEW.head_revision)) THEN RAISE EXCEPTION 'an artifact head moves forward "
            "by one onto an existing revision' USING ERRCODE = 'integrity_constraint_violation'; "
            "END IF;\nRETURN NEW;\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_scope_guard() RETURNS trigger LANGUAGE "
            "plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF TG_OP = "
            "'DELETE' THEN\n  IF EXISTS (SELECT 1 FROM {schema}.artifacts_artifact WHERE scope_id "
            "= OLD.id) THEN RAISE EXCEPTION 'a scope holding artifacts is never deleted' USING "
            "ERRCODE = 'integrity_constraint_violation'; END IF;\n  RETURN OLD;\nEND IF;\nIF NEW.id "
            "IS DISTINCT FROM OLD.id OR NEW.scope_id IS DISTINCT FROM OLD.scope_id THEN RAISE "
            "EXCEPTION 'a scope id never changes' USING ERRCODE = "
            "'integrity_constraint_violation'; END IF;\nRETURN NEW;\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_scope_authority_guard() RETURNS trigger "
            "LANGUAGE plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF "
            "NEW.authority IS NOT NULL AND NEW.authority NOT IN ('current_turn', "
            "'workspace_override', 'user_default') THEN RAISE EXCEPTION 'a scope authority is "
            "current_turn, workspace_override, user_default or null' USING ERRCODE = "
            "'integrity_constraint_violation'; END IF;\nRETURN NEW;\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_api_key_guard() RETURNS trigger LANGUAGE "
            "plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF TG_OP = "
            "'DELETE' THEN\n  IF OLD.revoked_at IS NOT NULL THEN RAISE EXCEPTION 'a revoked API "
            "key is never deleted' USING ERRCODE = 'integrity_constraint_violation'; END IF;\n  "
            "RETURN OLD;\nEND IF;\nIF NEW.id IS DISTINCT FROM OLD.id OR NEW.key_sha256 IS DISTINCT "
            "FROM OLD.key_sha256 THEN RAISE EXCEPTION 'an API key keeps its id and hash' USING "
            "ERRCODE = 'integrity_constraint_violation'; END IF;\nIF OLD.revoked_at IS NOT NULL "
            "AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN RAISE EXCEPTION 'the "
            "revocation of an API key is final' USING ERRCODE = 'integrity_constraint_violation';"
            " END IF;\nRETURN NEW;\nEND $$"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_immutable BEFORE UPDATE OR DELETE ON"
            " artifacts_artifactrevision FOR EACH ROW EXECUTE FUNCTION "
            "powercontext_revision_change_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_append_only BEFORE INSERT ON "
            "artifacts_artifactrevision FOR EACH ROW EXECUTE FUNCTION "
            "powercontext_revision_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_no_truncate BEFORE TRUNCATE ON "
            "artifacts_artifactrevision FOR EACH STATEMENT EXECUTE FUNCTION "
            "powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_entry_version_immutable BEFORE INSERT OR "
            "UPDATE OR DELETE ON artifacts_memoryentryversion FOR EACH ROW EXECUTE FUNCTION "
            "powercontext_entry_version_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_entry_version_no_truncate BEFORE TRUNCATE ON "
            "artifacts_memoryentryversion FOR EACH STATEMENT EXECUTE FUNCTION "
            "powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_artifact_guard BEFORE INSERT OR UPDATE OR "
            "DELETE ON artifacts_artifact FOR EACH ROW EXECUTE FUNCTION "
            "powercontext_artifact_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_artifact_no_truncate BEFORE TRUNCATE ON "
            "artifacts_artifact FOR EACH STATEMENT EXECUTE FUNCTION "
            "powercontext_refuse_truncate()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_scope_guard BEFORE UPDATE OR DELETE ON "
            "artifacts_scope FOR EACH ROW EXECUTE FUNCTION powercontext_scope_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_scope_authority BEFORE INSERT OR UPDATE ON "
            "artifacts_scope FOR EACH ROW EXECUTE FUNCTION powercontext_scope_authority_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_scope_no_truncate BEFORE TRUNCATE ON "
            "artifacts_scope FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_api_key_guard BEFORE UPDATE OR DELETE ON "
            "artifacts_apikey FOR EACH ROW EXECUTE FUNCTION powercontext_api_key_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_api_key_no_truncate BEFORE TRUNCATE ON "
            "artifacts_apikey FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_erasure_immutable BEFORE UPDATE OR DELETE ON "
            "artifacts_erasure FOR EACH ROW EXECUTE FUNCTION powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_erasure_append_only BEFORE INSERT ON "
            "artifacts_erasure FOR EACH ROW EXECUTE FUNCTION powercontext_erasure_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_erasure_no_truncate BEFORE TRUNCATE ON "
            "artifacts_erasure FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
        ),
        ("DROP TRIGGER IF EXISTS powercontext_revision_under_head ON artifacts_artifactrevision"),
        (
            "CREATE CONSTRAINT TRIGGER powercontext_revision_under_head AFTER INSERT ON "
            "artifacts_artifactrevision DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE "
            "FUNCTION powercontext_revision_head_check()"
        ),
    ),
}
UNINSTALL = {
    "sqlite": (
        ("DROP TRIGGER IF EXISTS powercontext_revision_no_update"),
        ("DROP TRIGGER IF EXISTS powercontext_revision_no_delete"),
        ("DROP TRIGGER IF EXISTS powercontext_revision_append_only"),
        ("DROP TRIGGER IF EXISTS powercontext_entry_version_no_update"),
        ("DROP TRIGGER IF EXISTS powercontext_entry_version_no_delete"),
        ("DROP TRIGGER IF EXISTS powercontext_entry_version_append_only"),
        ("DROP TRIGGER IF EXISTS powercontext_artifact_guard"),
        ("DROP TRIGGER IF EXISTS powercontext_artifact_insert"),
        ("DROP TRIGGER IF EXISTS powercontext_artifact_no_delete"),
        ("DROP TRIGGER IF EXISTS powercontext_scope_guard"),
        ("DROP TRIGGER IF EXISTS powercontext_scope_insert"),
        ("DROP TRIGGER IF EXISTS powercontext_scope_authority_insert"),
        ("DROP TRIGGER IF EXISTS powercontext_scope_authority_update"),
        ("DROP TRIGGER IF EXISTS powercontext_scope_no_delete"),
        ("DROP TRIGGER IF EXISTS powercontext_api_key_guard"),
        ("DROP TRIGGER IF EXISTS powercontext_api_key_insert"),
        ("DROP TRIGGER IF EXISTS powercontext_api_key_no_delete"),
        ("DROP TRIGGER IF EXISTS powercontext_erasure_no_update"),
        ("DROP TRIGGER IF EXISTS powercontext_erasure_no_delete"),
        ("DROP TRIGGER IF EXISTS powercontext_erasure_append_only"),
        ("DROP TRIGGER IF EXISTS powercontext_revision_awaits_head"),
        ("DROP TRIGGER IF EXISTS powercontext_artifact_head_reached"),
    ),
    "postgresql": (
        ("DROP TRIGGER IF EXISTS powercontext_revision_immutable ON artifacts_artifactrevision"),
        ("DROP TRIGGER IF EXISTS powercontext_revision_append_only ON artifacts_artifactrevision"),
        ("DROP TRIGGER IF EXISTS powercontext_revision_no_truncate ON artifacts_artifactrevision"),
        ("DROP TRIGGER IF EXISTS powercontext_entry_version_immutable ON artifacts_memoryentryversion"),
        ("DROP TRIGGER IF EXISTS powercontext_entry_version_no_truncate ON artifacts_memoryentryversion"),
        ("DROP TRIGGER IF EXISTS powercontext_artifact_guard ON artifacts_artifact"),
        ("DROP TRIGGER IF EXISTS powercontext_artifact_no_truncate ON artifacts_artifact"),
        ("DROP TRIGGER IF EXISTS powercontext_scope_guard ON artifacts_scope"),
        ("DROP TRIGGER IF EXISTS powercontext_scope_authority ON artifacts_scope"),
        ("DROP TRIGGER IF EXISTS powercontext_scope_no_truncate ON artifacts_scope"),
        ("DROP TRIGGER IF EXISTS powercontext_api_key_guard ON artifacts_apikey"),
        ("DROP TRIGGER IF EXISTS powercontext_api_key_no_truncate ON artifacts_apikey"),
        ("DROP TRIGGER IF EXISTS powercontext_erasure_immutable ON artifacts_erasure"),
        ("DROP TRIGGER IF EXISTS powercontext_erasure_append_only ON artifacts_erasure"),
        ("DROP TRIGGER IF EXISTS powercontext_erasure_no_truncate ON artifacts_erasure"),
        ("DROP TRIGGER IF EXISTS powercontext_revision_under_head ON artifacts_artifactrevision"),
    ),
}
_run = _PREVIOUS._run


def _forward(apps, schema_editor):
    _run(schema_editor, _PREVIOUS.UNINSTALL)
    _run(schema_editor, INSTALL)


def _reverse(apps, schema_editor):
    _run(schema_editor, UNINSTALL)
    _run(schema_editor, _PREVIOUS.INSTALL)  # the set 0020 froze


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0020_erasure")]

    operations = [
        migrations.AddField(
            model_name="erasure",
            name="revisions_through",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="erasure",
            name="versions_through",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(_forward, _reverse),
    ]
