"""Reads of profile candidates."""

from __future__ import annotations

from artifacts.models import (
    Artifact,
    ProfileCandidate,
)
from artifacts.selectors.scopes import Writer, scope_get_writable
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


def profile_candidate_get_writable(*, principal: Writer, candidate_id: int) -> ProfileCandidate:
    """The candidate if the principal may write its scope (Forbidden when it may only read it).

    A candidate in a scope the principal may not even read answers exactly like a missing one.
    """
    candidate = profile_candidate_get(candidate_id=candidate_id)
    try:
        scope_get_writable(principal=principal, scope_id=candidate.artifact.scope.scope_id)
    except NotFound:
        raise NotFound("candidate not found") from None
    return candidate
