"""The erasure guard keeps a revision's ``texts_sha256`` as it keeps every other hash (issue 51, item 2).

Migration 0022 added ``texts_sha256`` (the hash of a revision's title, summary and body, which chain encoding 2
covers) without changing the guards: an update that blanks a revision's texts under an erasure record could also
change it (verify_history reported that, since the chain covers it, but the guards are what keep every hash an erased
row's chain was built from). artifacts/immutability.py's ``REVISION_ERASURE_KEPT_COLUMNS`` now holds it; its
statements are frozen here. The forward step drops the set 0021 installed and installs this one; the reverse step puts
0021's back.
"""

import importlib

from django.db import migrations

FROZEN_FROM = "artifacts.immutability"
"""The module whose statements were frozen here (tests/api/test_trigger_migrations.py compares the latest freeze)."""

_PREVIOUS = importlib.import_module("artifacts.migrations.0021_erasure_scope_bound")

INSTALL = {
    "sqlite": (
        (
            "CREATE TABLE IF NOT EXISTS powercontext_revision_above_head (artifact_id integer NOT "
            "NULL, revision integer NOT NULL, refuses_commit integer NOT NULL REFERENCES artifacts"
            "_artifact (id) DEFERRABLE INITIALLY DEFERRED, PRIMARY KEY (artifact_id, revision))"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_update BEFORE UPDATE ON artifac"
            "ts_artifactrevision WHEN NOT (NOT (NEW.id IS NOT OLD.id OR NEW.artifact_id IS NOT OLD"
            ".artifact_id OR NEW.revision IS NOT OLD.revision OR NEW.content_sha256 IS NOT OLD.con"
            "tent_sha256 OR NEW.author IS NOT OLD.author OR NEW.created_at IS NOT OLD.created_at O"
            "R NEW.entries_born IS NOT OLD.entries_born OR NEW.entries_retired IS NOT OLD.entries_"
            "retired OR NEW.chain_sha256 IS NOT OLD.chain_sha256 OR NEW.texts_sha256 IS NOT OLD.te"
            "xts_sha256) AND (NEW.body IS OLD.body OR COALESCE(NEW.body = '', FALSE)) AND (NEW.tit"
            "le IS OLD.title OR COALESCE(NEW.title = '', FALSE)) AND (NEW.summary IS OLD.summary O"
            "R COALESCE(NEW.summary = '', FALSE)) AND (EXISTS (SELECT 1 FROM artifacts_erasure e W"
            "HERE e.kind = 'scope' AND e.scope_id = (SELECT scope_id FROM artifacts_artifact WHERE"
            " id = OLD.artifact_id) AND OLD.id <= e.revisions_through) OR EXISTS (SELECT 1 FROM ar"
            "tifacts_erasure e WHERE e.artifact_id = OLD.artifact_id AND e.revision = OLD.revision"
            " AND e.kind = 'revision'))) BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutab"
            "le; only an erasure blanks their texts'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_no_delete BEFORE DELETE ON artifac"
            "ts_artifactrevision BEGIN SELECT RAISE(ABORT, 'artifact revisions are immutable'); EN"
            "D"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_append_only BEFORE INSERT ON artif"
            "acts_artifactrevision WHEN NEW.revision IS NOT (SELECT head_revision FROM artifacts_a"
            "rtifact WHERE id = NEW.artifact_id) + 1 OR EXISTS (SELECT 1 FROM artifacts_artifactre"
            "vision WHERE id = NEW.id OR (artifact_id = NEW.artifact_id AND revision = NEW.revisio"
            "n)) BEGIN SELECT RAISE(ABORT, 'a revision is inserted only as the next revision of it"
            "s artifact'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_update BEFORE UPDATE ON ar"
            "tifacts_memoryentryversion WHEN NOT (OLD.retired_in_revision IS NULL AND NEW.retired_"
            "in_revision IS (SELECT head_revision FROM artifacts_artifact WHERE id = NEW.artifact_"
            "id) AND COALESCE(NEW.retired_ordinal BETWEEN 1 AND (SELECT COALESCE(entries_retired, "
            "0) FROM artifacts_artifactrevision WHERE artifact_id = NEW.artifact_id AND revision ="
            " NEW.retired_in_revision), FALSE) AND NOT (NEW.id IS NOT OLD.id OR NEW.artifact_id IS"
            " NOT OLD.artifact_id OR NEW.entry_id IS NOT OLD.entry_id OR NEW.version_id IS NOT OLD"
            ".version_id OR NEW.body IS NOT OLD.body OR NEW.content_sha256 IS NOT OLD.content_sha2"
            "56 OR NEW.conflict_key IS NOT OLD.conflict_key OR NEW.born_in_revision IS NOT OLD.bor"
            "n_in_revision OR NEW.created_at IS NOT OLD.created_at OR NEW.born_ordinal IS NOT OLD."
            "born_ordinal) AND NOT EXISTS (SELECT 1 FROM artifacts_memoryentryversion WHERE artifa"
            "ct_id = NEW.artifact_id AND retired_in_revision = NEW.retired_in_revision AND retired"
            "_ordinal = NEW.retired_ordinal AND id IS NOT OLD.id)) AND NOT (NOT (NEW.id IS NOT OLD"
            ".id OR NEW.artifact_id IS NOT OLD.artifact_id OR NEW.entry_id IS NOT OLD.entry_id OR "
            "NEW.version_id IS NOT OLD.version_id OR NEW.content_sha256 IS NOT OLD.content_sha256 "
            "OR NEW.conflict_key IS NOT OLD.conflict_key OR NEW.born_in_revision IS NOT OLD.born_i"
            "n_revision OR NEW.created_at IS NOT OLD.created_at OR NEW.born_ordinal IS NOT OLD.bor"
            "n_ordinal OR NEW.retired_in_revision IS NOT OLD.retired_in_revision OR NEW.retired_or"
            "dinal IS NOT OLD.retired_ordinal) AND (NEW.body IS OLD.body OR COALESCE(NEW.body = ''"
            ", FALSE)) AND (EXISTS (SELECT 1 FROM artifacts_erasure e WHERE e.kind = 'scope' AND e"
            ".scope_id = (SELECT scope_id FROM artifacts_artifact WHERE id = OLD.artifact_id) AND "
            "OLD.id <= e.versions_through) OR EXISTS (SELECT 1 FROM artifacts_erasure e WHERE e.ar"
            "tifact_id = OLD.artifact_id AND e.version_id = OLD.version_id AND e.kind = 'entry_ver"
            "sion') OR EXISTS (SELECT 1 FROM artifacts_erasure e WHERE e.artifact_id = OLD.artifac"
            "t_id AND e.revision = OLD.born_in_revision AND e.kind = 'revision'))) BEGIN SELECT RA"
            "ISE(ABORT, 'memory entry versions are immutable; one is retired only by the write of "
            "the revision retiring it'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_no_delete BEFORE DELETE ON ar"
            "tifacts_memoryentryversion BEGIN SELECT RAISE(ABORT, 'memory entry versions are immut"
            "able'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_entry_version_append_only BEFORE INSERT ON "
            "artifacts_memoryentryversion WHEN NEW.retired_in_revision IS NOT NULL OR NEW.retired_"
            "ordinal IS NOT NULL OR NEW.born_in_revision IS NOT (SELECT head_revision FROM artifac"
            "ts_artifact WHERE id = NEW.artifact_id) OR NOT COALESCE(NEW.born_ordinal BETWEEN 1 AN"
            "D (SELECT COALESCE(entries_born, 0) FROM artifacts_artifactrevision WHERE artifact_id"
            " = NEW.artifact_id AND revision = NEW.born_in_revision), FALSE) OR EXISTS (SELECT 1 F"
            "ROM artifacts_memoryentryversion WHERE id = NEW.id OR (artifact_id = NEW.artifact_id "
            "AND (version_id = NEW.version_id OR (entry_id = NEW.entry_id AND retired_in_revision "
            "IS NULL)))) OR EXISTS (SELECT 1 FROM artifacts_memoryentryversion WHERE artifact_id ="
            " NEW.artifact_id AND born_in_revision = NEW.born_in_revision AND born_ordinal = NEW.b"
            "orn_ordinal) BEGIN SELECT RAISE(ABORT, 'an entry version is inserted only live, into "
            "the head revision, among the entries it declares, as a new version of an entry'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_guard BEFORE UPDATE ON artifacts_a"
            "rtifact WHEN NEW.id IS NOT OLD.id OR NEW.scope_id IS NOT OLD.scope_id OR NEW.family I"
            "S NOT OLD.family OR NEW.artifact_id IS NOT OLD.artifact_id OR NEW.created_at IS NOT O"
            "LD.created_at OR (NEW.head_revision IS NOT OLD.head_revision AND NOT (NEW.head_revisi"
            "on = OLD.head_revision + 1 AND EXISTS (SELECT 1 FROM artifacts_artifactrevision WHERE"
            " artifact_id = OLD.id AND revision = NEW.head_revision))) BEGIN SELECT RAISE(ABORT, '"
            "an artifact keeps its identity; its head moves forward by one onto an existing revisi"
            "on'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_insert BEFORE INSERT ON artifacts_"
            "artifact WHEN NEW.head_revision IS NOT 0 OR EXISTS (SELECT 1 FROM artifacts_artifact "
            "WHERE id = NEW.id OR (scope_id = NEW.scope_id AND family = NEW.family AND artifact_id"
            " = NEW.artifact_id)) BEGIN SELECT RAISE(ABORT, 'a new artifact starts without revisio"
            "ns and never replaces another'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_no_delete BEFORE DELETE ON artifac"
            "ts_artifact BEGIN SELECT RAISE(ABORT, 'an artifact is never deleted'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_guard BEFORE UPDATE ON artifacts_scop"
            "e WHEN NEW.id IS NOT OLD.id OR NEW.scope_id IS NOT OLD.scope_id BEGIN SELECT RAISE(AB"
            "ORT, 'a scope id never changes'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_insert BEFORE INSERT ON artifacts_sco"
            "pe WHEN EXISTS (SELECT 1 FROM artifacts_scope WHERE id = NEW.id OR scope_id = NEW.sco"
            "pe_id) BEGIN SELECT RAISE(ABORT, 'a new scope never replaces another'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_authority_insert BEFORE INSERT ON art"
            "ifacts_scope WHEN NEW.authority IS NOT NULL AND NEW.authority NOT IN ('current_turn',"
            " 'workspace_override', 'user_default') BEGIN SELECT RAISE(ABORT, 'a scope authority i"
            "s current_turn, workspace_override, user_default or null'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_authority_update BEFORE UPDATE ON art"
            "ifacts_scope WHEN NEW.authority IS NOT NULL AND NEW.authority NOT IN ('current_turn',"
            " 'workspace_override', 'user_default') BEGIN SELECT RAISE(ABORT, 'a scope authority i"
            "s current_turn, workspace_override, user_default or null'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_scope_no_delete BEFORE DELETE ON artifacts_"
            "scope WHEN EXISTS (SELECT 1 FROM artifacts_artifact WHERE scope_id = OLD.id) BEGIN SE"
            "LECT RAISE(ABORT, 'a scope holding artifacts is never deleted'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_api_key_guard BEFORE UPDATE ON artifacts_ap"
            "ikey WHEN NEW.id IS NOT OLD.id OR NEW.key_sha256 IS NOT OLD.key_sha256 OR (OLD.revoke"
            "d_at IS NOT NULL AND NEW.revoked_at IS NOT OLD.revoked_at) OR EXISTS (SELECT 1 FROM a"
            "rtifacts_apikey WHERE name = NEW.name AND id IS NOT OLD.id) BEGIN SELECT RAISE(ABORT,"
            " 'an API key keeps its id and hash, and its revocation is final'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_api_key_insert BEFORE INSERT ON artifacts_a"
            "pikey WHEN EXISTS (SELECT 1 FROM artifacts_apikey WHERE id = NEW.id OR key_sha256 = N"
            "EW.key_sha256 OR name = NEW.name) BEGIN SELECT RAISE(ABORT, 'a new API key never repl"
            "aces another'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_api_key_no_delete BEFORE DELETE ON artifact"
            "s_apikey WHEN OLD.revoked_at IS NOT NULL BEGIN SELECT RAISE(ABORT, 'a revoked API key"
            " is never deleted'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_erasure_no_update BEFORE UPDATE ON artifact"
            "s_erasure BEGIN SELECT RAISE(ABORT, 'erasure records are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_erasure_no_delete BEFORE DELETE ON artifact"
            "s_erasure BEGIN SELECT RAISE(ABORT, 'erasure records are immutable'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_erasure_append_only BEFORE INSERT ON artifa"
            "cts_erasure WHEN NOT (NEW.sequence IS COALESCE((SELECT MAX(sequence) FROM artifacts_e"
            "rasure), 0) + 1 AND NEW.previous_sha256 IS COALESCE((SELECT chain_sha256 FROM artifac"
            "ts_erasure WHERE sequence = NEW.sequence - 1), '')) OR EXISTS (SELECT 1 FROM artifact"
            "s_erasure WHERE id = NEW.id) BEGIN SELECT RAISE(ABORT, 'an erasure record is inserted"
            " only as the next record of the erasure chain'); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_revision_awaits_head AFTER INSERT ON artifa"
            "cts_artifactrevision BEGIN INSERT INTO powercontext_revision_above_head (artifact_id,"
            " revision, refuses_commit) VALUES (NEW.artifact_id, NEW.revision, 0); END"
        ),
        (
            "CREATE TRIGGER IF NOT EXISTS powercontext_artifact_head_reached AFTER UPDATE ON artif"
            "acts_artifact WHEN NEW.head_revision IS NOT OLD.head_revision BEGIN DELETE FROM power"
            "context_revision_above_head WHERE artifact_id = NEW.id AND revision <= NEW.head_revis"
            "ion; END"
        ),
    ),
    "postgresql": (
        (
            "CREATE OR REPLACE FUNCTION powercontext_refuse_change() RETURNS trigger LANGUAGE plpg"
            "sql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nRAISE EXCEPTION '% ro"
            "ws are immutable', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';\nEN"
            "D $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_refuse_truncate() RETURNS trigger LANGUAGE pl"
            "pgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nRAISE EXCEPTION '% "
            "is never truncated: history and revocations depend on its rows', TG_TABLE_NAME USING "
            "ERRCODE = 'integrity_constraint_violation';\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_revision_change_guard() RETURNS trigger LANGU"
            "AGE plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF TG_OP = 'U"
            "PDATE' AND NOT (NEW.id IS DISTINCT FROM OLD.id OR NEW.artifact_id IS DISTINCT FROM OL"
            "D.artifact_id OR NEW.revision IS DISTINCT FROM OLD.revision OR NEW.content_sha256 IS "
            "DISTINCT FROM OLD.content_sha256 OR NEW.author IS DISTINCT FROM OLD.author OR NEW.cre"
            "ated_at IS DISTINCT FROM OLD.created_at OR NEW.entries_born IS DISTINCT FROM OLD.entr"
            "ies_born OR NEW.entries_retired IS DISTINCT FROM OLD.entries_retired OR NEW.chain_sha"
            "256 IS DISTINCT FROM OLD.chain_sha256 OR NEW.texts_sha256 IS DISTINCT FROM OLD.texts_"
            "sha256) AND (NEW.body IS NOT DISTINCT FROM OLD.body OR COALESCE(NEW.body = '', FALSE)"
            ") AND (NEW.title IS NOT DISTINCT FROM OLD.title OR COALESCE(NEW.title = '', FALSE)) A"
            "ND (NEW.summary IS NOT DISTINCT FROM OLD.summary OR COALESCE(NEW.summary = '', FALSE)"
            ") AND (EXISTS (SELECT 1 FROM {schema}.artifacts_erasure e WHERE e.kind = 'scope' AND "
            "e.scope_id = (SELECT scope_id FROM {schema}.artifacts_artifact WHERE id = OLD.artifac"
            "t_id) AND OLD.id <= e.revisions_through) OR EXISTS (SELECT 1 FROM {schema}.artifacts_"
            "erasure e WHERE e.artifact_id = OLD.artifact_id AND e.revision = OLD.revision AND e.k"
            "ind = 'revision')) THEN RETURN NEW; END IF;\nRAISE EXCEPTION '% rows are immutable', T"
            "G_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_erasure_guard() RETURNS trigger LANGUAGE plpg"
            "sql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF NEW.sequence IS NO"
            "T DISTINCT FROM COALESCE((SELECT MAX(sequence) FROM {schema}.artifacts_erasure), 0) +"
            " 1 AND NEW.previous_sha256 IS NOT DISTINCT FROM COALESCE((SELECT chain_sha256 FROM {s"
            "chema}.artifacts_erasure WHERE sequence = NEW.sequence - 1), '') THEN RETURN NEW; END"
            " IF;\nRAISE EXCEPTION 'an erasure record is inserted only as the next record of the er"
            "asure chain' USING ERRCODE = 'integrity_constraint_violation';\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_revision_guard() RETURNS trigger LANGUAGE plp"
            "gsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF NEW.revision IS D"
            "ISTINCT FROM (SELECT head_revision FROM {schema}.artifacts_artifact WHERE id = NEW.ar"
            "tifact_id) + 1 THEN RAISE EXCEPTION 'a revision is inserted only as the next revision"
            " of its artifact' USING ERRCODE = 'integrity_constraint_violation'; END IF;\nRETURN NE"
            "W;\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_revision_head_check() RETURNS trigger LANGUAG"
            "E plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF NOT COALESCE"
            "(NEW.revision <= (SELECT head_revision FROM {schema}.artifacts_artifact WHERE id = NE"
            "W.artifact_id), FALSE) THEN RAISE EXCEPTION 'a revision commits only with the head of"
            " its artifact moved onto it' USING ERRCODE = 'integrity_constraint_violation'; END IF"
            ";\nRETURN NULL;\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_entry_version_guard() RETURNS trigger LANGUAG"
            "E plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF TG_OP = 'INS"
            "ERT' THEN\n  IF NEW.retired_in_revision IS NULL AND NEW.retired_ordinal IS NULL AND NE"
            "W.born_in_revision IS NOT DISTINCT FROM (SELECT head_revision FROM {schema}.artifacts"
            "_artifact WHERE id = NEW.artifact_id) AND COALESCE(NEW.born_ordinal BETWEEN 1 AND (SE"
            "LECT COALESCE(entries_born, 0) FROM {schema}.artifacts_artifactrevision WHERE artifac"
            "t_id = NEW.artifact_id AND revision = NEW.born_in_revision), FALSE) THEN RETURN NEW; "
            "END IF;\n  RAISE EXCEPTION 'an entry version is inserted only live, into the head revi"
            "sion, among the entries it declares' USING ERRCODE = 'integrity_constraint_violation'"
            ";\nEND IF;\nIF TG_OP = 'UPDATE' AND OLD.retired_in_revision IS NULL AND NEW.retired_in_"
            "revision = (SELECT head_revision FROM {schema}.artifacts_artifact WHERE id = NEW.arti"
            "fact_id) AND COALESCE(NEW.retired_ordinal BETWEEN 1 AND (SELECT COALESCE(entries_reti"
            "red, 0) FROM {schema}.artifacts_artifactrevision WHERE artifact_id = NEW.artifact_id "
            "AND revision = NEW.retired_in_revision), FALSE) AND NOT (NEW.id IS DISTINCT FROM OLD."
            "id OR NEW.artifact_id IS DISTINCT FROM OLD.artifact_id OR NEW.entry_id IS DISTINCT FR"
            "OM OLD.entry_id OR NEW.version_id IS DISTINCT FROM OLD.version_id OR NEW.body IS DIST"
            "INCT FROM OLD.body OR NEW.content_sha256 IS DISTINCT FROM OLD.content_sha256 OR NEW.c"
            "onflict_key IS DISTINCT FROM OLD.conflict_key OR NEW.born_in_revision IS DISTINCT FRO"
            "M OLD.born_in_revision OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.born_"
            "ordinal IS DISTINCT FROM OLD.born_ordinal) THEN RETURN NEW; END IF;\nIF TG_OP = 'UPDAT"
            "E' AND NOT (NEW.id IS DISTINCT FROM OLD.id OR NEW.artifact_id IS DISTINCT FROM OLD.ar"
            "tifact_id OR NEW.entry_id IS DISTINCT FROM OLD.entry_id OR NEW.version_id IS DISTINCT"
            " FROM OLD.version_id OR NEW.content_sha256 IS DISTINCT FROM OLD.content_sha256 OR NEW"
            ".conflict_key IS DISTINCT FROM OLD.conflict_key OR NEW.born_in_revision IS DISTINCT F"
            "ROM OLD.born_in_revision OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.bor"
            "n_ordinal IS DISTINCT FROM OLD.born_ordinal OR NEW.retired_in_revision IS DISTINCT FR"
            "OM OLD.retired_in_revision OR NEW.retired_ordinal IS DISTINCT FROM OLD.retired_ordina"
            "l) AND (NEW.body IS NOT DISTINCT FROM OLD.body OR COALESCE(NEW.body = '', FALSE)) AND"
            " (EXISTS (SELECT 1 FROM {schema}.artifacts_erasure e WHERE e.kind = 'scope' AND e.sco"
            "pe_id = (SELECT scope_id FROM {schema}.artifacts_artifact WHERE id = OLD.artifact_id)"
            " AND OLD.id <= e.versions_through) OR EXISTS (SELECT 1 FROM {schema}.artifacts_erasur"
            "e e WHERE e.artifact_id = OLD.artifact_id AND e.version_id = OLD.version_id AND e.kin"
            "d = 'entry_version') OR EXISTS (SELECT 1 FROM {schema}.artifacts_erasure e WHERE e.ar"
            "tifact_id = OLD.artifact_id AND e.revision = OLD.born_in_revision AND e.kind = 'revis"
            "ion')) THEN RETURN NEW; END IF;\nRAISE EXCEPTION 'memory entry versions are immutable;"
            " one is retired only by the write of the revision retiring it' USING ERRCODE = 'integ"
            "rity_constraint_violation';\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_artifact_guard() RETURNS trigger LANGUAGE plp"
            "gsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF TG_OP = 'DELETE' "
            "THEN\n  RAISE EXCEPTION 'an artifact is never deleted' USING ERRCODE = 'integrity_cons"
            "traint_violation';\nEND IF;\nIF TG_OP = 'INSERT' THEN\n  IF NEW.head_revision = 0 THEN R"
            "ETURN NEW; END IF;\n  RAISE EXCEPTION 'a new artifact starts without revisions' USING "
            "ERRCODE = 'integrity_constraint_violation';\nEND IF;\nIF NEW.id IS DISTINCT FROM OLD.id"
            " OR NEW.scope_id IS DISTINCT FROM OLD.scope_id OR NEW.family IS DISTINCT FROM OLD.fam"
            "ily OR NEW.artifact_id IS DISTINCT FROM OLD.artifact_id OR NEW.created_at IS DISTINCT"
            " FROM OLD.created_at THEN RAISE EXCEPTION 'an artifact keeps its identity' USING ERRC"
            "ODE = 'integrity_constraint_violation'; END IF;\nIF NEW.head_revision IS DISTINCT FROM"
            " OLD.head_revision AND NOT (NEW.head_revision = OLD.head_revision + 1 AND EXISTS (SEL"
            "ECT 1 FROM {schema}.artifacts_artifactrevision WHERE artifact_id = OLD.id AND revisio"
            "n = NEW.head_revision)) THEN RAISE EXCEPTION 'an artifact head moves forward by one o"
            "nto an existing revision' USING ERRCODE = 'integrity_constraint_violation'; END IF;\nR"
            "ETURN NEW;\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_scope_guard() RETURNS trigger LANGUAGE plpgsq"
            "l SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF TG_OP = 'DELETE' THE"
            "N\n  IF EXISTS (SELECT 1 FROM {schema}.artifacts_artifact WHERE scope_id = OLD.id) THE"
            "N RAISE EXCEPTION 'a scope holding artifacts is never deleted' USING ERRCODE = 'integ"
            "rity_constraint_violation'; END IF;\n  RETURN OLD;\nEND IF;\nIF NEW.id IS DISTINCT FROM "
            "OLD.id OR NEW.scope_id IS DISTINCT FROM OLD.scope_id THEN RAISE EXCEPTION 'a scope id"
            " never changes' USING ERRCODE = 'integrity_constraint_violation'; END IF;\nRETURN NEW;"
            "\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_scope_authority_guard() RETURNS trigger LANGU"
            "AGE plpgsql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF NEW.author"
            "ity IS NOT NULL AND NEW.authority NOT IN ('current_turn', 'workspace_override', 'user"
            "_default') THEN RAISE EXCEPTION 'a scope authority is current_turn, workspace_overrid"
            "e, user_default or null' USING ERRCODE = 'integrity_constraint_violation'; END IF;\nRE"
            "TURN NEW;\nEND $$"
        ),
        (
            "CREATE OR REPLACE FUNCTION powercontext_api_key_guard() RETURNS trigger LANGUAGE plpg"
            "sql SET search_path = pg_catalog, {schema}, pg_temp AS $$\nBEGIN\nIF TG_OP = 'DELETE' T"
            "HEN\n  IF OLD.revoked_at IS NOT NULL THEN RAISE EXCEPTION 'a revoked API key is never "
            "deleted' USING ERRCODE = 'integrity_constraint_violation'; END IF;\n  RETURN OLD;\nEND "
            "IF;\nIF NEW.id IS DISTINCT FROM OLD.id OR NEW.key_sha256 IS DISTINCT FROM OLD.key_sha2"
            "56 THEN RAISE EXCEPTION 'an API key keeps its id and hash' USING ERRCODE = 'integrity"
            "_constraint_violation'; END IF;\nIF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS D"
            "ISTINCT FROM OLD.revoked_at THEN RAISE EXCEPTION 'the revocation of an API key is fin"
            "al' USING ERRCODE = 'integrity_constraint_violation'; END IF;\nRETURN NEW;\nEND $$"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_immutable BEFORE UPDATE OR DELETE ON "
            "artifacts_artifactrevision FOR EACH ROW EXECUTE FUNCTION powercontext_revision_change"
            "_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_append_only BEFORE INSERT ON artifact"
            "s_artifactrevision FOR EACH ROW EXECUTE FUNCTION powercontext_revision_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_revision_no_truncate BEFORE TRUNCATE ON artifa"
            "cts_artifactrevision FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_entry_version_immutable BEFORE INSERT OR UPDAT"
            "E OR DELETE ON artifacts_memoryentryversion FOR EACH ROW EXECUTE FUNCTION powercontex"
            "t_entry_version_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_entry_version_no_truncate BEFORE TRUNCATE ON a"
            "rtifacts_memoryentryversion FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_c"
            "hange()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_artifact_guard BEFORE INSERT OR UPDATE OR DELE"
            "TE ON artifacts_artifact FOR EACH ROW EXECUTE FUNCTION powercontext_artifact_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_artifact_no_truncate BEFORE TRUNCATE ON artifa"
            "cts_artifact FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_scope_guard BEFORE UPDATE OR DELETE ON artifac"
            "ts_scope FOR EACH ROW EXECUTE FUNCTION powercontext_scope_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_scope_authority BEFORE INSERT OR UPDATE ON art"
            "ifacts_scope FOR EACH ROW EXECUTE FUNCTION powercontext_scope_authority_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_scope_no_truncate BEFORE TRUNCATE ON artifacts"
            "_scope FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_api_key_guard BEFORE UPDATE OR DELETE ON artif"
            "acts_apikey FOR EACH ROW EXECUTE FUNCTION powercontext_api_key_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_api_key_no_truncate BEFORE TRUNCATE ON artifac"
            "ts_apikey FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_erasure_immutable BEFORE UPDATE OR DELETE ON a"
            "rtifacts_erasure FOR EACH ROW EXECUTE FUNCTION powercontext_refuse_change()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_erasure_append_only BEFORE INSERT ON artifacts"
            "_erasure FOR EACH ROW EXECUTE FUNCTION powercontext_erasure_guard()"
        ),
        (
            "CREATE OR REPLACE TRIGGER powercontext_erasure_no_truncate BEFORE TRUNCATE ON artifac"
            "ts_erasure FOR EACH STATEMENT EXECUTE FUNCTION powercontext_refuse_truncate()"
        ),
        ("DROP TRIGGER IF EXISTS powercontext_revision_under_head ON artifacts_artifactrevision"),
        (
            "CREATE CONSTRAINT TRIGGER powercontext_revision_under_head AFTER INSERT ON artifacts_"
            "artifactrevision DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION powercon"
            "text_revision_head_check()"
        ),
    ),
}
UNINSTALL = _PREVIOUS.UNINSTALL
"""The same triggers by name as 0021 drops (frozen there)."""
_run = _PREVIOUS._run


def _forward(apps, schema_editor):
    _run(schema_editor, _PREVIOUS.UNINSTALL)
    _run(schema_editor, INSTALL)


def _reverse(apps, schema_editor):
    _run(schema_editor, UNINSTALL)
    _run(schema_editor, _PREVIOUS.INSTALL)  # the set 0021 froze


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0022_history_chain_covers_reads")]

    operations = [migrations.RunPython(_forward, _reverse)]
