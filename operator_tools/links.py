"""Admin pages of the exact rows a citation names."""

from __future__ import annotations

from django.urls import reverse

from artifacts.models import ArtifactRevision, MemoryEntryVersion
from artifacts.selectors import ResolvedCitation


def revision_admin_url(revision: ArtifactRevision) -> str:
    return reverse("admin:artifacts_artifactrevision_change", args=[revision.pk])


def entry_version_admin_url(version: MemoryEntryVersion | None) -> str | None:
    if version is None:
        return None
    return reverse("admin:artifacts_memoryentryversion_change", args=[version.pk])


def resolved_admin_url(resolved: ResolvedCitation) -> str:
    """The entry version's page for an entry citation, else the revision's page."""
    return entry_version_admin_url(resolved.entry_version) or revision_admin_url(resolved.revision)
