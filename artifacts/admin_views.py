"""Operator admin tool: the citation resolver (staff only; wired in ``powercontext/urls.py``).

An operator pastes a citation as prepared content shows it (the Scope / Artifact / Entry lines of a
Markdown entry, or one legacy JSON item), or fills its fields, and is redirected to the admin page of
that exact revision or entry version. A citation that does not match gets a message naming what did
not match; the resolver never substitutes the head or a nearby revision.
"""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.contrib import admin
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from artifacts import selectors
from artifacts.models import ArtifactRevision, MemoryEntryVersion
from vocabulary.citation import Citation
from vocabulary.citation_text import CitationSyntaxError, citation_from_fields, parse_citation_text
from vocabulary.errors import NotFound
from vocabulary.escaping import artifact_label, json_literal, short_identity
from vocabulary.families import STORED_FAMILIES
from vocabulary.limits import MAX_REVISION

MAX_PASTE_CHARACTERS = 100_000


class CitationNotFound(Exception):
    """A well-formed citation that names nothing stored; the message says what did not match."""


@dataclass(frozen=True)
class ResolvedCitation:
    """The exact rows a citation names and the admin page to show."""

    citation: Citation
    revision: ArtifactRevision
    entry_version: MemoryEntryVersion | None

    @property
    def revision_url(self) -> str:
        return reverse("admin:artifacts_artifactrevision_change", args=[self.revision.pk])

    @property
    def entry_version_url(self) -> str | None:
        if self.entry_version is None:
            return None
        return reverse("admin:artifacts_memoryentryversion_change", args=[self.entry_version.pk])

    @property
    def url(self) -> str:
        """The entry version's page for an entry citation, else the revision's page."""
        return self.entry_version_url or self.revision_url


def _live_span(version: MemoryEntryVersion) -> str:
    if version.retired_in_revision is None:
        return f"it is live from revision {version.born_in_revision} on"
    last = version.retired_in_revision - 1
    if last == version.born_in_revision:
        return f"it was live only in revision {last}"
    return f"it was live in revisions {version.born_in_revision}–{last}"


def citation_resolve(citation: Citation) -> ResolvedCitation:
    """The exact revision (and entry version) a citation names, or CitationNotFound saying why."""
    where = f"in scope {json_literal(citation.scope_id)}"
    label = artifact_label(citation.family, citation.artifact_id)
    try:
        scope = selectors.scope_get(scope_id=citation.scope_id)
    except NotFound:
        raise CitationNotFound(f"no scope {json_literal(citation.scope_id)}") from None
    try:
        artifact = selectors.artifact_get(scope=scope, family=citation.family, artifact_id=citation.artifact_id)
    except NotFound:
        raise CitationNotFound(f"no artifact {label} {where}") from None
    try:
        revision = selectors.artifact_revision_get(artifact=artifact, revision=citation.revision)
    except NotFound:
        stored = f"its revisions are 1–{artifact.head_revision}" if artifact.head_revision else "it has no revisions"
        raise CitationNotFound(f"no revision {citation.revision} of {label} {where} ({stored})") from None
    if not citation.has_entry:
        return ResolvedCitation(citation, revision, None)
    try:
        version = selectors.memory_entry_version_get_at(
            artifact=artifact,
            revision=citation.revision,
            entry_id=citation.entry_id,
            version_id=citation.entry_version,
        )
    except NotFound:
        entry = short_identity(citation.entry_id)
        version_label = short_identity(citation.entry_version)
        found = selectors.memory_entry_version_find(artifact=artifact, version_id=citation.entry_version)
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


# --- forms ------------------------------------------------------------------------------------------


class CitationTextForm(forms.Form):
    citation = forms.CharField(
        label="Citation",
        strip=False,
        max_length=MAX_PASTE_CHARACTERS,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 100, "spellcheck": "false", "class": "vLargeTextField"}),
        help_text=(
            "The Scope, Artifact and (memory) Entry lines of a Markdown entry, or one legacy JSON item, "
            "exactly as the prepared content shows them. A whole entry is fine: body lines are ignored."
        ),
    )

    def clean(self):
        cleaned = super().clean()
        if "citation" in cleaned:
            try:
                cleaned["parsed"] = parse_citation_text(cleaned["citation"])
            except CitationSyntaxError as exc:
                raise forms.ValidationError(f"Malformed citation: {exc}") from None
        return cleaned


class CitationFieldsForm(forms.Form):
    scope = forms.CharField(label="Scope", strip=False, max_length=1000)
    family = forms.ChoiceField(label="Family", choices=[(family, family) for family in STORED_FAMILIES])
    artifact_id = forms.CharField(label="Artifact id", strip=False, max_length=1000)
    revision = forms.IntegerField(label="Revision", min_value=1, max_value=MAX_REVISION)
    entry_id = forms.CharField(label="Entry id", strip=False, max_length=1000, required=False)
    entry_version = forms.CharField(label="Entry version", strip=False, max_length=1000, required=False)
    literals = forms.BooleanField(
        label="Fields are JSON string literals",
        required=False,
        help_text=(
            'Tick to type identities as prepared content prints them, e.g. "a\\u202eb" or "line\\nbreak"; '
            "otherwise each field is taken exactly as typed."
        ),
    )

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            cleaned["parsed"] = citation_from_fields(
                scope_id=cleaned["scope"],
                family=cleaned["family"],
                artifact_id=cleaned["artifact_id"],
                revision=cleaned["revision"],
                entry_id=cleaned.get("entry_id") or None,
                entry_version=cleaned.get("entry_version") or None,
                literals=cleaned.get("literals", False),
            )
        except CitationSyntaxError as exc:
            raise forms.ValidationError(f"Malformed citation: {exc}") from None
        return cleaned


# --- view -------------------------------------------------------------------------------------------


def citation_resolve_view(request):
    """Resolve a pasted citation (``citation``) or its fields and redirect to the exact admin page.

    GET with parameters resolves too, so a resolver URL can be shared; nothing is ever written.
    """
    data = request.POST if request.method == "POST" else request.GET
    text_form = CitationTextForm(prefix="text")
    fields_form = CitationFieldsForm(prefix="fields")
    not_found = None
    active = None
    if "text-citation" in data:
        active = text_form = CitationTextForm(data, prefix="text")
    elif any(key.startswith("fields-") for key in data):
        active = fields_form = CitationFieldsForm(data, prefix="fields")
    if active is not None and active.is_valid():
        citation = active.cleaned_data["parsed"]
        try:
            resolved = citation_resolve(citation)
        except CitationNotFound as exc:
            not_found = f"Not found: {exc}."
        else:
            return HttpResponseRedirect(resolved.url)
    context = {
        **admin.site.each_context(request),
        "title": "Resolve a citation",
        "text_form": text_form,
        "fields_form": fields_form,
        "not_found": not_found,
    }
    return TemplateResponse(request, "admin/powercontext/resolve.html", context)
