"""Reads of profile candidates."""

from __future__ import annotations

from artifacts.models import (
    Artifact,
    ProfileCandidate,
)
from vocabulary.errors import NotFound


def profile_candidate_list_all(*, artifact: Artifact) -> list:
    """Every candidate proposed for a profile artifact (any status), oldest first."""
    return list(artifact.candidates.order_by("created_at", "id"))


def profile_candidate_get(*, candidate_id: int) -> ProfileCandidate:
    """One profile candidate with its artifact and scope, or NotFound."""
    try:
        return ProfileCandidate.objects.select_related("artifact__scope").get(pk=candidate_id)
    except ProfileCandidate.DoesNotExist as exc:
        raise NotFound("candidate not found") from exc
