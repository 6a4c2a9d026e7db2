"""Operator admin. Revisions and entry versions are immutable: their pages are read-only."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from artifacts import selectors, services
from artifacts.exceptions import Conflict
from artifacts.models import (
    ApiKey,
    ApiKeyGrant,
    Artifact,
    ArtifactRevision,
    ContextReference,
    Family,
    MemoryEntryVersion,
    ProfileCandidate,
    Scope,
)


def _visible(text: str | None):
    """Stored text exactly, escaped (never interpreted as HTML), whitespace preserved."""
    if text is None:
        return "—"
    return format_html('<pre class="powercontext-body" style="white-space: pre-wrap">{}</pre>', text)


class ReadOnlyAdmin(admin.ModelAdmin):
    """No add, change or delete: the row is history."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ContextReferenceInline(admin.TabularInline):
    model = ContextReference
    fk_name = "scope"
    extra = 0
    ordering = ["position"]
    autocomplete_fields = ["target"]


@admin.register(Scope)
class ScopeAdmin(admin.ModelAdmin):
    list_display = ["scope_id", "title", "created_at"]
    search_fields = ["scope_id", "title"]
    inlines = [ContextReferenceInline]


@admin.register(Artifact)
class ArtifactAdmin(ReadOnlyAdmin):
    list_display = ["artifact_id", "family", "scope", "head_revision", "created_at"]
    list_filter = ["family", "scope"]
    list_select_related = ["scope"]
    search_fields = ["artifact_id", "scope__scope_id"]
    fields = ["scope", "family", "artifact_id", "head_revision", "created_at", "revision_links"]
    readonly_fields = fields

    @admin.display(description="Revisions")
    def revision_links(self, obj):
        revisions = ArtifactRevision.objects.filter(artifact=obj).order_by("-revision").values_list("pk", "revision")
        return format_html_join(
            ", ",
            '<a href="{}">revision {}</a>',
            ((reverse("admin:artifacts_artifactrevision_change", args=[pk]), number) for pk, number in revisions),
        )


@admin.register(ArtifactRevision)
class ArtifactRevisionAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "revision", "family", "content_sha256", "author", "created_at"]
    list_filter = ["artifact__family"]
    list_select_related = ["artifact__scope"]
    search_fields = ["=id", "content_sha256", "artifact__artifact_id", "artifact__scope__scope_id"]
    fields = [
        "artifact_link",
        "revision",
        "neighbours",
        "content_sha256",
        "author",
        "created_at",
        "title",
        "summary_text",
        "body_text",
        "live_entries",
    ]
    readonly_fields = fields

    @admin.display(description="Family")
    def family(self, obj):
        return obj.artifact.family

    @admin.display(description="Artifact")
    def artifact_link(self, obj):
        url = reverse("admin:artifacts_artifact_change", args=[obj.artifact_id])
        return format_html('<a href="{}">{}</a>', url, str(obj.artifact))

    @admin.display(description="Previous / next")
    def neighbours(self, obj):
        links = []
        for label, number in (("previous", obj.revision - 1), ("next", obj.revision + 1)):
            pk = (
                ArtifactRevision.objects.filter(artifact_id=obj.artifact_id, revision=number)
                .values_list("pk", flat=True)
                .first()
            )
            if pk:
                links.append((reverse("admin:artifacts_artifactrevision_change", args=[pk]), label, number))
        return format_html_join(" · ", '<a href="{}">{} (revision {})</a>', links) or "—"

    @admin.display(description="Body")
    def body_text(self, obj):
        return _visible(obj.body)

    @admin.display(description="Summary")
    def summary_text(self, obj):
        return _visible(obj.summary)

    @admin.display(description="Entry versions live at this revision")
    def live_entries(self, obj):
        if obj.artifact.family != Family.MEMORY:
            return "—"
        versions = selectors.memory_entries_live_at(artifact=obj.artifact, revision=obj.revision)
        return (
            format_html_join(
                "",
                '<div><a href="{}">{} @ {}</a></div>',
                (
                    (reverse("admin:artifacts_memoryentryversion_change", args=[v.pk]), v.entry_id, v.version_id)
                    for v in versions
                ),
            )
            or "none"
        )


@admin.register(MemoryEntryVersion)
class MemoryEntryVersionAdmin(ReadOnlyAdmin):
    list_display = ["entry_id", "version_id", "artifact", "born_in_revision", "retired_in_revision", "created_at"]
    list_select_related = ["artifact__scope"]
    search_fields = ["=id", "entry_id", "version_id", "content_sha256", "artifact__scope__scope_id"]
    list_filter = ["artifact__scope"]
    fields = [
        "artifact",
        "entry_id",
        "version_id",
        "born_in_revision",
        "retired_in_revision",
        "content_sha256",
        "created_at",
        "body_text",
    ]
    readonly_fields = fields

    @admin.display(description="Body")
    def body_text(self, obj):
        return _visible(obj.body)


@admin.register(ProfileCandidate)
class ProfileCandidateAdmin(admin.ModelAdmin):
    list_display = ["__str__", "status", "committed_revision", "proposed_by", "created_at"]
    list_filter = ["status"]
    list_select_related = ["artifact__scope"]
    search_fields = ["=id", "artifact__artifact_id", "artifact__scope__scope_id"]
    readonly_fields = [
        "artifact",
        "body",
        "content_sha256",
        "status",
        "committed_revision",
        "proposed_by",
        "created_at",
    ]
    actions = ["commit_candidates", "reject_candidates"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Commit selected pending candidates (creates profile revisions)")
    def commit_candidates(self, request, queryset):
        for candidate in queryset:
            try:
                services.profile_candidate_commit(candidate=candidate, committed_by=f"admin:{request.user}")
            except Conflict as exc:
                self.message_user(request, f"{candidate}: {exc}", messages.WARNING)

    @admin.action(description="Reject selected pending candidates")
    def reject_candidates(self, request, queryset):
        for candidate in queryset:
            try:
                services.profile_candidate_reject(candidate=candidate)
            except Conflict as exc:
                self.message_user(request, f"{candidate}: {exc}", messages.WARNING)


class ApiKeyGrantInline(admin.TabularInline):
    model = ApiKeyGrant
    extra = 1
    autocomplete_fields = ["scope"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "key_prefix", "created_at", "revoked_at"]
    search_fields = ["name", "key_prefix"]
    readonly_fields = ["key_prefix", "created_at"]
    fields = ["name", "key_prefix", "created_at", "revoked_at"]
    inlines = [ApiKeyGrantInline]
    actions = ["revoke_keys"]

    def has_add_permission(self, request):
        # A key's plaintext is shown once: create keys with `manage.py create_api_key`.
        return False

    @admin.action(description="Revoke selected keys")
    def revoke_keys(self, request, queryset):
        for api_key in queryset:
            services.api_key_revoke(api_key=api_key)
