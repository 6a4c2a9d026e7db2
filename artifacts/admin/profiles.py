"""Profile candidates in the admin: reviewed and committed or rejected through the services (never edited)."""

from django.contrib import admin, messages

from artifacts import services
from artifacts.admin.display import artifact_link, text_shown
from artifacts.admin.guards import GuardedAdmin
from artifacts.admin.related import author_display
from artifacts.models import (
    ProfileCandidate,
)
from vocabulary.errors import Conflict


@admin.register(ProfileCandidate)
class ProfileCandidateAdmin(GuardedAdmin):
    list_display = [
        "__str__",
        "status",
        "committed_revision",
        "proposed_by_column",
        "created_at",
    ]
    list_filter = ["status"]
    list_select_related = ["artifact__scope"]
    search_fields = ["=id", "artifact__artifact_id", "artifact__scope__scope_id"]
    # A tuple: one sequence serves as fields and readonly_fields, which a list could not type as both.
    readonly_fields = (
        "artifact_link",
        "body_text",
        "content_sha256",
        "status",
        "committed_revision",
        "proposed_by_shown",
        "created_at",
    )
    fields = readonly_fields
    actions = ["commit_candidates", "reject_candidates"]
    artifact_link = artifact_link
    # A proposer naming an API key (api-key:<name>) names another model's row (artifacts.admin.related).
    proposed_by_column = author_display("proposed_by", "proposed by")
    proposed_by_shown = author_display("proposed_by", "Proposed by", explained=True)

    @admin.display(description="Body")
    def body_text(self, obj):
        return text_shown(obj.body)

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    # Committing writes a profile revision and rejecting closes a candidate: both change it, so view-only staff
    # neither see nor can post them.
    @admin.action(description="Commit selected pending candidates (creates profile revisions)", permissions=["change"])
    def commit_candidates(self, request, queryset):
        for candidate in queryset:
            try:
                services.profile_candidate_commit(candidate=candidate, committed_by=f"admin:{request.user}")
            except Conflict as exc:
                self.message_user(request, f"{candidate}: {exc}", messages.WARNING)

    @admin.action(description="Reject selected pending candidates", permissions=["change"])
    def reject_candidates(self, request, queryset):
        for candidate in queryset:
            try:
                services.profile_candidate_reject(candidate=candidate)
            except Conflict as exc:
                self.message_user(request, f"{candidate}: {exc}", messages.WARNING)
