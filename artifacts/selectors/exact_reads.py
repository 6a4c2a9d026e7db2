"""Exact reads over HTTP: what a citation names, for a key that may read its scope (``artifact_revision_read``).

Never the head instead: a revision or entry version that was not stored as cited is NotFound, and so is one stored
above its artifact's head (only a superuser with the history guards lifted can leave one there). One statement after
the key's joins the scope, the key's grant to read it, the artifact, the revision and a page of its live entry
versions, so an unreadable scope costs and answers exactly like an unknown one. A read replica may serve these
(docs/scaling.md §8): what a committed revision holds never changes, and ``infrastructure.replicas.replica_read``
reads again on the primary whatever the replica has not replayed yet.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from django.db import DEFAULT_DB_ALIAS, connections, router

from artifacts.models import ApiKeyGrant, Artifact, ArtifactRevision, Family, MemoryEntryVersion, Scope
from artifacts.selectors import rows
from artifacts.selectors.erasures import erasure_naming, erasure_public
from artifacts.selectors.scopes import GrantHolder
from infrastructure.replicas import replica_read, replicas_configured
from vocabulary.errors import ContentErased, NotFound
from vocabulary.limits import REVISION_ENTRIES_PAGE_DEFAULT, REVISION_ENTRIES_PAGE_MAX_BYTES


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
    """The scope by public id joined through the key's grant to read it, and the artifact: no row at all for a scope
    the key may not read, as for an unknown one (a row with a NULL grant made an unreadable scope's 404 read more,
    and measurably slower, than an unknown one's)."""
    return (
        f"FROM {rows.table(Scope)} s JOIN {rows.table(ApiKeyGrant)} g "
        "ON g.scope_id = s.id AND g.api_key_id = %s AND g.can_read "
        f"LEFT JOIN {rows.table(Artifact)} a "
        "ON a.scope_id = s.id AND a.family = %s AND a.artifact_id = %s "
    )


@dataclass(frozen=True)
class EntriesPage:
    """Which entry versions of a memory revision one exact read returns (``artifact_revision_read``)."""

    after: str | None
    limit: int
    max_bytes: int


def body_bytes_sql(vendor: str, column: str) -> str:
    """The UTF-8 length of a text column (SQLite's ``length`` of text counts characters)."""
    return f"octet_length({column})" if vendor == "postgresql" else f"length(CAST({column} AS BLOB))"


def page_cut_columns(size: str, order: str) -> str:
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
    size = body_bytes_sql(vendor, "b.body")
    order = "k.entry_id, k.version_id"
    return (
        "SELECT * FROM ("
        f"SELECT b.*, ROW_NUMBER() OVER (ORDER BY {order}) AS page_position, {page_cut_columns(size, order)} "
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


_REVISION_JOIN = (
    f"LEFT JOIN {rows.table(ArtifactRevision)} r ON r.artifact_id = a.id AND r.revision = %s "
    "AND r.revision <= a.head_revision "
)
"""The cited revision, never one above the head: none is committed there, but a superuser with the guards lifted could
leave one (verify_history reports it). The entry versions live at a revision up to the head were born up to it, so
none born above the head is read either."""


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
        + _REVISION_JOIN
        + versions
        + "WHERE s.scope_id = %s ORDER BY e.entry_id, e.version_id"
    )


def _readable_scope(principal: GrantHolder, row: Sequence) -> Scope:
    """The scope a joined row starts with, if the principal may read it (its own grants and the joined one)."""
    if row[2] is None:  # a safety net: the statements join the grant, so no such row comes back
        raise NotFound("scope not found")
    scope = Scope.from_db(router.db_for_read(Scope), ["id", "scope_id"], [row[0], row[1]])
    if not principal.can_read(scope):
        raise NotFound("scope not found")
    return scope


def _exact_read(
    *,
    principal: GrantHolder,
    scope_id: str,
    family: str,
    artifact_id: str,
    revision: int,
    entry: tuple[str, str | None] | None,
    page: EntriesPage,
) -> ArtifactRevision | EntryVersionAt:
    db = router.db_for_read(ArtifactRevision)
    # In the order of _exact_sql's placeholders: the scope's joins, then the entry or the page, then the scope id.
    params: list[int | str | None] = [principal.api_key_id, family, artifact_id, revision]
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
    versions = [
        version for row in found_rows if (version := rows.instance(MemoryEntryVersion, db, row[r_end:-1])) is not None
    ]
    for version in versions:
        version.artifact = artifact
    if entry is not None:
        if not versions:
            raise NotFound("entry version not live at that revision")
        if versions[0].body == "":
            _raise_if_erased(scope, artifact, version=versions[0])
        return EntryVersionAt(revision=found, entry=versions[0])
    if artifact.family == Family.MEMORY:
        more = bool(versions) and found_rows[0][-1] > len(versions)
        found.next_entries_after = versions[-1].entry_id if more else None
        if any(version.body == "" for version in versions):
            _raise_if_erased(scope, artifact, revision=found)
            versions = [version for version in versions if version.body != ""]  # erased one by one: left out
        found.entries = versions
    elif all(text in ("", None) for text in (found.body, found.title, found.summary)):
        _raise_if_erased(scope, artifact, revision=found)
    return found


def _raise_if_erased(scope: Scope, artifact: Artifact, *, revision=None, version=None) -> None:
    """ContentErased (410) with the record when an erasure names the revision or entry version whose texts are blank:
    asked only then (stored text is never empty otherwise), so a read of text never erased costs nothing more."""
    record = erasure_naming(
        artifact_pk=artifact.pk,
        scope_pk=scope.pk,
        revision=revision.revision if revision is not None else None,
        revision_pk=revision.pk if revision is not None else None,
        version_id=version.version_id if version is not None else None,
        version_pk=version.pk if version is not None else None,
        born_in_revision=version.born_in_revision if version is not None else None,
    )
    if record is not None:
        raise ContentErased(erasure_public(record))


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
