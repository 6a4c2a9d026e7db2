"""Citation resolution: the exact stored rows a citation names, or why nothing matches.

Never the head or a nearby revision instead: a citation that does not match raises
``CitationNotFound`` with a message naming what did not match (visibly escaped identities).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import partial

from django.db import connections, router

from artifacts.models import Artifact, ArtifactRevision, MemoryEntryVersion, Scope
from artifacts.selectors import rows
from artifacts.selectors.revisions import memory_entry_version_find
from infrastructure.replicas import replica_read
from vocabulary.citation import Citation
from vocabulary.errors import NotFound
from vocabulary.escaping import artifact_label, json_literal, short_identity


class CitationNotFound(NotFound):
    """A well-formed citation that names nothing stored; the message says what did not match."""


@dataclass(frozen=True)
class ResolvedCitation:
    """The exact rows a citation names: the revision and, for an entry citation, the entry version."""

    citation: Citation
    revision: ArtifactRevision
    entry_version: MemoryEntryVersion | None


def _live_span(version: MemoryEntryVersion) -> str:
    if version.retired_in_revision is None:
        return f"it is live from revision {version.born_in_revision} on"
    last = version.retired_in_revision - 1
    if last == version.born_in_revision:
        return f"it was live only in revision {last}"
    return f"it was live in revisions {version.born_in_revision}–{last}"


def citation_resolve(*, citation: Citation) -> ResolvedCitation:
    """The exact revision (and entry version) a citation names, or CitationNotFound saying why.

    From a read replica when it has the revision (immutable: the primary's bytes); whatever it lacks, and so
    every explanation of a miss (which names the current head), comes from the primary.
    """
    return replica_read(partial(_resolve, citation=citation), misses=(CitationNotFound,))


@functools.cache
def _resolve_sql(entry: bool) -> str:
    """The scope, the artifact, the revision and (for an entry citation) the entry version live in it, joined."""
    live = (
        "e.artifact_id = r.artifact_id AND e.born_in_revision <= r.revision "
        "AND (e.retired_in_revision IS NULL OR e.retired_in_revision > r.revision) "
        "AND e.entry_id = %s AND e.version_id = %s "
    )
    return (
        f"SELECT {rows.columns(Scope, 's')}, {rows.columns(Artifact, 'a')}, {rows.columns(ArtifactRevision, 'r')}"
        + (f", {rows.columns(MemoryEntryVersion, 'e')} " if entry else " ")
        + f"FROM {rows.table(Scope)} s LEFT JOIN {rows.table(Artifact)} a "
        "ON a.scope_id = s.id AND a.family = %s AND a.artifact_id = %s "
        # Never a revision above the head (only a superuser with the guards lifted can leave one; verify_history
        # reports it), nor so an entry version born there.
        f"LEFT JOIN {rows.table(ArtifactRevision)} r ON r.artifact_id = a.id AND r.revision = %s "
        "AND r.revision <= a.head_revision "
        + (f"LEFT JOIN {rows.table(MemoryEntryVersion)} e ON {live}" if entry else "")
        + "WHERE s.scope_id = %s"
    )


def _resolve(*, citation: Citation) -> ResolvedCitation:
    # One statement for what resolves; only explaining a miss of an entry version reads more.
    where = f"in scope {json_literal(citation.scope_id)}"
    label = artifact_label(citation.family, citation.artifact_id)
    entry = (citation.entry_id, citation.entry_version) if citation.has_entry else ()
    db = router.db_for_read(ArtifactRevision)
    with connections[db].cursor() as cursor:
        params = [citation.family, citation.artifact_id, citation.revision, *entry, citation.scope_id]
        cursor.execute(_resolve_sql(citation.has_entry), params)
        row = cursor.fetchone()
    if row is None:
        raise CitationNotFound(f"no scope {json_literal(citation.scope_id)}")
    a_start = rows.width(Scope)
    r_start = a_start + rows.width(Artifact)
    e_start = r_start + rows.width(ArtifactRevision)
    scope = rows.joined(Scope, db, row[:a_start])
    artifact = rows.instance(Artifact, db, row[a_start:r_start])
    if artifact is None:
        raise CitationNotFound(f"no artifact {label} {where}")
    artifact.scope = scope
    revision = rows.instance(ArtifactRevision, db, row[r_start:e_start])
    if revision is None:
        stored = f"its revisions are 1–{artifact.head_revision}" if artifact.head_revision else "it has no revisions"
        raise CitationNotFound(f"no revision {citation.revision} of {label} {where} ({stored})")
    revision.artifact = artifact
    entry_id, version_id = citation.entry_id, citation.entry_version
    if entry_id is None or version_id is None:  # not citation.has_entry (they are given together)
        return ResolvedCitation(citation, revision, None)
    version = rows.instance(MemoryEntryVersion, db, row[e_start:])
    if version is None:
        entry_label = short_identity(entry_id)
        version_label = short_identity(version_id)
        found = memory_entry_version_find(artifact=artifact, version_id=version_id)
        if found is None:
            raise CitationNotFound(f"no entry version {version_label} in {label} {where}")
        if found.entry_id != citation.entry_id:
            raise CitationNotFound(
                f"entry version {version_label} of {label} {where} belongs to entry "
                f"{short_identity(found.entry_id)}, not to entry {entry_label}"
            )
        raise CitationNotFound(
            f"entry version {version_label} was not live at revision {citation.revision} of {label} {where} "
            f"({_live_span(found)})"
        )
    version.artifact = artifact
    return ResolvedCitation(citation, revision, version)
