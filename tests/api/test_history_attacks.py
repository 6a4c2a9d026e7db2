"""The attacks on history of issue 34, run as the attacker ran them, each refused.

As the least-privilege runtime role: on PostgreSQL a role with exactly the grants of docs/deployment.md §2 (plus
TEMPORARY, which the guide revokes: the shadowing attack must fail even where an operator left it), connected
with psycopg; on SQLite the app's own connection. Through the ORM too, and through the public API afterwards:
what a citation resolves to is unchanged. Each case runs on the current engine (CI runs SQLite and PostgreSQL).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from contextlib import contextmanager

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from artifacts import services
from artifacts.models import ApiKey, Artifact, ArtifactRevision, MemoryEntryVersion, RecallCorpusStat, Scope
from tests.api.factories import add_memory, make_key, make_key_object, prepare, read_revision
from tests.postgres import direct_postgres_address

Statement = str | tuple[str, Sequence]


class Runtime:
    """Raw SQL as the runtime role, each call one transaction."""

    def __init__(self, psycopg_connection=None):
        self.pg = psycopg_connection

    def run(self, *statements: Statement) -> list:
        """Run the statements in one transaction; the last one's rows (if it returns any)."""
        rows = []
        if self.pg is None:
            with transaction.atomic(), connection.cursor() as cursor:
                for statement in statements:
                    sql, params = (statement, None) if isinstance(statement, str) else statement
                    cursor.execute(sql, params)
                    rows = cursor.fetchall() if cursor.description else []
            return rows
        with self.pg.transaction(), self.pg.cursor() as cursor:
            for statement in statements:
                sql, params = (statement, None) if isinstance(statement, str) else statement
                cursor.execute(sql, params)
                rows = cursor.fetchall() if cursor.description else []
        return rows

    def refused(self, *statements: Statement) -> None:
        errors = (DatabaseError,) if self.pg is None else (DatabaseError, _psycopg().Error)
        with pytest.raises(errors):
            self.run(*statements)

    @property
    def defer_foreign_keys(self) -> str:
        """The statement that defers every foreign key check to the commit, on this engine."""
        return "PRAGMA defer_foreign_keys = ON" if self.pg is None else "SET CONSTRAINTS ALL DEFERRED"


def _psycopg():
    import psycopg

    return psycopg


@pytest.fixture
def runtime(committed_db):
    """The runtime role: committed data, and on PostgreSQL its own connection as a role with the guide's grants."""
    if connection.vendor != "postgresql":
        yield Runtime()
        return
    role = f"pc_runtime_{secrets.token_hex(4)}"
    settings = connection.settings_dict
    with connection.cursor() as cursor:
        cursor.execute("SELECT quote_ident(current_schema()), quote_ident(current_database())")
        schema, database = cursor.fetchone()
        cursor.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
        cursor.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
        cursor.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
        cursor.execute(f"GRANT TEMPORARY ON DATABASE {database} TO {role}")
    psycopg = _psycopg()
    host, port = direct_postgres_address(settings)
    pg = psycopg.connect(host=host, port=port, dbname=settings["NAME"], user=role)
    pg.autocommit = True
    try:
        yield Runtime(pg)
    finally:
        pg.close()
        with connection.cursor() as cursor:
            cursor.execute(f"DROP OWNED BY {role}")
            cursor.execute(f"DROP ROLE {role}")


@pytest.fixture
def history(runtime):
    """Memory revisions 1-3 (e1, then e2, then e3) and an experience, written by the services and committed."""
    scope = services.scope_create(scope_id="project:attacked")
    for entry in ("e1", "e2", "e3"):
        add_memory(scope, {entry: f"the text of {entry}"})
    services.experience_revision_create(scope=scope, artifact_id="x", body="lesson", author="test")
    return scope


def memory(scope: Scope) -> Artifact:
    return Artifact.objects.get(scope=scope, family="memory")


def stored():
    """Every row a citation resolves through, as stored."""
    return (
        list(Scope.objects.order_by("pk").values_list()),
        list(Artifact.objects.order_by("pk").values_list()),
        list(ArtifactRevision.objects.order_by("pk").values_list()),
        list(MemoryEntryVersion.objects.order_by("pk").values_list()),
    )


def e1_at_revision_3(client, key) -> int:
    """The status of the exact read an earlier citation of e1 at revision 3 makes."""
    return read_revision(
        client,
        key,
        scope_id="project:attacked",
        family="memory",
        artifact_id="memory",
        revision=3,
        entry_id="e1",
        entry_version="e1-v1",
    ).status_code


_NEW_VERSION = (
    "INSERT INTO artifacts_memoryentryversion (artifact_id, entry_id, version_id, body, content_sha256, "
    "born_in_revision, born_ordinal, created_at) VALUES (%s, %s, %s, 'forged', %s, %s, %s, %s)"
)


def new_version(artifact: Artifact, entry_id: str, revision: int, ordinal: int | None, table: str = "") -> Statement:
    """An INSERT of a forged entry version; without an ordinal, exactly as the attacker wrote it."""
    sql = _NEW_VERSION.replace("artifacts_memoryentryversion", table or "artifacts_memoryentryversion")
    params = [artifact.pk, entry_id, f"{entry_id}-v1", "0" * 64, revision, ordinal, timezone.now()]
    if ordinal is None:
        sql = sql.replace(" born_ordinal,", "").replace(" %s, %s)", " %s)", 1)
        del params[5]
    return sql, params


def retire(artifact: Artifact, entry_id: str, revision: int, ordinal: int | None, table: str = "") -> Statement:
    """An UPDATE retiring an entry's live version; without an ordinal, exactly as the attacker wrote it."""
    position = "" if ordinal is None else f", retired_ordinal = {ordinal}"
    return (
        f"UPDATE {table or 'artifacts_memoryentryversion'} SET retired_in_revision = %s{position} "
        "WHERE artifact_id = %s AND entry_id = %s AND retired_in_revision IS NULL",
        [revision, artifact.pk, entry_id],
    )


# --- 1. retiring (or adding) without the write of a revision ------------------------------------------


@pytest.mark.parametrize("ordinal", [None, 1, 2])
def test_a_live_entry_cannot_be_retired_outside_the_write_of_a_revision(client, runtime, history, ordinal):
    key = make_key(read=[history])
    artifact = memory(history)
    assert e1_at_revision_3(client, key) == 200
    before = stored()
    runtime.refused(retire(artifact, "e1", artifact.head_revision, ordinal))
    assert stored() == before
    assert e1_at_revision_3(client, key) == 200


def test_the_orm_cannot_retire_an_entry_outside_the_write_of_a_revision(client, history):
    key = make_key(read=[history])
    artifact = memory(history)
    before = stored()
    for fields in ({}, {"retired_ordinal": 1}):
        with pytest.raises(DatabaseError), transaction.atomic():
            MemoryEntryVersion.objects.filter(
                artifact=artifact, entry_id="e1", retired_in_revision__isnull=True
            ).update(retired_in_revision=artifact.head_revision, **fields)
    assert stored() == before
    assert e1_at_revision_3(client, key) == 200


@pytest.mark.parametrize("ordinal", [None, 1, 2])
def test_no_entry_can_be_added_to_the_head_after_its_write(runtime, history, ordinal):
    artifact = memory(history)
    before = stored()
    runtime.refused(new_version(artifact, "forged", artifact.head_revision, ordinal))
    assert stored() == before


def test_a_revision_holds_only_the_changes_it_declares_even_inside_its_own_write(runtime, history):
    # A raw write that declares one new entry may add one, and not a second.
    artifact = memory(history)
    number = artifact.head_revision + 1
    start = (
        (
            "INSERT INTO artifacts_artifactrevision (artifact_id, revision, content_sha256, author, created_at, "
            "entries_born, entries_retired) VALUES (%s, %s, %s, 'raw', %s, 1, 0)",
            [artifact.pk, number, "0" * 64, timezone.now()],
        ),
        ("UPDATE artifacts_artifact SET head_revision = %s WHERE id = %s", [number, artifact.pk]),
        new_version(artifact, "new", number, 1),
    )
    before = stored()
    runtime.refused(*start, new_version(artifact, "more", number, 2))
    runtime.refused(*start, new_version(artifact, "more", number, 1))
    runtime.refused(*start, retire(artifact, "e1", number, 1))
    assert stored() == before
    runtime.run(*start)
    assert MemoryEntryVersion.objects.filter(artifact=artifact, born_in_revision=number).count() == 1


# --- 2. deleting and inserting again, foreign keys deferred -------------------------------------------


def test_an_artifact_cannot_be_deleted_and_inserted_again_to_rewrite_its_history(client, runtime, history):
    key = make_key(read=[history])
    artifact = memory(history)
    before = stored()
    runtime.refused(
        runtime.defer_foreign_keys,
        ("DELETE FROM artifacts_artifact WHERE id = %s", [artifact.pk]),
        (
            "INSERT INTO artifacts_artifact (id, scope_id, family, artifact_id, head_revision, created_at) "
            "VALUES (%s, %s, 'memory', 'memory', 0, %s)",
            [artifact.pk, history.pk, timezone.now()],
        ),
        ("UPDATE artifacts_artifact SET head_revision = 1 WHERE id = %s", [artifact.pk]),
        new_version(artifact, "forged", 1, None),
    )
    runtime.refused(("DELETE FROM artifacts_artifact WHERE id = %s", [artifact.pk]))
    assert stored() == before
    assert e1_at_revision_3(client, key) == 200


def test_the_orm_cannot_delete_an_artifact_even_one_without_revisions(history):
    # (One with revisions the ORM will not even try: they protect it.)
    bare = Artifact.objects.create(scope=history, family="skill", artifact_id="bare")
    with pytest.raises(DatabaseError), transaction.atomic():
        bare.delete()
    assert Artifact.objects.filter(pk=bare.pk).exists()


def test_a_scope_cannot_be_deleted_and_inserted_again_under_another_id(client, runtime, history):
    key = make_key(read=[history])
    before = stored()
    runtime.refused(
        runtime.defer_foreign_keys,
        ("DELETE FROM artifacts_scope WHERE id = %s", [history.pk]),
        (
            "INSERT INTO artifacts_scope (id, scope_id, title, created_at) VALUES (%s, 'project:renamed', '', %s)",
            [history.pk, timezone.now()],
        ),
    )
    assert stored() == before
    assert e1_at_revision_3(client, key) == 200
    assert prepare(client, key, scope_id="project:renamed", query="text").status_code == 404


def test_a_scope_without_artifacts_can_still_be_deleted(runtime, history):
    empty = services.scope_create(scope_id="project:empty")
    runtime.run(("DELETE FROM artifacts_scope WHERE id = %s", [empty.pk]))
    assert not Scope.objects.filter(pk=empty.pk).exists()


@pytest.mark.parametrize("table", ["artifacts_artifact", "artifacts_scope", "artifacts_apikey"])
def test_postgresql_refuses_truncating_what_history_and_revocations_hang_from(history, table):
    if connection.vendor != "postgresql":
        pytest.skip("TRUNCATE is PostgreSQL's (SQLite's DELETE is covered above)")
    services.api_key_revoke(api_key=make_key_object(read=[history])[0])
    before = (stored(), list(ApiKey.objects.order_by("pk").values_list()))
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {table} CASCADE")  # as the tests' connection: the owner (the runtime role may not)
    assert (stored(), list(ApiKey.objects.order_by("pk").values_list())) == before


# --- revocation is final --------------------------------------------------------------------------


@pytest.fixture
def revoked(history):
    api_key, plaintext = make_key_object(read=[history])
    services.api_key_revoke(api_key=api_key)
    api_key.refresh_from_db()
    return api_key, plaintext


def keys():
    return list(ApiKey.objects.order_by("pk").values_list())


def test_a_revoked_key_cannot_be_revoked_back_or_redated(client, runtime, revoked):
    api_key, plaintext = revoked
    before = keys()
    runtime.refused(("UPDATE artifacts_apikey SET revoked_at = NULL WHERE id = %s", [api_key.pk]))
    runtime.refused(("UPDATE artifacts_apikey SET revoked_at = %s WHERE id = %s", [timezone.now(), api_key.pk]))
    with pytest.raises(DatabaseError), transaction.atomic():
        ApiKey.objects.filter(pk=api_key.pk).update(revoked_at=None)
    assert keys() == before
    assert prepare(client, plaintext, scope_id="project:attacked", query="text").status_code == 401


def test_a_revoked_key_cannot_be_deleted_and_inserted_again_unrevoked(client, runtime, revoked):
    api_key, plaintext = revoked
    before = keys()
    runtime.refused(
        runtime.defer_foreign_keys,
        ("DELETE FROM artifacts_apikey WHERE id = %s", [api_key.pk]),
        (
            "INSERT INTO artifacts_apikey (id, name, key_prefix, key_sha256, created_at) VALUES (%s, %s, %s, %s, %s)",
            [api_key.pk, api_key.name, api_key.key_prefix, api_key.key_sha256, timezone.now()],
        ),
    )
    runtime.refused(("DELETE FROM artifacts_apikey WHERE id = %s", [api_key.pk]))
    assert keys() == before
    assert prepare(client, plaintext, scope_id="project:attacked", query="text").status_code == 401


def test_a_key_keeps_its_hash(runtime, revoked, history):
    active, _ = make_key_object(read=[history])
    revoked_key, _ = revoked
    before = keys()
    for pk in (active.pk, revoked_key.pk):
        runtime.refused(("UPDATE artifacts_apikey SET key_sha256 = %s WHERE id = %s", ["0" * 64, pk]))
    assert keys() == before


def test_sqlite_replace_cannot_unrevoke_a_key(client, revoked):
    if connection.vendor != "sqlite":
        pytest.skip("REPLACE is SQLite's (PostgreSQL's ON CONFLICT DO UPDATE is an UPDATE, refused the same way)")
    api_key, plaintext = revoked
    before = keys()
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "REPLACE INTO artifacts_apikey (id, name, key_prefix, key_sha256, created_at) VALUES (%s, %s, %s, %s, %s)",
            [api_key.pk, api_key.name, api_key.key_prefix, api_key.key_sha256, timezone.now()],
        )
    assert keys() == before
    assert prepare(client, plaintext, scope_id="project:attacked", query="text").status_code == 401


def test_sqlite_replace_cannot_delete_a_revoked_key_by_giving_another_key_its_name(history):
    # An attack review found this: a key's name is unique, and an UPDATE OR REPLACE onto a revoked key's name deleted
    # the revoked key (a REPLACE's delete fires no trigger, and a key without grants holds no foreign key), which
    # could then be inserted again unrevoked.
    if connection.vendor != "sqlite":
        pytest.skip("REPLACE is SQLite's (PostgreSQL's ON CONFLICT DO UPDATE is an UPDATE, refused the same way)")
    api_key, _ = make_key_object()
    services.api_key_revoke(api_key=api_key)
    other, _ = make_key_object(read=[history])
    before = keys()
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE OR REPLACE artifacts_apikey SET name = %s WHERE id = %s", [api_key.name, other.pk])
    assert keys() == before


def test_an_active_key_can_still_be_revoked_and_deleted(client, runtime, history):
    api_key, plaintext = make_key_object(read=[history])
    other, _ = make_key_object(read=[history])
    services.api_key_revoke(api_key=api_key)
    assert prepare(client, plaintext, scope_id="project:attacked", query="text").status_code == 401
    runtime.run(
        ("DELETE FROM artifacts_apikeygrant WHERE api_key_id = %s", [other.pk]),
        ("DELETE FROM artifacts_apikey WHERE id = %s", [other.pk]),
    )
    assert not ApiKey.objects.filter(pk=other.pk).exists()


# --- 3. a temporary table shadowing a table the triggers read -------------------------------------------


@contextmanager
def temporary_tables(runtime: Runtime, *statements: Statement):
    """The runtime role's session with temporary tables named like ours (SQLite: dropped afterwards, since the
    app's connection outlives the test)."""
    runtime.run(*statements)
    try:
        yield
    finally:
        if runtime.pg is None:
            for name in ("artifacts_artifact", "artifacts_artifactrevision", "artifacts_recallcorpusstat"):
                runtime.run(f"DROP TABLE IF EXISTS temp.{name}")


def _shadows(artifact: Artifact, *, head: int) -> tuple[Statement, ...]:
    return (
        "CREATE TEMP TABLE artifacts_artifact (id bigint, scope_id bigint, head_revision integer)",
        ("INSERT INTO artifacts_artifact VALUES (%s, %s, %s)", [artifact.pk, artifact.scope_id, head]),
        "CREATE TEMP TABLE artifacts_artifactrevision (artifact_id bigint, revision integer, entries_born integer, "
        "entries_retired integer)",
        ("INSERT INTO artifacts_artifactrevision VALUES (%s, %s, 1000, 1000)", [artifact.pk, head]),
    )


def test_a_temporary_table_cannot_stand_in_for_the_tables_the_guards_read(client, runtime, history):
    key = make_key(read=[history])
    artifact = memory(history)
    entries = "main.artifacts_memoryentryversion" if runtime.pg is None else "public.artifacts_memoryentryversion"
    before = stored()
    with temporary_tables(runtime, *_shadows(artifact, head=1)):
        for ordinal in (None, 1):
            runtime.refused(new_version(artifact, "forged", 1, ordinal, table=entries))
            runtime.refused(retire(artifact, "e1", 1, ordinal, table=entries))
    assert stored() == before
    assert e1_at_revision_3(client, key) == 200


def test_a_temporary_table_cannot_take_a_head_move_away_from_the_corpus_generation(runtime, history):
    # A write made by hand (a revision, the head moved onto it) renews the scope's memory generation even while a
    # temporary table shadows the corpus row: kept copies of the scope are never trusted past the move.
    artifact = memory(history)
    corpus = RecallCorpusStat.objects.get(scope=history, family="memory")
    number = artifact.head_revision + 1
    with temporary_tables(
        runtime,
        "CREATE TEMP TABLE artifacts_recallcorpusstat (id bigint, scope_id bigint, family text, generation bigint)",
        ("INSERT INTO artifacts_recallcorpusstat VALUES (%s, %s, 'memory', 7)", [corpus.pk, history.pk]),
    ):
        runtime.run(
            (
                "INSERT INTO artifacts_artifactrevision (artifact_id, revision, content_sha256, author, created_at) "
                "VALUES (%s, %s, %s, 'raw', %s)",
                [artifact.pk, number, "0" * 64, timezone.now()],
            ),
            ("UPDATE artifacts_artifact SET head_revision = %s WHERE id = %s", [number, artifact.pk]),
        )
    assert RecallCorpusStat.objects.get(pk=corpus.pk).generation != corpus.generation
