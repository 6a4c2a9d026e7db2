"""Exact reads of immutable revisions and entry versions, and revision history.

Never the head instead: a revision or entry version that was not stored as cited is NotFound.

These are the reads a read replica may serve (docs/scaling.md §8): a revision and the entry versions live in
it never change once committed, so a copy found on a replica is the primary's. Each public read below runs
through ``powercontext.replicas.replica_read``, which reads again on the primary whatever the replica has not
replayed yet. The grant check rests on the key's grants, read on the primary with the key (a revoked grant takes
effect at once): a replica's copy of a grant only narrows what the joined statements read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.models import Q

from artifacts.models import (
    ApiKeyGrant,
    Artifact,
    ArtifactRevision,
    Family,
    MemoryEntryVersion,
    Scope,
)
from artifacts.selectors import rows
from artifacts.selectors.scopes import GrantHolder
from powercontext.replicas import ReplicaBehind, reading_from_replica, replica_read, replicas_configured
from vocabulary.errors import NotFound
from vocabulary.limits import HISTORY_PAGE_MAX_BYTES, REVISION_ENTRIES_PAGE_DEFAULT, REVISION_ENTRIES_PAGE_MAX_BYTES

T = TypeVar("T")


def artifact_get(*, scope: Scope, family: str, artifact_id: str) -> Artifact:
    """The artifact with this identity in the scope, or NotFound."""
    try:
        return Artifact.objects.select_related("scope").get(scope=scope, family=family, artifact_id=artifact_id)
    except Artifact.DoesNotExist as exc:
        raise NotFound("artifact not found") from exc


def artifact_revision_get(*, artifact: Artifact, revision: int) -> ArtifactRevision:
    """That exact revision, never the head instead, or NotFound."""
    try:
        return ArtifactRevision.objects.select_related("artifact__scope").get(artifact=artifact, revision=revision)
    except ArtifactRevision.DoesNotExist as exc:
        raise NotFound("revision not found") from exc


def _live_at(revision: int) -> Q:
    return Q(born_in_revision__lte=revision) & (
        Q(retired_in_revision__isnull=True) | Q(retired_in_revision__gt=revision)
    )


def memory_entries_live_at(*, artifact: Artifact, revision: int, limit: int) -> tuple[list[MemoryEntryVersion], bool]:
    """The first ``limit`` entry versions live in that revision, ordered by entry id, and whether more are live.

    One statement reading at most ``limit + 1`` rows (a LIMIT in the SQL), however many entries the revision holds.
    """
    versions = list(
        MemoryEntryVersion.objects.filter(_live_at(revision), artifact=artifact).order_by("entry_id", "version_id")[
            : limit + 1
        ]
    )
    return versions[:limit], len(versions) > limit


def memory_entry_version_get_at(
    *, artifact: Artifact, revision: int, entry_id: str, version_id: str
) -> MemoryEntryVersion:
    """That entry version if it was live in that revision, else NotFound."""
    version = (
        MemoryEntryVersion.objects.filter(
            _live_at(revision), artifact=artifact, entry_id=entry_id, version_id=version_id
        )
        .select_related("artifact__scope")
        .first()
    )
    if version is None:
        raise NotFound("entry version not live at that revision")
    return version


def memory_entry_versions_changed_in(
    *, artifact: Artifact, revisions: Sequence[int]
) -> dict[int, tuple[list[MemoryEntryVersion], list[MemoryEntryVersion]]]:
    """Per revision number: (versions born in it, versions retired in it), each by entry id.

    One query for all the revisions (a history page), whatever their number.
    """
    changes = {number: ([], []) for number in revisions}
    if not changes:
        return changes
    low, high = min(changes), max(changes)
    in_range = Q(born_in_revision__gte=low, born_in_revision__lte=high) | Q(
        retired_in_revision__gte=low, retired_in_revision__lte=high
    )
    for version in MemoryEntryVersion.objects.filter(in_range, artifact=artifact).order_by("entry_id", "id"):
        if version.born_in_revision in changes:
            changes[version.born_in_revision][0].append(version)
        if version.retired_in_revision in changes:
            changes[version.retired_in_revision][1].append(version)
    return changes


def artifact_revision_list_all(*, artifact: Artifact) -> list[ArtifactRevision]:
    """Every stored revision of an artifact, oldest first (revision 1, 2, …)."""
    return list(ArtifactRevision.objects.filter(artifact=artifact).order_by("revision"))


def memory_entry_version_list_all(*, artifact: Artifact) -> list[MemoryEntryVersion]:
    """Every entry version a memory artifact ever had, live or retired, in order of birth."""
    return list(MemoryEntryVersion.objects.filter(artifact=artifact).order_by("born_in_revision", "entry_id", "id"))


def artifact_history_page(
    *, artifact: Artifact, before: int | None, limit: int
) -> tuple[list[ArtifactRevision], int | None]:
    """Up to ``limit`` revisions older than ``before`` (all when None), newest first, and the next cursor."""
    revisions = ArtifactRevision.objects.filter(artifact=artifact).select_related("artifact__scope")
    if before is not None:
        revisions = revisions.filter(revision__lt=before)
    page = list(revisions.order_by("-revision")[: limit + 1])
    next_before = page[limit - 1].revision if len(page) > limit else None
    return page[:limit], next_before


def memory_entry_version_find(*, artifact: Artifact, version_id: str) -> MemoryEntryVersion | None:
    """The entry version with this id in a memory artifact, live or retired, or None.

    Only for explaining why a citation does not resolve; an exact read uses
    ``memory_entry_version_get_at``.
    """
    return MemoryEntryVersion.objects.filter(artifact=artifact, version_id=version_id).first()


# --- what a principal may read ------------------------------------------------------------------


@dataclass(frozen=True)
class EntryVersionAt:
    """A memory entry version as live in the cited revision (an exact entry read)."""

    revision: ArtifactRevision
    entry: MemoryEntryVersion


def artifact_revision_read(
    *,
    principal: GrantHolder,
    scope_id: str,
    family: str,
    artifact_id: str,
    revision: int,
    entry_id: str | None = None,
    entry_version: str | None = None,
    entries_after: str | None = None,
    entries_limit: int = REVISION_ENTRIES_PAGE_DEFAULT,
) -> ArtifactRevision | EntryVersionAt:
    """Exactly what a citation names, never the head instead; NotFound also for an unreadable scope.

    With ``entry_id`` and ``entry_version`` (memory only) that entry version as live in the revision;
    otherwise the revision, a memory revision carrying one page of its live versions as ``entries``: in entry-id
    order after ``entries_after`` (from the first when None), at most ``entries_limit`` and none after the one whose
    body takes the page past REVISION_ENTRIES_PAGE_MAX_BYTES, with ``next_entries_after`` (the last entry id when
    more follow, else None). One statement (``_exact_sql``) after the key's: the scope, the key's grant to read it,
    the artifact, the revision and its page of entry versions, joined; with a replica configured, the scope and the
    grant are checked on the primary first. Nothing past the scope is joined without the grant, so an unreadable
    scope costs and answers exactly like an unknown one.
    """
    if replicas_configured():
        # Authorization before any read on a replica: the scope and the key's grant on the primary first.
        artifact_get_readable(principal=principal, scope_id=scope_id, family=family, artifact_id=artifact_id)
    exact = partial(
        _exact_read,
        principal=principal,
        scope_id=scope_id,
        family=family,
        artifact_id=artifact_id,
        revision=revision,
        entry=None if entry_id is None else (entry_id, entry_version),
        page=EntriesPage(after=entries_after, limit=entries_limit, max_bytes=REVISION_ENTRIES_PAGE_MAX_BYTES),
    )
    # Found on a replica: the primary's bytes. Not found there: maybe not replayed yet, so the primary decides
    # (a grant revoked on the primary but not yet on the replica is refused by the principal's own grants).
    return replica_read(exact, misses=(NotFound,))


def _scope_readable_join() -> str:
    """The scope by public id, the key's grant to read it (NULL when it may not), and the artifact if it may."""
    return (
        f"FROM {rows.table(Scope)} s LEFT JOIN {rows.table(ApiKeyGrant)} g "
        "ON g.scope_id = s.id AND g.api_key_id = %s AND g.can_read "
        f"LEFT JOIN {rows.table(Artifact)} a "
        "ON g.id IS NOT NULL AND a.scope_id = s.id AND a.family = %s AND a.artifact_id = %s "
    )


@dataclass(frozen=True)
class EntriesPage:
    """Which entry versions of a memory revision one exact read returns (``artifact_revision_read``)."""

    after: str | None
    limit: int
    max_bytes: int


def _body_bytes(vendor: str, column: str) -> str:
    """The UTF-8 length of a text column (SQLite's ``length`` of text counts characters)."""
    return f"octet_length({column})" if vendor == "postgresql" else f"length(CAST({column} AS BLOB))"


def _page_cut_columns(size: str, order: str) -> str:
    """The columns a byte-bounded page is cut by: ``page_fetched`` (the rows looked at before the cut) and
    ``page_bytes_before`` (the sizes of the rows before each one, in ``order``): a row stays while that is under the
    bound, so the first always does."""
    return (
        f"COUNT(*) OVER () AS page_fetched, COALESCE(SUM({size}) OVER "
        f"(ORDER BY {order} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS page_bytes_before"
    )


def _entries_page_sql(vendor: str, after: bool) -> str:
    """One page of the entry versions live at the revision, each with ``page_fetched``: how many rows it looked at.

    Only ids are ordered and limited (``limit + 1`` of them: one more tells whether more follow), then those rows
    are joined for their bodies' sizes: the page stops at ``limit`` or after the entry whose body takes it past
    ``max_bytes``. Joined only through the key's grant to read the scope, like everything past the scope.
    """
    versions = rows.table(MemoryEntryVersion)
    size = _body_bytes(vendor, "b.body")
    order = "k.entry_id, k.version_id"
    return (
        "SELECT * FROM ("
        f"SELECT b.*, ROW_NUMBER() OVER (ORDER BY {order}) AS page_position, {_page_cut_columns(size, order)} "
        f"FROM (SELECT v.id, v.entry_id, v.version_id FROM {versions} v "
        f"JOIN {rows.table(Artifact)} pa ON pa.id = v.artifact_id "
        f"JOIN {rows.table(Scope)} ps ON ps.id = pa.scope_id "
        f"JOIN {rows.table(ApiKeyGrant)} pg ON pg.scope_id = ps.id AND pg.api_key_id = %s AND pg.can_read "
        "WHERE ps.scope_id = %s AND pa.family = %s AND pa.artifact_id = %s AND v.born_in_revision <= %s "
        "AND (v.retired_in_revision IS NULL OR v.retired_in_revision > %s)"
        + (" AND v.entry_id > %s" if after else "")
        + " ORDER BY v.entry_id, v.version_id LIMIT %s) k "
        f"JOIN {versions} b ON b.id = k.id"
        ") w WHERE w.page_position <= %s AND w.page_bytes_before < %s"
    )


@functools.cache
def _exact_sql(vendor: str, entry: bool, after: bool) -> str:
    if entry:  # one entry version, if live at the revision
        versions = (
            f"LEFT JOIN {rows.table(MemoryEntryVersion)} e ON e.artifact_id = r.artifact_id "
            "AND e.born_in_revision <= r.revision "
            "AND (e.retired_in_revision IS NULL OR e.retired_in_revision > r.revision) "
            "AND e.entry_id = %s AND e.version_id = %s "
        )
        fetched = "NULL"
    else:  # a page of the versions live at the revision (none for another family)
        versions = f"LEFT JOIN ({_entries_page_sql(vendor, after)}) e ON e.artifact_id = r.artifact_id "
        fetched = "e.page_fetched"
    return (
        f"SELECT s.id, s.scope_id, g.id, {rows.columns(Artifact, 'a')}, {rows.columns(ArtifactRevision, 'r')}, "
        f"{rows.columns(MemoryEntryVersion, 'e')}, {fetched} "
        + _scope_readable_join()
        + f"LEFT JOIN {rows.table(ArtifactRevision)} r ON r.artifact_id = a.id AND r.revision = %s "
        + versions
        + "WHERE s.scope_id = %s ORDER BY e.entry_id, e.version_id"
    )


def _readable_scope(principal: GrantHolder, row: Sequence) -> Scope:
    """The scope a joined row starts with, if the principal may read it (its own grants and the joined one)."""
    scope = Scope.from_db(router.db_for_read(Scope), ["id", "scope_id"], [row[0], row[1]])
    if row[2] is None or not principal.can_read(scope):
        raise NotFound("scope not found")
    return scope


def _exact_read(
    *,
    principal: GrantHolder,
    scope_id: str,
    family: str,
    artifact_id: str,
    revision: int,
    entry: tuple[str, str] | None,
    page: EntriesPage,
) -> ArtifactRevision | EntryVersionAt:
    db = router.db_for_read(ArtifactRevision)
    # In the order of _exact_sql's placeholders: the scope's joins, then the entry or the page, then the scope id.
    params = [principal.api_key_id, family, artifact_id, revision]
    if entry is not None:
        params += entry
    else:
        params += [principal.api_key_id, scope_id, family, artifact_id, revision, revision]
        params += [] if page.after is None else [page.after]
        params += [page.limit + 1, page.limit, page.max_bytes]
    params.append(scope_id)
    connection = connections[db]
    with connection.cursor() as cursor:
        cursor.execute(_exact_sql(connection.vendor, entry is not None, page.after is not None), params)
        found_rows = cursor.fetchall()
    if not found_rows:
        raise NotFound("scope not found")
    scope = _readable_scope(principal, found_rows[0])
    a_end = 3 + rows.width(Artifact)
    r_end = a_end + rows.width(ArtifactRevision)
    artifact = rows.instance(Artifact, db, found_rows[0][3:a_end])
    if artifact is None:
        raise NotFound("artifact not found")
    artifact.scope = scope
    found = rows.instance(ArtifactRevision, db, found_rows[0][a_end:r_end])
    if found is None:
        raise NotFound("revision not found")
    found.artifact = artifact
    # The versions live at a revision are fixed once it is committed: the ones it retired were retired in it or
    # before, which the replica has replayed since it has the revision.
    versions = [rows.instance(MemoryEntryVersion, db, row[r_end:-1]) for row in found_rows]
    versions = [version for version in versions if version is not None]
    for version in versions:
        version.artifact = artifact
    if entry is not None:
        if not versions:
            raise NotFound("entry version not live at that revision")
        return EntryVersionAt(revision=found, entry=versions[0])
    if artifact.family == Family.MEMORY:
        found.entries = versions
        more = bool(versions) and found_rows[0][-1] > len(versions)
        found.next_entries_after = versions[-1].entry_id if more else None
    return found


@dataclass(frozen=True)
class HistoryPage:
    """Revisions newest first; a memory revision carries ``added`` and ``retired`` (what it changed)."""

    revisions: list[ArtifactRevision]
    next_before: int | None


@functools.cache
def _artifact_sql() -> str:
    return (
        f"SELECT s.id, s.scope_id, g.id, {rows.columns(Artifact, 'a')} "
        + _scope_readable_join()
        + "WHERE s.scope_id = %s"
    )


def artifact_get_readable(*, principal: GrantHolder, scope_id: str, family: str, artifact_id: str) -> Artifact:
    """The artifact (with its scope) if the key may read its scope, in one statement, always on the primary.

    NotFound("scope not found") alike for an unknown and an unreadable scope, after the same statement.
    """
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_artifact_sql(), [principal.api_key_id, family, artifact_id, scope_id])
        row = cursor.fetchone()
    if row is None:
        raise NotFound("scope not found")
    scope = _readable_scope(principal, row)
    artifact = rows.instance(Artifact, DEFAULT_DB_ALIAS, row[3:])
    if artifact is None:
        raise NotFound("artifact not found")
    artifact.scope = scope
    return artifact


def artifact_history_read(
    *, principal: GrantHolder, scope_id: str, family: str, artifact_id: str, limit: int, before: int | None = None
) -> HistoryPage:
    """One page of an artifact's history in two statements after the key's; NotFound also for an unreadable scope.

    The artifact with its scope and the key's grant (``artifact_get_readable``), then the page's revisions
    joined to the entry versions each born or retired (``_history_sql``), whatever the page's size.
    """
    # The primary's head: the newest page must show it, so a replica serves the page only once it has it.
    artifact = artifact_get_readable(principal=principal, scope_id=scope_id, family=family, artifact_id=artifact_id)
    return replica_read(partial(_history_read, artifact=artifact, limit=limit, before=before))


@functools.cache
def _history_sql(vendor: str, before: bool, on_replica: bool) -> str:
    # The page's revisions (``limit + 1``: one more tells whether more follow), each with the UTF-8 size of the bodies
    # of the entry versions it added or retired (what the page shows of it besides a few fixed fields; two indexed
    # sums), cut after the one that takes the page past its byte bound; ``page_fetched`` counts what was looked at
    # before the cut. On a replica the page is read only when the replica has the primary's head: the artifact row's
    # head is checked in the same statement (no row: behind).
    versions = rows.table(MemoryEntryVersion)
    size = partial(_body_bytes, vendor)
    changed = [
        f"(SELECT COALESCE(SUM({size('v.body')}), 0) FROM {versions} v "
        f"WHERE v.artifact_id = r.artifact_id AND v.{column} = r.revision)"
        for column in ("born_in_revision", "retired_in_revision")
    ]
    page = (
        f"SELECT * FROM (SELECT t.*, {_page_cut_columns('t.page_bytes', 't.revision DESC')} "
        f"FROM (SELECT r.*, {' + '.join(changed)} AS page_bytes "
        f"FROM (SELECT * FROM {rows.table(ArtifactRevision)} WHERE artifact_id = %s"
        + (" AND revision < %s" if before else "")
        + " ORDER BY revision DESC LIMIT %s) r) t) w WHERE w.page_bytes_before < %s"
    )
    head = f"JOIN {rows.table(Artifact)} h ON h.id = p.artifact_id AND h.head_revision >= %s " if on_replica else ""
    return (
        f"SELECT {rows.columns(ArtifactRevision, 'p')}, {rows.columns(MemoryEntryVersion, 'e')}, p.page_fetched, "
        "e.born_in_revision = p.revision "
        f"FROM ({page}) p " + head + f"LEFT JOIN {versions} e ON e.artifact_id = p.artifact_id AND %s "
        "AND (e.born_in_revision = p.revision OR e.retired_in_revision = p.revision) "
        "ORDER BY p.revision DESC, e.entry_id, e.id"
    )


def _history_read(*, artifact: Artifact, limit: int, before: int | None) -> HistoryPage:
    db = router.db_for_read(ArtifactRevision)
    on_replica = reading_from_replica()
    params = [artifact.pk, *(() if before is None else (before,)), limit + 1, HISTORY_PAGE_MAX_BYTES]
    params += [artifact.head_revision] if on_replica else []
    params += [artifact.family == Family.MEMORY]
    with connections[db].cursor() as cursor:
        cursor.execute(_history_sql(connections[db].vendor, before is not None, on_replica), params)
        found_rows = cursor.fetchall()
    if on_replica and not found_rows and artifact.head_revision:
        raise ReplicaBehind
    r_end = rows.width(ArtifactRevision)
    revisions: dict[int, ArtifactRevision] = {}
    fetched = 0
    for row in found_rows:
        revision = revisions.get(row[0])
        if revision is None:
            revision = revisions[row[0]] = rows.instance(ArtifactRevision, db, row[:r_end])
            revision.artifact = artifact
            revision.added, revision.retired = [], []
            fetched = row[-2]
        version = rows.instance(MemoryEntryVersion, db, row[r_end:-2])
        if version is not None:
            version.artifact = artifact
            (revision.added if row[-1] else revision.retired).append(version)
    page = list(revisions.values())[:limit]
    # More follow when the statement looked at more revisions than the page keeps (one past ``limit``, or cut by size).
    next_before = page[-1].revision if fetched > len(page) else None
    if artifact.family != Family.MEMORY:
        for revision in page:
            del revision.added, revision.retired
    return HistoryPage(revisions=page, next_before=next_before)


def immutable_row_get(get: Callable[[], T | None]) -> T | None:
    """One immutable row (a revision, an entry version) by ``get()``, from a replica when it has it.

    ``get`` returns None for a row it does not find: read again on the primary, which decides.
    """

    def found_or_miss() -> T:
        row = get()
        if row is None:
            raise ReplicaBehind
        return row

    try:
        return replica_read(found_or_miss)
    except ReplicaBehind:  # not on the primary either
        return None
