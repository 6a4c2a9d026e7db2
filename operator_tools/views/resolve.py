"""Operator admin tool: the citation resolver (viewing revisions and entry versions; wired in ``powercontext/urls.py``).

An operator pastes a citation as prepared content shows it (the Scope / Artifact / Entry lines of a
Markdown entry, or one legacy JSON item), or fills its fields, and is redirected to the admin page of
that exact revision or entry version. A citation that does not match gets a message naming what did
not match; the resolver never substitutes the head or a nearby revision.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse

from artifacts import selectors
from artifacts.selectors import CitationNotFound
from operator_tools.forms import CitationFieldsForm, CitationTextForm
from operator_tools.links import resolved_admin_url


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
            # An entry version's page covers many revisions: its URL names the cited one, which the page links.
            return HttpResponseRedirect(resolved_admin_url(resolved))
    context = {
        **admin.site.each_context(request),
        "title": "Resolve a citation",
        "text_form": text_form,
        "fields_form": fields_form,
        "not_found": not_found,
    }
    return TemplateResponse(request, "admin/operator_tools/resolve.html", context)
