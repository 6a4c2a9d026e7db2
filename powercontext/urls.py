from django.contrib import admin
from django.urls import path

from artifacts import api as artifacts_api
from artifacts.admin_views import citation_resolve_view
from assembly.admin_views import prepare_inspect_view
from assembly.views import PrepareContextView
from powercontext import health

handler404 = "powercontext.errors.json_not_found"
handler500 = "powercontext.errors.json_server_error"

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    # Operator tools: staff only (admin_view redirects everyone else to the admin login).
    path("admin/powercontext/resolve/", admin.site.admin_view(citation_resolve_view), name="admin-citation-resolve"),
    path("admin/powercontext/inspect/", admin.site.admin_view(prepare_inspect_view), name="admin-prepare-inspect"),
    path("admin/", admin.site.urls),
    path("v1/context/prepare", PrepareContextView.as_view(), name="context-prepare"),
    path("v1/artifacts/revision", artifacts_api.ExactRevisionView.as_view(), name="artifact-revision"),
    path("v1/artifacts/history", artifacts_api.ArtifactHistoryView.as_view(), name="artifact-history"),
    path("v1/memory/entries", artifacts_api.MemoryEntryCreateView.as_view(), name="memory-entry-create"),
    path("v1/memory/entries/update", artifacts_api.MemoryEntryUpdateView.as_view(), name="memory-entry-update"),
    path("v1/memory/entries/remove", artifacts_api.MemoryEntryRemoveView.as_view(), name="memory-entry-remove"),
    path("v1/experiences/revisions", artifacts_api.ExperienceRevisionCreateView.as_view(), name="experience-write"),
    path(
        "v1/topic-memories/revisions", artifacts_api.TopicMemoryRevisionCreateView.as_view(), name="topic-memory-write"
    ),
    path(
        "v1/profile/candidates", artifacts_api.ProfileCandidateProposeView.as_view(), name="profile-candidate-propose"
    ),
    path(
        "v1/profile/candidates/<int:candidate_id>/commit",
        artifacts_api.ProfileCandidateCommitView.as_view(),
        name="profile-candidate-commit",
    ),
    path(
        "v1/profile/candidates/<int:candidate_id>/reject",
        artifacts_api.ProfileCandidateRejectView.as_view(),
        name="profile-candidate-reject",
    ),
]
