"""Erasing from the admin (issue 51, item 3): an "Erase…" page on an entry version's, a revision's and a scope's page.

Guarded by a permission of its own (``artifacts.erase_content``), never by a view or change permission, and never
reachable with an API key (the admin takes staff logins only). The page names the target by identity only and asks for
the reason; the erasure itself is ``artifacts.services.erasure.content_erase``, as ``manage.py erase`` runs it.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from artifacts.admin.display import ReadOnlyAdmin
from artifacts.admin.related import viewer_display
from artifacts.models import Erasure, Family, MemoryEntryVersion, Scope
from artifacts.services.erasure import content_erase, erasure_index_rebuild
from vocabulary.errors import DomainError
from vocabulary.escaping import artifact_label, json_literal
from vocabulary.limits import MAX_ERASURE_REASON_CHARACTERS

ERASE_PERMISSION = "artifacts.erase_content"


class ErasureReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=MAX_ERASURE_REASON_CHARACTERS,
        help_text="Why (kept in the erasure record, shown with every 410 answer for the erased text).",
    )


def _target(obj) -> tuple[str, str, dict]:
    """What ``obj`` is called on the page, what erasing it does, and ``content_erase``'s arguments for it."""
    if isinstance(obj, Scope):
        return (
            f"scope {json_literal(obj.scope_id)}",
            "Every text it holds is erased: entry versions, revisions' bodies, titles and summaries.",
            {"scope_id": obj.scope_id},
        )
    artifact = obj.artifact
    where = {"scope_id": artifact.scope.scope_id, "family": artifact.family, "artifact_id": artifact.artifact_id}
    label = f"{artifact_label(artifact.family, artifact.artifact_id)} in scope {json_literal(artifact.scope.scope_id)}"
    if isinstance(obj, MemoryEntryVersion):
        return (
            f"entry {json_literal(obj.entry_id)} version {json_literal(obj.version_id)} of {label}",
            "Its body is erased.",
            {**where, "version_id": obj.version_id},
        )
    effect = (
        "The bodies of the entry versions it bore are erased."
        if artifact.family == Family.MEMORY
        else "Its body, title and summary are erased."
    )
    return f"revision {obj.revision} of {label}", effect, {**where, "revision": obj.revision}


class ErasureAdminMixin:
    """Adds ``<id>/erase/`` to a ModelAdmin (entry versions, revisions, scopes), and the ``erase_link`` field."""

    model: type[models.Model]  # the ModelAdmin's, which this mixin is always combined with

    def get_urls(self):
        erase = path(
            "<path:object_id>/erase/", self.admin_site.admin_view(self.erase_view), name=self._url_name("erase")
        )
        return [erase, *super().get_urls()]

    def erase_view(self, request, object_id):
        if not request.user.has_perm(ERASE_PERMISSION):
            raise PermissionDenied
        obj = self.model._default_manager.filter(pk=object_id).first() if object_id.isdigit() else None
        if obj is None:
            raise Http404("no such row")
        target, effect, arguments = _target(obj)
        form = ErasureReasonForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                record = content_erase(
                    **arguments, reason=form.cleaned_data["reason"], erased_by=f"admin:{request.user.get_username()}"
                )
            except DomainError as exc:
                form.add_error(None, str(exc))
            else:
                erasure_index_rebuild(scope_id=record.scope.scope_id)
                self.message_user(
                    request, f"erasure #{record.sequence}: {record.rows_erased} texts erased", messages.SUCCESS
                )
                return HttpResponseRedirect(reverse(f"admin:{self._url_name('change')}", args=[obj.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": "Erase stored text",
            "target": target,
            "effect": effect,
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/powercontext/erase_form.html", context)

    @viewer_display(description="Erasure")
    def erase_link(self, obj, user):
        """The way to the erase page, for staff holding the erase permission only."""
        if not user.has_perm(ERASE_PERMISSION):
            return "—"
        url = reverse(f"admin:{self._url_name('erase')}", args=[obj.pk])
        return format_html('<a href="{}" class="powercontext-erase-link">Erase…</a>', url)

    def _url_name(self, view: str) -> str:
        return f"{self.model._meta.app_label}_{self.model._meta.model_name}_{view}"


def erasure_shown(record: Erasure) -> str:
    """One line naming an erasure record (the admin's pages of erased rows)."""
    return (
        f"erased by erasure #{record.sequence} ({record.kind}) on {record.erased_at:%Y-%m-%d %H:%M:%S} UTC by "
        f"{json_literal(record.erased_by)}: {json_literal(record.reason)}"
    )


@admin.register(Erasure)
class ErasureAdmin(ReadOnlyAdmin):
    """The erasure records, newest first: what, when, by whom, why, and the hashes that stay (never editable)."""

    list_display = ["sequence", "kind", "scope", "artifact", "revision", "version_id", "rows_erased", "erased_at"]
    list_select_related = ["scope", "artifact__scope"]
    ordering = ["-sequence"]
    # A tuple: one sequence serves as fields and readonly_fields, which a list could not type as both.
    fields = (
        "sequence",
        "kind",
        "scope",
        "artifact",
        "revision",
        "entry_id",
        "version_id",
        "rows_erased",
        "erased_sha256",
        "reason",
        "erased_by",
        "erased_at",
        "previous_sha256",
        "chain_sha256",
    )
    readonly_fields = fields
