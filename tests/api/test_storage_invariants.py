"""Storage invariants kept by the database itself: constraints, immutability triggers, gapless revisions."""

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from artifacts import services
from artifacts.models import (
    Artifact,
    ArtifactRevision,
    ContextReference,
    MemoryEntryVersion,
    Scope,
)
from tests import waits

WRITERS = 8
WRITES_PER_WRITER = 10


def write(**kwargs) -> services.MemoryRevisionResult:
    return services.memory_revision_create(author="test", **kwargs)


def entry(entry_id: str, body: str, version_id: str | None = None) -> services.EntryVersionWrite:
    return services.EntryVersionWrite(entry_id=entry_id, version_id=version_id, body=body)


# --- model constraints --------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_scope_cannot_reference_itself_even_bypassing_services():
    scope = Scope.objects.create(scope_id="project:a")
    with pytest.raises(IntegrityError), transaction.atomic():
        ContextReference.objects.create(scope=scope, target=scope, position=1)


@pytest.mark.django_db
def test_reference_positions_and_targets_are_unique_per_scope():
    a, b, c = (Scope.objects.create(scope_id=f"scope:{name}") for name in "abc")
    ContextReference.objects.create(scope=a, target=b, position=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        ContextReference.objects.create(scope=a, target=c, position=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        ContextReference.objects.create(scope=a, target=b, position=2)
    ContextReference.objects.create(scope=a, target=c, position=2)
    assert list(ContextReference.objects.filter(scope=a).values_list("target__scope_id", flat=True)) == [
        "scope:b",
        "scope:c",
    ]


@pytest.mark.django_db
def test_an_artifact_identity_is_unique_per_scope_and_family():
    scope = Scope.objects.create(scope_id="project:a")
    other = Scope.objects.create(scope_id="project:b")
    Artifact.objects.create(scope=scope, family="memory", artifact_id="memory")
    with pytest.raises(IntegrityError), transaction.atomic():
        Artifact.objects.create(scope=scope, family="memory", artifact_id="memory")
    Artifact.objects.create(scope=scope, family="experience", artifact_id="memory")
    Artifact.objects.create(scope=other, family="memory", artifact_id="memory")


@pytest.mark.django_db
def test_an_entry_has_at_most_one_live_version():
    scope = Scope.objects.create(scope_id="project:a")
    result = write(scope=scope, artifact_id="memory", writes=[entry("e", "first", "e-v1")])
    artifact = result.revision.artifact
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryEntryVersion.objects.create(
            artifact=artifact, entry_id="e", version_id="e-v2", body="second", content_sha256="0", born_in_revision=2
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryEntryVersion.objects.create(
            artifact=artifact,
            entry_id="f",
            version_id="e-v1",
            body="same version id",
            content_sha256="0",
            born_in_revision=2,
        )


@pytest.mark.django_db
def test_revision_numbers_are_unique_per_artifact():
    scope = Scope.objects.create(scope_id="project:a")
    revision = services.experience_revision_create(scope=scope, artifact_id="x", body="one", author="test")
    with pytest.raises(IntegrityError), transaction.atomic():
        ArtifactRevision.objects.create(artifact=revision.artifact, revision=1, body="again", author="t")


# --- immutability, enforced by the database (raw SQL on the current engine) ----------------------


@pytest.fixture
def history(db):
    """A memory with a retired and a live version, plus an experience revision."""
    scope = Scope.objects.create(scope_id="project:a")
    write(scope=scope, artifact_id="memory", writes=[entry("e", "first", "e-v1")])
    write(scope=scope, artifact_id="memory", writes=[entry("e", "second", "e-v2")])
    services.experience_revision_create(scope=scope, artifact_id="x", body="lesson", author="test")
    return scope


def raw(sql: str, params=()) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def snapshot():
    return (
        list(ArtifactRevision.objects.order_by("pk").values_list("pk", "revision", "body", "content_sha256")),
        list(
            MemoryEntryVersion.objects.order_by("pk").values_list(
                "pk", "body", "born_in_revision", "retired_in_revision"
            )
        ),
    )


IMMUTABLE_STATEMENTS = {
    "update a revision body": "UPDATE artifacts_artifactrevision SET body = 'x'",
    "update a revision number": "UPDATE artifacts_artifactrevision SET revision = revision + 100",
    "delete revisions": "DELETE FROM artifacts_artifactrevision",
    "update an entry version body": "UPDATE artifacts_memoryentryversion SET body = 'x'",
    "re-retire a retired version": (
        "UPDATE artifacts_memoryentryversion SET retired_in_revision = 7 WHERE retired_in_revision IS NOT NULL"
    ),
    "revive a retired version": (
        "UPDATE artifacts_memoryentryversion SET retired_in_revision = NULL WHERE retired_in_revision IS NOT NULL"
    ),
    "retire while changing the body": (
        "UPDATE artifacts_memoryentryversion SET retired_in_revision = 9, body = 'x' WHERE retired_in_revision IS NULL"
    ),
    "delete entry versions": "DELETE FROM artifacts_memoryentryversion",
}


@pytest.mark.parametrize("statement", list(IMMUTABLE_STATEMENTS))
def test_raw_sql_cannot_change_or_delete_revisions_or_entry_versions(history, statement):
    before = snapshot()
    with pytest.raises(DatabaseError):
        raw(IMMUTABLE_STATEMENTS[statement])
    assert snapshot() == before


@pytest.mark.parametrize("table", ["artifacts_artifactrevision", "artifacts_memoryentryversion"])
def test_postgresql_refuses_truncating_immutable_tables(history, table):
    if connection.vendor != "postgresql":
        pytest.skip("TRUNCATE is PostgreSQL's (SQLite's DELETE is covered above)")
    before = snapshot()
    with pytest.raises(DatabaseError):
        raw(f"TRUNCATE {table} CASCADE")
    assert snapshot() == before


def append_revision_raw(artifact_id: int, number: int) -> None:
    """What the write service does, by hand: insert revision ``number`` declaring one retirement, then move the head
    onto it."""
    raw(
        "INSERT INTO artifacts_artifactrevision (artifact_id, revision, content_sha256, author, created_at, "
        "entries_retired) VALUES (%s, %s, %s, %s, %s, 1)",
        [artifact_id, number, "0" * 64, "raw", timezone.now()],
    )
    raw("UPDATE artifacts_artifact SET head_revision = %s WHERE id = %s", [number, artifact_id])


def test_the_one_permitted_change_is_retiring_a_live_version_once_by_the_head_revision(history):
    live = MemoryEntryVersion.objects.get(retired_in_revision__isnull=True)
    retire = "UPDATE artifacts_memoryentryversion SET retired_in_revision = %s, retired_ordinal = 1 WHERE id = %s"
    for number in (999_999, 3):  # a number no revision has (the head is 2)
        with pytest.raises(DatabaseError):
            raw(retire, [number, live.pk])
    append_revision_raw(live.artifact_id, 3)
    raw(retire, [3, live.pk])
    live.refresh_from_db()
    assert live.retired_in_revision == 3
    append_revision_raw(live.artifact_id, 4)
    with pytest.raises(DatabaseError):
        raw(retire, [4, live.pk])


# --- concurrent writers -------------------------------------------------------------------------


def run_writers(target) -> list[BaseException]:
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.fail(
            "concurrent writers need a file-backed SQLite test database: an in-memory shared-cache database "
            "answers SQLITE_LOCKED, which the busy timeout does not wait for "
            "(set DATABASES['default']['TEST']['NAME'] to a file for SQLite)"
        )
    start = waits.barrier(WRITERS)

    def runner(writer: int):
        def run() -> None:
            try:
                start.wait()
                for i in range(WRITES_PER_WRITER):
                    target(writer, i)
            finally:
                connection.close()

        return run

    return waits.run_threads([runner(w) for w in range(WRITERS)], what="writers", barriers=[start])


def test_concurrent_experience_writers_get_gapless_unique_revisions(committed_db):
    scope = Scope.objects.create(scope_id="project:concurrent")

    def target(writer: int, i: int) -> None:
        services.experience_revision_create(
            scope=scope, artifact_id="shared", body=f"writer {writer} write {i}", author=f"writer-{writer}"
        )

    assert run_writers(target) == []
    artifact = Artifact.objects.get(scope=scope, family="experience", artifact_id="shared")
    total = WRITERS * WRITES_PER_WRITER
    numbers = list(ArtifactRevision.objects.filter(artifact=artifact).values_list("revision", flat=True))
    assert sorted(numbers) == list(range(1, total + 1))
    assert artifact.head_revision == total
    bodies = set(ArtifactRevision.objects.filter(artifact=artifact).values_list("body", flat=True))
    assert len(bodies) == total


def test_concurrent_memory_writers_get_gapless_unique_revisions_and_keep_every_entry(committed_db):
    scope = Scope.objects.create(scope_id="project:concurrent")

    def target(writer: int, i: int) -> None:
        services.memory_revision_create(
            scope=scope,
            artifact_id="memory",
            writes=[entry(f"w{writer}-e{i}", f"writer {writer} entry {i}")],
            author=f"writer-{writer}",
        )

    assert run_writers(target) == []
    artifact = Artifact.objects.get(scope=scope, family="memory", artifact_id="memory")
    total = WRITERS * WRITES_PER_WRITER
    revisions = list(ArtifactRevision.objects.filter(artifact=artifact).order_by("revision"))
    assert [r.revision for r in revisions] == list(range(1, total + 1))
    assert artifact.head_revision == total
    assert len({r.content_sha256 for r in revisions}) == total
    versions = list(MemoryEntryVersion.objects.filter(artifact=artifact))
    assert len(versions) == total
    assert all(v.is_live_at(total) for v in versions)
    assert sorted(v.born_in_revision for v in versions) == list(range(1, total + 1))
    assert {v.entry_id for v in versions} == {f"w{w}-e{i}" for w in range(WRITERS) for i in range(WRITES_PER_WRITER)}
