"""History cannot be rewritten by any path: raw SQL as an attacker with database access would write it,
SQLite's REPLACE, the ORM, flush. Each case runs on the current engine (CI runs SQLite and PostgreSQL)."""

import re

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from artifacts import services
from artifacts.immutability import (
    ARTIFACT_FROZEN_COLUMNS,
    ENTRY_FROZEN_COLUMNS,
    SCOPE_FROZEN_COLUMNS,
    SQLITE_INSTALL,
)
from artifacts.models import Artifact, ArtifactRevision, MemoryEntryVersion, Scope
from tests.api.factories import add_memory, make_key, make_scope, read_revision

REVISION_COLUMNS = (
    "artifact_id",
    "revision",
    "body",
    "title",
    "summary",
    "content_sha256",
    "author",
    "created_at",
    "entries_born",
    "entries_retired",
    "chain_sha256",
    "texts_sha256",
)
_NUMBERS = ("artifact_id", "revision", "entries_born", "entries_retired")


def raw(sql: str, params=()) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def refused(sql: str, params=()) -> None:
    with pytest.raises(DatabaseError):
        raw(sql, params)


def state():
    """Everything a citation resolves through, as stored."""
    return (
        list(Scope.objects.order_by("pk").values_list("pk", "scope_id")),
        list(Artifact.objects.order_by("pk").values_list("pk", "scope_id", "family", "artifact_id", "head_revision")),
        list(ArtifactRevision.objects.order_by("pk").values_list("pk", *REVISION_COLUMNS)),
        list(MemoryEntryVersion.objects.order_by("pk").values_list()),
    )


@pytest.fixture
def history(db):
    scope = make_scope("project:guarded")
    add_memory(scope, {"e": "first"})
    add_memory(scope, {"e": "second", "f": "other"})
    services.experience_revision_create(scope=scope, artifact_id="x", body="lesson", author="test")
    return scope


def memory(scope) -> Artifact:
    return Artifact.objects.get(scope=scope, family="memory")


def sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip(
            "REPLACE is SQLite's (PostgreSQL's ON CONFLICT DO UPDATE is an UPDATE, refused by the same triggers)"
        )


# --- revisions and entry versions: every frozen column ------------------------------------------


@pytest.mark.parametrize("column", REVISION_COLUMNS)
def test_no_column_of_a_revision_can_change(history, column):
    before = state()
    value = "2000-01-01 00:00:00" if column == "created_at" else 999 if column in _NUMBERS else "x"
    refused(f"UPDATE artifacts_artifactrevision SET {column} = %s", [value])
    assert state() == before


@pytest.mark.parametrize("column", [c for c in ENTRY_FROZEN_COLUMNS if c != "id"])
def test_retiring_a_version_cannot_change_any_of_its_frozen_columns(history, column):
    artifact = memory(history)
    services.memory_revision_create(scope=history, artifact_id="memory", writes=[], removals=["f"], author="t")
    live = MemoryEntryVersion.objects.get(artifact=artifact, entry_id="e", retired_in_revision__isnull=True)
    # Begin a write as the services would (a revision declaring one retirement, the head moved onto it), so that
    # retiring "e" by the head is allowed on its own.
    raw(
        "INSERT INTO artifacts_artifactrevision (artifact_id, revision, content_sha256, author, created_at, "
        "entries_retired) VALUES (%s, %s, %s, %s, %s, 1)",
        [artifact.pk, 4, "0" * 64, "raw", timezone.now()],
    )
    raw("UPDATE artifacts_artifact SET head_revision = 4 WHERE id = %s", [artifact.pk])
    before = state()
    value = {"born_in_revision": 1, "artifact_id": 999, "born_ordinal": 7, "created_at": "2000-01-01 00:00:00"}
    refused(
        f"UPDATE artifacts_memoryentryversion SET retired_in_revision = 4, retired_ordinal = 1, {column} = %s "
        "WHERE id = %s",
        [value.get(column, "x"), live.pk],
    )
    assert state() == before
    raw("UPDATE artifacts_memoryentryversion SET retired_in_revision = 4, retired_ordinal = 1 WHERE id = %s", [live.pk])


def test_a_revision_is_inserted_only_as_the_next_one(history):
    artifact = Artifact.objects.get(scope=history, family="experience")
    before = state()
    for number in (1, artifact.head_revision, artifact.head_revision + 2):
        refused(
            "INSERT INTO artifacts_artifactrevision (artifact_id, revision, body, content_sha256, author, created_at) "
            "VALUES (%s, %s, 'forged', %s, 'attacker', %s)",
            [artifact.pk, number, "0" * 64, timezone.now()],
        )
    assert state() == before


def test_an_entry_version_is_inserted_only_live_into_the_head_revision(history):
    artifact = memory(history)
    before = state()
    insert = (
        "INSERT INTO artifacts_memoryentryversion (artifact_id, entry_id, version_id, body, content_sha256, "
        "born_in_revision, retired_in_revision, created_at) VALUES (%s, %s, %s, 'forged', %s, %s, %s, %s)"
    )
    refused(insert, [artifact.pk, "new", "new-v1", "0" * 64, 1, None, timezone.now()])  # into an old revision
    refused(insert, [artifact.pk, "new", "new-v1", "0" * 64, 2, 3, timezone.now()])  # born retired
    assert state() == before


# --- artifacts and scopes --------------------------------------------------------------------------


@pytest.mark.parametrize("head", [0, 1, 3, 99])
def test_an_artifact_head_moves_only_forward_by_one_onto_an_existing_revision(history, head):
    artifact = memory(history)  # head 2
    before = state()
    refused("UPDATE artifacts_artifact SET head_revision = %s WHERE id = %s", [head, artifact.pk])
    assert state() == before
    # The very next write still succeeds: the head was never rewound.
    add_memory(history, {"g": "after"})
    assert memory(history).head_revision == 3


@pytest.mark.parametrize("column", [c for c in ARTIFACT_FROZEN_COLUMNS if c != "id"])
def test_an_artifact_identity_never_changes(history, column):
    other = make_scope("project:other")
    value = {"scope_id": other.pk, "family": "experience", "artifact_id": "renamed"}.get(column, "2000-01-01 00:00:00")
    before = state()
    refused(f"UPDATE artifacts_artifact SET {column} = %s WHERE id = %s", [value, memory(history).pk])
    assert state() == before


def test_a_new_artifact_starts_without_revisions(history):
    refused(
        "INSERT INTO artifacts_artifact (scope_id, family, artifact_id, head_revision, created_at) "
        "VALUES (%s, 'memory', 'forged', 5, %s)",
        [history.pk, timezone.now()],
    )


def test_a_scope_id_never_changes_and_citations_keep_resolving(client, history):
    key = make_key(read=[history])
    before = state()
    refused("UPDATE artifacts_scope SET scope_id = 'project:renamed' WHERE id = %s", [history.pk])
    assert state() == before
    raw("UPDATE artifacts_scope SET title = 'retitled' WHERE id = %s", [history.pk])  # the title may change
    response = read_revision(client, key, scope_id="project:guarded", family="memory", artifact_id="memory", revision=1)
    assert response.status_code == 200


# --- SQLite REPLACE --------------------------------------------------------------------------------


def test_sqlite_replace_cannot_rewrite_a_revision(client, history):
    sqlite_only()
    revision = ArtifactRevision.objects.get(artifact__scope=history, artifact__family="experience", revision=1)
    before = state()
    for verb in ("INSERT OR REPLACE INTO", "REPLACE INTO"):
        refused(
            f"{verb} artifacts_artifactrevision (id, artifact_id, revision, body, content_sha256, author, created_at) "
            "VALUES (%s, %s, 1, 'forged', %s, 'attacker', %s)",
            [revision.pk, revision.artifact_id, "0" * 64, timezone.now()],
        )
    assert state() == before
    key = make_key(read=[history])
    response = read_revision(client, key, scope_id="project:guarded", family="experience", artifact_id="x", revision=1)
    assert response.json()["body"] == "lesson"


def test_sqlite_replace_cannot_rewrite_an_entry_version_an_artifact_or_a_scope(history):
    sqlite_only()
    version = MemoryEntryVersion.objects.filter(retired_in_revision__isnull=True).first()
    artifact = memory(history)
    before = state()
    refused(
        "REPLACE INTO artifacts_memoryentryversion (id, artifact_id, entry_id, version_id, body, content_sha256, "
        "born_in_revision, created_at) VALUES (%s, %s, %s, %s, 'forged', %s, %s, %s)",
        [
            version.pk,
            artifact.pk,
            version.entry_id,
            version.version_id,
            "0" * 64,
            version.born_in_revision,
            timezone.now(),
        ],
    )
    refused(
        "REPLACE INTO artifacts_artifact (id, scope_id, family, artifact_id, head_revision, created_at) "
        "VALUES (%s, %s, 'memory', 'renamed', 0, %s)",
        [artifact.pk, history.pk, timezone.now()],
    )
    refused(
        "REPLACE INTO artifacts_scope (id, scope_id, title, created_at) VALUES (%s, 'project:renamed', '', %s)",
        [history.pk, timezone.now()],
    )
    assert state() == before


def _memory_version(history, version_id: str) -> MemoryEntryVersion:
    return MemoryEntryVersion.objects.get(artifact__scope=history, version_id=version_id)


def test_sqlite_replace_cannot_take_a_birth_position_and_so_delete_the_version_born_there(history):
    # An attack review found this: the head revision's births are numbered, the positions unique; a REPLACE onto a
    # taken one deleted the version holding it (a REPLACE's delete fires no trigger), and a second put it back forged.
    sqlite_only()
    born = MemoryEntryVersion.objects.get(artifact=memory(history), born_in_revision=2, born_ordinal=1)
    before = state()
    refused(
        "INSERT OR REPLACE INTO artifacts_memoryentryversion (id, artifact_id, entry_id, version_id, body, "
        "content_sha256, born_in_revision, created_at, born_ordinal) VALUES (%s, %s, 'g', 'g-v1', 'forged', %s, 2, "
        "%s, 1)",
        [born.pk + 1000, born.artifact_id, "0" * 64, timezone.now()],
    )
    assert state() == before


def test_sqlite_replace_cannot_take_a_retirement_position_and_so_delete_the_version_retired_there(history):
    sqlite_only()
    add_memory(history, {"e": "third"})  # revision 3 retires e's second version (position 1) and births a third
    retired = MemoryEntryVersion.objects.get(artifact=memory(history), retired_in_revision=3)
    live = MemoryEntryVersion.objects.get(artifact=memory(history), entry_id="f")  # born in 2, still live
    before = state()
    refused(
        "UPDATE OR REPLACE artifacts_memoryentryversion SET retired_in_revision = 3, retired_ordinal = %s "
        "WHERE id = %s",
        [retired.retired_ordinal, live.pk],
    )
    assert state() == before


def test_sqlite_replace_cannot_take_a_revision_number_even_in_the_transaction_writing_it(history):
    sqlite_only()
    artifact = Artifact.objects.get(scope=history, family="experience")
    insert = (
        "{verb} artifacts_artifactrevision (id, artifact_id, revision, body, content_sha256, author, created_at) "
        "VALUES (%s, %s, 2, %s, %s, 'attacker', %s)"
    )
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(insert.format(verb="INSERT INTO"), [9001, artifact.pk, "first", "0" * 64, timezone.now()])
        cursor.execute(
            insert.format(verb="INSERT OR REPLACE INTO"), [9002, artifact.pk, "2nd", "0" * 64, timezone.now()]
        )


# --- the guards' column lists (every trigger is in place: test_trigger_migrations.py) -----------------


def test_the_frozen_columns_are_every_column_but_the_documented_mutable_ones():
    # The tests above iterate the guards' own column lists: a column dropped from a list (or a new model
    # column never added to one) would leave both the trigger and its test silent. Mutable: an entry
    # version's retirement (and its position among its revision's retirements), an artifact's head, a scope's title,
    # operator-set authority tier and creation time.
    def columns(model) -> set[str]:
        return {field.column for field in model._meta.concrete_fields}

    assert set(ENTRY_FROZEN_COLUMNS) == columns(MemoryEntryVersion) - {"retired_in_revision", "retired_ordinal"}
    assert set(ARTIFACT_FROZEN_COLUMNS) == columns(Artifact) - {"head_revision"}
    assert set(SCOPE_FROZEN_COLUMNS) == columns(Scope) - {"title", "created_at", "authority"}
    assert set(REVISION_COLUMNS) == columns(ArtifactRevision) - {"id"}


def _exists_subqueries(statement: str) -> list[str]:
    """The ``EXISTS (SELECT …)`` lookups of a trigger, with ``NEW.x`` and ``OLD.x`` as parameters ``:x``."""
    found, start = [], 0
    while (at := statement.find("EXISTS (SELECT", start)) != -1:
        depth, end = 0, at + len("EXISTS ")
        for end in range(at + len("EXISTS "), len(statement)):
            depth += {"(": 1, ")": -1}.get(statement[end], 0)
            if depth == 0:
                break
        found.append(re.sub(r"\b(?:NEW|OLD)\.(\w+)", r":\1", statement[at + len("EXISTS (") : end]))
        start = end
    return found


def test_sqlite_every_lookup_of_the_history_guards_is_one_index_search(db):
    # Each guard runs on every write of its table: a lookup that scans (e.g. every version of an artifact) would make
    # a write cost grow with the history. Read from the plans SQLite chooses for the guards' own lookups.
    sqlite_only()
    lookups = [q for statement in SQLITE_INSTALL for q in _exists_subqueries(statement)]
    assert len(lookups) >= 8
    with connection.cursor() as cursor:
        for lookup in lookups:
            names = set(re.findall(r":(\w+)", lookup))
            cursor.execute(f"EXPLAIN QUERY PLAN {lookup}", dict.fromkeys(names, 1))
            plan = [row[-1] for row in cursor.fetchall()]
            scans = [step for step in plan if step.startswith("SCAN") or step.endswith("(artifact_id=?)")]
            assert not scans, (lookup, plan)
