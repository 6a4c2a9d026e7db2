"""Admin pages of the exact rows a citation names."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from artifacts.admin.display import CITED_REVISION_PARAMETER
from artifacts.models import ArtifactRevision, MemoryEntryVersion
from artifacts.selectors import ResolvedCitation


def revision_admin_url(revision: ArtifactRevision) -> str:
    return reverse("admin:artifacts_artifactrevision_change", args=[revision.pk])


def entry_version_admin_url(version: MemoryEntryVersion | None, *, cited_revision: int | None = None) -> str | None:
    """The entry version's page; with the revision a citation named, the page links that revision too."""
    return None if version is None else entry_version_pk_admin_url(version.pk, cited_revision=cited_revision)


def entry_version_pk_admin_url(pk: int, *, cited_revision: int | None = None) -> str:
    """The page of the entry version with this primary key (see ``entry_version_admin_url``)."""
    url = reverse("admin:artifacts_memoryentryversion_change", args=[pk])
    return url if cited_revision is None else f"{url}?{urlencode({CITED_REVISION_PARAMETER: cited_revision})}"


def resolved_admin_url(resolved: ResolvedCitation) -> str:
    """The entry version's page for an entry citation (carrying the cited revision), else the revision's page."""
    entry_page = entry_version_admin_url(resolved.entry_version, cited_revision=resolved.revision.revision)
    return entry_page or revision_admin_url(resolved.revision)
