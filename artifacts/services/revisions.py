"""Single-text revisions: experiences, topic memories, committed profiles and body-only families.

Recall sees only the head of an experience or topic memory: each revision replaces its index document.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from artifacts.models import (
    ArtifactRevision,
    Family,
    RecallDocument,
    Scope,
)
from artifacts.recall.index import recall_index_add, recall_index_remove, revision_text
from artifacts.recall.vectors.write import vectors_on_write
from artifacts.services.common import (
    artifact_for_write,
    check_text,
    next_revision,
    revision_append,
    revision_previous,
)
from vocabulary.errors import InvalidInput
from vocabulary.families import BODY_ONLY_FAMILIES
from vocabulary.history import topic_memory_sha256
from vocabulary.limits import (
    MAX_TOPIC_TITLE_CHARACTERS,
)
from vocabulary.text import sha256_text


def _single_text_revision_create(
    *,
    scope: Scope,
    family: str,
    artifact_id: str,
    author: str,
    expected_head_revision: int | None,
    body: str | None,
    title: str | None = None,
    summary: str | None = None,
    content_sha256: str,
    indexed: bool,
    created_at: datetime | None = None,
) -> ArtifactRevision:
    """One transaction; an indexed revision replaces its artifact's recall document (and vector: embedded before the
    transaction opens). Every check that needs no database is done before."""
    index_text = revision_text(title, summary, body) if indexed else None
    vectors = vectors_on_write([index_text] if index_text is not None else [])
    with transaction.atomic():
        artifact = artifact_for_write(scope=scope, family=family, artifact_id=artifact_id)
        number = next_revision(artifact, expected_head_revision=expected_head_revision)
        revision = revision_append(
            artifact=artifact,
            number=number,
            previous_chain=revision_previous(artifact)[1],
            body=body,
            title=title,
            summary=summary,
            content_sha256=content_sha256,
            author=author,
            created_at=created_at,
        )
        if index_text is not None:
            recall_index_remove(artifact=artifact, documents=RecallDocument.objects.filter(artifact=artifact))
            vectors.add(recall_index_add(artifact=artifact, text=index_text, revision=revision), index_text)
            vectors.store()
    return revision


UNINDEXED_BODY_FAMILIES = (Family.PROFILE, *BODY_ONLY_FAMILIES)


def _body_revision_create(*, family: str, body: str, indexed: bool, **target) -> ArtifactRevision:
    """A revision whose content is one body (experience, profile, body-only families); ``target``: scope,
    artifact_id, author, expected_head_revision, created_at."""
    check_text(body, path="body")
    return _single_text_revision_create(
        family=family, body=body, content_sha256=sha256_text(body), indexed=indexed, **target
    )


def experience_revision_create(
    *,
    scope: Scope,
    artifact_id: str,
    body: str,
    author: str,
    expected_head_revision: int | None = None,
    created_at: datetime | None = None,
) -> ArtifactRevision:
    """Record the next revision of an experience; recall then sees only this head.

    ``created_at`` (every revision service): now unless given, as by a fixture restoring an exported history.
    """
    target = {"scope": scope, "artifact_id": artifact_id, "author": author, "created_at": created_at}
    return _body_revision_create(
        family=Family.EXPERIENCE, body=body, indexed=True, expected_head_revision=expected_head_revision, **target
    )


def topic_memory_revision_create(
    *,
    scope: Scope,
    artifact_id: str,
    title: str,
    summary: str,
    body: str | None = None,
    author: str,
    expected_head_revision: int | None = None,
    created_at: datetime | None = None,
) -> ArtifactRevision:
    """Record the next revision of a topic memory (title, summary, optional detail body)."""
    check_text(title, path="title", max_length=MAX_TOPIC_TITLE_CHARACTERS)
    check_text(summary, path="summary")
    if body is not None:
        check_text(body, path="body")
    target: dict[str, Any] = {"scope": scope, "artifact_id": artifact_id, "author": author, "created_at": created_at}
    content: dict[str, Any] = {"title": title, "summary": summary, "body": body}
    return _single_text_revision_create(
        family=Family.TOPIC_MEMORY,
        expected_head_revision=expected_head_revision,
        content_sha256=topic_memory_sha256(**content),
        indexed=True,
        **content,
        **target,
    )


def artifact_body_revision_create(
    *,
    scope: Scope,
    family: str,
    artifact_id: str,
    body: str,
    author: str,
    expected_head_revision: int | None = None,
    created_at: datetime | None = None,
) -> ArtifactRevision:
    """Record the next revision of a family whose content is one body that recall does not index.

    A committed profile snapshot (candidate commits and fixtures; hosts propose candidates), or a skill,
    handoff or source (stored, never recalled).
    """
    if family not in UNINDEXED_BODY_FAMILIES:
        raise InvalidInput(f"family must be one of {', '.join(UNINDEXED_BODY_FAMILIES)}", path="family")
    target = {"scope": scope, "artifact_id": artifact_id, "author": author, "created_at": created_at}
    return _body_revision_create(
        family=family, body=body, indexed=False, expected_head_revision=expected_head_revision, **target
    )
