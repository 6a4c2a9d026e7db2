"""The artifacts API's URLs (included at the site root by ``powercontext.urls``)."""

from django.urls import path

from artifacts.api import views

urlpatterns = [
    path("v1/scopes", views.ScopeListView.as_view(), name="scope-list"),
    path("v1/artifacts/revision", views.ExactRevisionView.as_view(), name="artifact-revision"),
    path("v1/artifacts/history", views.ArtifactHistoryView.as_view(), name="artifact-history"),
    path("v1/memory/entries", views.MemoryEntryCreateView.as_view(), name="memory-entry-create"),
    path("v1/memory/entries/update", views.MemoryEntryUpdateView.as_view(), name="memory-entry-update"),
    path("v1/memory/entries/remove", views.MemoryEntryRemoveView.as_view(), name="memory-entry-remove"),
    path("v1/experiences/revisions", views.ExperienceRevisionCreateView.as_view(), name="experience-write"),
    path("v1/topic-memories/revisions", views.TopicMemoryRevisionCreateView.as_view(), name="topic-memory-write"),
    path("v1/profile/candidates", views.ProfileCandidateProposeView.as_view(), name="profile-candidate-propose"),
    path(
        "v1/profile/candidates/<int:candidate_id>/commit",
        views.ProfileCandidateCommitView.as_view(),
        name="profile-candidate-commit",
    ),
    path(
        "v1/profile/candidates/<int:candidate_id>/reject",
        views.ProfileCandidateRejectView.as_view(),
        name="profile-candidate-reject",
    ),
]
