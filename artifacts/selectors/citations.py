"""Citation resolution: the exact stored rows a citation names, or why nothing matches.

Never the head or a nearby revision instead: a citation that does not match raises
``CitationNotFound`` with a message naming what did not match (visibly escaped identities).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from artifacts.models import ArtifactRevision, MemoryEntryVersion
from artifacts.selectors.revisions import (
    artifact_get,
    artifact_revision_get,
    memory_entry_version_find,
    memory_entry_version_get_at,
)
from artifacts.selectors.scopes import scope_get
from powercontext.replicas import replica_read
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


def _resolve(*, citation: Citation) -> ResolvedCitation:
    where = f"in scope {json_literal(citation.scope_id)}"
    label = artifact_label(citation.family, citation.artifact_id)
    try:
        scope = scope_get(scope_id=citation.scope_id)
    except NotFound:
        raise CitationNotFound(f"no scope {json_literal(citation.scope_id)}") from None
    try:
        artifact = artifact_get(scope=scope, family=citation.family, artifact_id=citation.artifact_id)
    except NotFound:
        raise CitationNotFound(f"no artifact {label} {where}") from None
    try:
        revision = artifact_revision_get(artifact=artifact, revision=citation.revision)
    except NotFound:
        stored = f"its revisions are 1–{artifact.head_revision}" if artifact.head_revision else "it has no revisions"
        raise CitationNotFound(f"no revision {citation.revision} of {label} {where} ({stored})") from None
    if not citation.has_entry:
        return ResolvedCitation(citation, revision, None)
    try:
        version = memory_entry_version_get_at(
            artifact=artifact,
            revision=citation.revision,
            entry_id=citation.entry_id,
            version_id=citation.entry_version,
        )
    except NotFound:
        entry = short_identity(citation.entry_id)
        version_label = short_identity(citation.entry_version)
        found = memory_entry_version_find(artifact=artifact, version_id=citation.entry_version)
        if found is None:
            raise CitationNotFound(f"no entry version {version_label} in {label} {where}") from None
        if found.entry_id != citation.entry_id:
            raise CitationNotFound(
                f"entry version {version_label} of {label} {where} belongs to entry "
                f"{short_identity(found.entry_id)}, not to entry {entry}"
            ) from None
        raise CitationNotFound(
            f"entry version {version_label} was not live at revision {citation.revision} of {label} {where} "
            f"({_live_span(found)})"
        ) from None
    return ResolvedCitation(citation, revision, version)
