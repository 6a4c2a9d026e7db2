"""Operator admin tool: the citation resolver (staff only; wired in ``powercontext/urls.py``).

An operator pastes a citation as prepared content shows it (the Scope / Artifact / Entry lines of a
Markdown entry, or one legacy JSON item), or fills its fields, and is redirected to the admin page of
that exact revision or entry version. A citation that does not match gets a message naming what did
not match; the resolver never substitutes the head or a nearby revision.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from artifacts import selectors
from artifacts.models import ArtifactRevision, MemoryEntryVersion
from artifacts.selectors import CitationNotFound, ResolvedCitation
from vocabulary.citation_text import CitationSyntaxError, citation_from_fields, parse_citation_text
from vocabulary.families import STORED_FAMILIES
from vocabulary.limits import MAX_REVISION

MAX_PASTE_CHARACTERS = 100_000


def revision_admin_url(revision: ArtifactRevision) -> str:
    return reverse("admin:artifacts_artifactrevision_change", args=[revision.pk])


def entry_version_admin_url(version: MemoryEntryVersion | None) -> str | None:
    if version is None:
        return None
    return reverse("admin:artifacts_memoryentryversion_change", args=[version.pk])


def resolved_admin_url(resolved: ResolvedCitation) -> str:
    """The entry version's page for an entry citation, else the revision's page."""
    return entry_version_admin_url(resolved.entry_version) or revision_admin_url(resolved.revision)


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
            resolved = selectors.citation_resolve(citation=citation)
        except CitationNotFound as exc:
            not_found = f"Not found: {exc}."
        else:
            return HttpResponseRedirect(resolved_admin_url(resolved))
    context = {
        **admin.site.each_context(request),
        "title": "Resolve a citation",
        "text_form": text_form,
        "fields_form": fields_form,
        "not_found": not_found,
    }
    return TemplateResponse(request, "admin/powercontext/resolve.html", context)
