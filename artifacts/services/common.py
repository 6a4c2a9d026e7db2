"""Checks and revision allocation shared by every write service.

Revision numbers per artifact are 1, 2, 3 … with no gap, even under concurrent writers (PostgreSQL: a
row lock on the artifact; SQLite: IMMEDIATE transactions, see settings).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from artifacts.models import (
    Artifact,
    ArtifactRevision,
    MemoryEntryVersion,
    Scope,
)
from vocabulary.errors import Conflict, InvalidInput
from vocabulary.escaping import artifact_label, json_literal
from vocabulary.history import EntryVersionRef, revision_chain_sha256, revision_texts_sha256
from vocabulary.limits import (
    MAX_BODY_CHARACTERS,
    MAX_IDENTIFIER_CHARACTERS,
)
from vocabulary.text import text_problem

logger = logging.getLogger("powercontext")


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
    artifact = Artifact.objects.select_for_update().get(scope=scope, family=family, artifact_id=artifact_id)
    artifact.scope = scope  # the same row: its scope id goes into the revision's chain hash without another read
    return artifact


def artifact_create(*, scope: Scope, family: str, artifact_id: str, created_at: datetime) -> Artifact:
    """Create an artifact without revisions, with the time it was first written (a fixture restoring an exported
    one: the time is frozen once inserted, so it cannot be set by its first write afterwards)."""
    check_identifier(artifact_id, path="artifact_id")
    return Artifact.objects.create(scope=scope, family=family, artifact_id=artifact_id, created_at=created_at)


def next_revision(artifact: Artifact, *, expected_head_revision: int | None) -> int:
    """The number of the artifact's next revision (head + 1), or Conflict when the head is not the expected one."""
    if expected_head_revision is not None and expected_head_revision != artifact.head_revision:
        raise Conflict(f"expected head revision {expected_head_revision}, but the head is {artifact.head_revision}")
    return artifact.head_revision + 1


_PREVIOUS_SQL = (
    "SELECT h.content_sha256, h.chain_sha256, "
    f"EXISTS (SELECT 1 FROM {ArtifactRevision._meta.db_table} WHERE artifact_id = a.id AND revision > %s), "
    f"EXISTS (SELECT 1 FROM {MemoryEntryVersion._meta.db_table} WHERE artifact_id = a.id AND born_in_revision > %s), "
    f"EXISTS (SELECT 1 FROM {MemoryEntryVersion._meta.db_table} WHERE artifact_id = a.id AND retired_in_revision > %s) "
    f"FROM {Artifact._meta.db_table} a LEFT JOIN {ArtifactRevision._meta.db_table} h "
    "ON h.artifact_id = a.id AND h.revision = %s WHERE a.id = %s"
)
"""The head revision's hashes and whether anything lies above the head: four index lookups, one statement."""


def revision_previous(artifact: Artifact) -> tuple[str, str]:
    """(content_sha256, chain_sha256) of the artifact's head revision: what its next revision chains to.

    Conflict when the artifact has a row above its head (a revision, or an entry version born or retired there), read
    in the same statement. The guards refuse such a row at the commit (artifacts/immutability.py), but a superuser
    with them lifted can leave one, and a write would then fail on its number, or make a version born there part of
    the revision it writes: an artifact in that state takes no write until an operator repairs its history
    (``manage.py verify_history`` names the rows), and says so, never a 500.
    """
    head = artifact.head_revision
    with connection.cursor() as cursor:
        cursor.execute(_PREVIOUS_SQL, [head, head, head, head, artifact.pk])
        content, chain, *above = cursor.fetchone()
    if any(above):
        label = f"scope {json_literal(artifact.scope.scope_id)} {artifact_label(artifact.family, artifact.artifact_id)}"
        logger.error("%s has history above its head revision %d: writes refused until it is repaired", label, head)
        raise Conflict(
            f"the artifact has history stored above its head revision {head}: it takes no write until an operator "
            "repairs it (manage.py verify_history names the rows)"
        )
    return content or "", chain or ""


def revision_append(
    *,
    artifact: Artifact,
    number: int,
    previous_chain: str,
    content_sha256: str,
    author: str,
    born: Sequence[EntryVersionRef] = (),
    retired: Sequence[EntryVersionRef] = (),
    created_at: datetime | None = None,
    **texts,
) -> ArtifactRevision:
    """Insert revision ``number`` (head + 1) with its chain hash, then move the head onto it.

    The order the database's history guards require (artifacts/immutability.py): a revision is inserted
    only as head + 1, declaring how many entry versions it births (``born``) and retires (``retired``), which
    the caller then writes in this transaction; the head moves only onto a revision that exists.
    ``created_at``: now unless given (a fixture restoring an exported history gives the time it was written).
    ``texts``: body, title and summary, each None when not given (their hash goes into the chain).
    """
    created_at = created_at or timezone.now()
    texts_sha256 = revision_texts_sha256(title=texts.get("title"), summary=texts.get("summary"), body=texts.get("body"))
    chain_sha256 = revision_chain_sha256(
        previous_chain=previous_chain,
        scope_id=artifact.scope.scope_id,
        family=artifact.family,
        artifact_id=artifact.artifact_id,
        revision=number,
        content_sha256=content_sha256,
        texts_sha256=texts_sha256,
        author=author,
        created_at=created_at,
        born=born,
        retired=retired,
    )
    revision = ArtifactRevision.objects.create(
        artifact=artifact,
        revision=number,
        content_sha256=content_sha256,
        author=author,
        entries_born=len(born),
        entries_retired=len(retired),
        chain_sha256=chain_sha256,
        texts_sha256=texts_sha256,
        created_at=created_at,
        **texts,
    )
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
