"""The assembly API's URLs (included at the site root by ``powercontext.urls``)."""

from django.urls import path

from assembly.api import views

urlpatterns = [
    path("v1/context/prepare", views.PrepareContextView.as_view(), name="context-prepare"),
    path("v1/memory/search", views.MemorySearchView.as_view(), name="memory-search"),
]
