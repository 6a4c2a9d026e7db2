"""Checks and revision allocation shared by every write service.

Revision numbers per artifact are 1, 2, 3 … with no gap, even under concurrent writers (PostgreSQL: a
row lock on the artifact; SQLite: IMMEDIATE transactions, see settings).
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import IntegrityError, connection, transaction

from artifacts.models import (
    Artifact,
    ArtifactRevision,
    Scope,
)
from vocabulary.errors import Conflict, InvalidInput
from vocabulary.limits import (
    MAX_BODY_CHARACTERS,
    MAX_IDENTIFIER_CHARACTERS,
)
from vocabulary.text import text_problem


def check_text(value: str, *, path: str, max_length: int = MAX_BODY_CHARACTERS, allow_empty: bool = False) -> str:
    """``value`` unchanged, or InvalidInput naming ``path`` (the shared rule of ``text_problem``)."""
    problem = text_problem(value, max_length=max_length, allow_empty=allow_empty)
    if problem:
        raise InvalidInput(problem, path=path)
    return value


def check_identifier(value: str, *, path: str) -> str:
    """An id (scope, artifact, entry, version, key name): non-empty, at most 200 characters."""
    return check_text(value, path=path, max_length=MAX_IDENTIFIER_CHARACTERS)


def artifact_for_write(*, scope: Scope, family: str, artifact_id: str) -> Artifact:
    """The artifact, created on first write, locked for the rest of the transaction."""
    check_identifier(artifact_id, path="artifact_id")
    try:
        with transaction.atomic():
            artifact, _ = Artifact.objects.get_or_create(scope=scope, family=family, artifact_id=artifact_id)
    except IntegrityError:  # a concurrent writer created it first
        pass
    return Artifact.objects.select_for_update().get(scope=scope, family=family, artifact_id=artifact_id)


def next_revision(artifact: Artifact, *, expected_head_revision: int | None) -> int:
    """The number of the artifact's next revision (head + 1), or Conflict when the head is not the expected one."""
    if expected_head_revision is not None and expected_head_revision != artifact.head_revision:
        raise Conflict(f"expected head revision {expected_head_revision}, but the head is {artifact.head_revision}")
    return artifact.head_revision + 1


def revision_append(*, artifact: Artifact, number: int, **fields) -> ArtifactRevision:
    """Insert revision ``number`` (head + 1), then move the head onto it.

    The order the database's history guards require (artifacts/immutability.py): a revision is inserted
    only as head + 1, and the head moves only onto a revision that exists.
    """
    revision = ArtifactRevision.objects.create(artifact=artifact, revision=number, **fields)
    Artifact.objects.filter(pk=artifact.pk).update(head_revision=number)
    artifact.head_revision = number
    return revision


def rows_purge(*, queryset, batch: int, progress: Callable[[int], None]) -> int:
    """Delete the rows of ``queryset`` in batches of ``batch``; ``progress`` gets the running total. Returns it."""
    deleted = 0
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:batch])
        if not ids:
            return deleted
        deleted += queryset.model.objects.filter(pk__in=ids).delete()[0]
        progress(deleted)


def database_wal_checkpoint() -> tuple[int, int] | None:
    """SQLite: copy the write-ahead log into the database and truncate it to zero bytes (None elsewhere, or inside
    a transaction).

    Returns (log frames, frames checkpointed); a reader still using old frames makes it partial (busy), and the
    file then stays until the next checkpoint. ``journal_size_limit`` (settings) bounds it at each reset anyway.
    """
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return None  # a checkpoint cannot run inside a transaction (SQLite refuses it: "table is locked")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        _busy, frames, checkpointed = cursor.fetchone()
    return frames, checkpointed
