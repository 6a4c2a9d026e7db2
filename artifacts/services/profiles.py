"""Profile candidates: proposed snapshots that become revisions only when committed."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from artifacts.models import (
    Artifact,
    ArtifactRevision,
    Family,
    ProfileCandidate,
    Scope,
)
from artifacts.services.common import check_text
from artifacts.services.revisions import artifact_body_revision_create
from vocabulary.errors import Conflict, InvalidInput
from vocabulary.text import sha256_text


@transaction.atomic
def profile_candidate_propose(
    *,
    scope: Scope,
    artifact_id: str,
    body: str,
    proposed_by: str,
    status: str = ProfileCandidate.Status.PENDING,
    committed_revision: int | None = None,
    created_at: datetime | None = None,
) -> ProfileCandidate:
    """Propose a profile snapshot; it reaches prepare only once committed.

    Only a fixture restoring an exported history records a candidate as ``committed`` (with the
    ``committed_revision`` its commit wrote, already restored with the same body) and gives its ``created_at``.
    """
    check_text(body, path="body")
    if status == ProfileCandidate.Status.COMMITTED:
        if committed_revision is None:
            raise InvalidInput("a committed candidate names its committed revision", path="committed_revision")
    elif committed_revision is not None:
        raise InvalidInput("only a committed candidate names a committed revision", path="committed_revision")
    elif status not in (ProfileCandidate.Status.PENDING, ProfileCandidate.Status.REJECTED):
        raise InvalidInput("a new candidate is pending or rejected", path="status")
    try:
        with transaction.atomic():
            artifact, _ = Artifact.objects.get_or_create(scope=scope, family=Family.PROFILE, artifact_id=artifact_id)
    except IntegrityError:
        artifact = Artifact.objects.get(scope=scope, family=Family.PROFILE, artifact_id=artifact_id)
    if (
        committed_revision is not None
        and not ArtifactRevision.objects.filter(
            artifact=artifact,
            revision=committed_revision,
            revision__lte=artifact.head_revision,
            content_sha256=sha256_text(body),
        ).exists()
    ):
        raise InvalidInput(
            f"profile revision {committed_revision} is not stored with the candidate's body", path="committed_revision"
        )
    return ProfileCandidate.objects.create(
        artifact=artifact,
        body=body,
        content_sha256=sha256_text(body),
        status=status,
        committed_revision=committed_revision,
        proposed_by=proposed_by,
        created_at=created_at or timezone.now(),
    )


@transaction.atomic
def profile_candidate_commit(
    *, candidate: ProfileCandidate, committed_by: str, expected_head_revision: int | None = None
) -> ArtifactRevision:
    """Commit a pending candidate: it becomes the next immutable profile revision."""
    candidate = ProfileCandidate.objects.select_for_update().select_related("artifact__scope").get(pk=candidate.pk)
    if candidate.status != ProfileCandidate.Status.PENDING:
        raise Conflict(f"candidate is {candidate.status}, not pending")
    revision = artifact_body_revision_create(
        scope=candidate.artifact.scope,
        family=Family.PROFILE,
        artifact_id=candidate.artifact.artifact_id,
        body=candidate.body,
        author=committed_by,
        expected_head_revision=expected_head_revision,
    )
    ProfileCandidate.objects.filter(pk=candidate.pk).update(
        status=ProfileCandidate.Status.COMMITTED, committed_revision=revision.revision
    )
    return revision


@transaction.atomic
def profile_candidate_reject(*, candidate: ProfileCandidate) -> ProfileCandidate:
    """Reject a pending candidate; the committed head is untouched."""
    updated = ProfileCandidate.objects.filter(pk=candidate.pk, status=ProfileCandidate.Status.PENDING).update(
        status=ProfileCandidate.Status.REJECTED
    )
    if not updated:
        raise Conflict("only a pending candidate can be rejected")
    candidate.refresh_from_db()
    return candidate
