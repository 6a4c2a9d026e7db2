"""The scopes' admin: references edited in order, under the same limit and lock as the API's, and the operator's
authority tier (a staff member needs its own permission to set one).
"""

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Count, Prefetch
from django.forms.models import BaseInlineFormSet

from artifacts import services
from artifacts.admin.display import identity_column, text_column
from artifacts.admin.erasure import ErasureAdminMixin
from artifacts.admin.guards import GuardedAdmin, GuardedAutocomplete
from artifacts.admin.related import may_view
from artifacts.models import (
    Artifact,
    ContextReference,
    Scope,
)
from artifacts.permissions import CHANGE_SCOPE_AUTHORITY
from vocabulary.authority import AUTHORITY_DEFAULT
from vocabulary.escaping import short_identity
from vocabulary.limits import MAX_SCOPE_REFERENCES


class ContextReferenceFormSet(BaseInlineFormSet):
    """Counts the references the scope will have from the database, not from the forms posted.

    ``max_num`` only limits the blank forms shown, and the posted form counts are the client's to set: a POST
    that declares no existing rows adds its rows to the stored ones.
    """

    def clean(self):
        super().clean()
        if any(self.errors):
            return
        if self.instance.pk:
            # The admin validates and saves in one transaction: a concurrent edit of the same scope waits, then
            # counts this one's rows (else both could add up to more than the limit).
            services.scope_references_lock(scope_pk=self.instance.pk)
        posted = [form for form in self.forms if form.has_changed() or form.instance.pk]
        kept = [form for form in posted if not self._should_delete_form(form)]
        edited = {form.instance.pk for form in posted if form.instance.pk}
        stored = ContextReference.objects.filter(scope_id=self.instance.pk) if self.instance.pk else None
        untouched = stored.exclude(pk__in=edited) if stored is not None else ContextReference.objects.none()
        if (problem := services.scope_references_count_problem(untouched.count() + len(kept))) is not None:
            raise ValidationError(problem)
        # A stored reference the POST left out keeps its position and target: a posted one taking either is the
        # form's error (the database would refuse the save with a 500).
        positions, targets = set(), set()
        for position, target in untouched.values_list("position", "target_id"):
            positions.add(position)
            targets.add(target)
        for form in kept:
            if form.cleaned_data.get("position") in positions:
                form.add_error("position", "another reference of this scope has this position")
            if (target := form.cleaned_data.get("target")) is not None and target.pk in targets:
                form.add_error("target", "another reference of this scope already names this scope")


class ContextReferenceInline(GuardedAutocomplete, admin.TabularInline):
    model = ContextReference
    formset = ContextReferenceFormSet
    fk_name = "scope"
    extra = 0
    ordering = ["position"]
    autocomplete_fields = ["target"]
    max_num = MAX_SCOPE_REFERENCES


@admin.register(Scope)
class ScopeAdmin(ErasureAdminMixin, GuardedAdmin):
    list_display = [
        identity_column("scope_id", "scope id"),
        text_column("title", "title"),
        "authority_shown",
        "references_shown",
        "artifact_count",
        "created_at",
    ]
    search_fields = ["scope_id", "title"]
    inlines = [ContextReferenceInline]
    related_columns = {"references_shown": ContextReference, "artifact_count": Artifact}
    """Columns of other models' rows, each only for staff who may view that model (``artifacts.admin.related``):
    others get no such column (the references inline of a scope's page asks Django's own permission)."""

    def get_list_display(self, request):
        related = self.related_columns
        shown = super().get_list_display(request)
        return [item for item in shown if item not in related or may_view(request.user, related[item])]

    def get_queryset(self, request):
        # Counts and references in two statements for the whole page, not one per scope.
        references = Prefetch("references", ContextReference.objects.select_related("target").order_by("position"))
        # Ordered explicitly: the count groups the rows, which drops the model's default ordering, and the
        # autocomplete pages this queryset as it is.
        queryset = super().get_queryset(request).annotate(artifact_total=Count("artifacts"))
        return queryset.prefetch_related(references).order_by("scope_id")

    @admin.display(description="references (in order)")
    def references_shown(self, obj):
        return ", ".join(short_identity(reference.target.scope_id) for reference in obj.references.all()) or "—"

    @admin.display(description="artifacts", ordering="artifact_total")
    def artifact_count(self, obj):
        return obj.artifact_total

    @admin.display(description="authority")
    def authority_shown(self, obj):
        # The effective tier: an unset one is the default, said so.
        return obj.authority if obj.authority is not None else f"{AUTHORITY_DEFAULT} (default)"

    scope_id_shown = identity_column("scope_id", "Scope id")

    def _may_set_authority(self, request) -> bool:
        return request.user.has_perm(CHANGE_SCOPE_AUTHORITY)

    def get_fields(self, request, obj=None):
        # Every citation names the scope id: the database refuses to change it, so the form does too. The tier is a
        # form field only for staff holding CHANGE_SCOPE_AUTHORITY; others see it read-only (so a post of it from
        # anyone else is ignored: the form has no such field).
        authority = "authority" if self._may_set_authority(request) else "authority_shown"
        return (
            ["scope_id_shown", "title", authority, "erase_link"]
            if obj is not None
            else ["scope_id", "title", authority]
        )

    def get_readonly_fields(self, request, obj=None):
        shown = [] if self._may_set_authority(request) else ["authority_shown"]
        return ["scope_id_shown", *shown, "erase_link"] if obj is not None else shown

    def save_model(self, request, obj, form, change):
        if not change:
            super().save_model(request, obj, form, change)
            return
        # Only the form's columns (the title), never scope_id, even unchanged: the scope has a BEFORE UPDATE
        # trigger, and PostgreSQL then locks the row in the mode the statement's column list asks for; naming
        # scope_id, a unique key, makes it FOR UPDATE, which blocks the FOR KEY SHARE with which every other
        # transaction checks a foreign key to this scope at its commit. Two operators each adding a reference to
        # the other's scope then deadlocked. A title-only UPDATE takes FOR NO KEY UPDATE, which does not block it.
        # The tier is among the form's columns only for staff who may set it (get_fields); the change message of the
        # admin log names it when it changed.
        obj.save(update_fields=list(form.fields))
