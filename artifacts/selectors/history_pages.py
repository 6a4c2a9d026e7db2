"""An artifact's history over HTTP, a page at a time (``artifact_history_read``): each revision with the entry
versions it added and retired, newest first, bounded by count and by bytes.

A read replica may serve a page once it has the primary's head (checked in the same statement); the artifact and
the key's grant are read on the primary first (``exact_reads.artifact_get_readable``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import partial

from django.db import connections, router

from artifacts.models import Artifact, ArtifactRevision, Family, MemoryEntryVersion
from artifacts.selectors import rows
from artifacts.selectors.exact_reads import artifact_get_readable, body_bytes_sql, page_cut_columns
from artifacts.selectors.scopes import GrantHolder
from infrastructure.replicas import ReplicaBehind, reading_from_replica, replica_read
from vocabulary.limits import HISTORY_PAGE_MAX_BYTES


@dataclass(frozen=True)
class HistoryPage:
    """Revisions newest first; a memory revision carries ``added`` and ``retired`` (what it changed)."""

    revisions: list[ArtifactRevision]
    next_before: int | None


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
    # before the cut. Only revisions up to the head the artifact was read with: none is committed above it, but a
    # superuser with the guards lifted could leave one (verify_history reports it), and the entry versions born or
    # retired above the head join only such a revision. On a replica the page is read only when the replica has the
    # primary's head: the artifact row's head is checked in the same statement (no row: behind).
    versions = rows.table(MemoryEntryVersion)
    size = partial(body_bytes_sql, vendor)
    changed = [
        f"(SELECT COALESCE(SUM({size('v.body')}), 0) FROM {versions} v "
        f"WHERE v.artifact_id = r.artifact_id AND v.{column} = r.revision)"
        for column in ("born_in_revision", "retired_in_revision")
    ]
    page = (
        f"SELECT * FROM (SELECT t.*, {page_cut_columns('t.page_bytes', 't.revision DESC')} "
        f"FROM (SELECT r.*, {' + '.join(changed)} AS page_bytes "
        f"FROM (SELECT * FROM {rows.table(ArtifactRevision)} WHERE artifact_id = %s AND revision <= %s"
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
    params = [artifact.pk, artifact.head_revision, *(() if before is None else (before,))]
    params += [limit + 1, HISTORY_PAGE_MAX_BYTES]
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
            revision = revisions[row[0]] = rows.joined(ArtifactRevision, db, row[:r_end])
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
