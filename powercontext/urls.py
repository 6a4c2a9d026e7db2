from django.contrib import admin
from django.urls import path

from artifacts.api import ExactRevisionView
from assembly.views import PrepareContextView

handler404 = "powercontext.errors.json_not_found"
handler500 = "powercontext.errors.json_server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/context/prepare", PrepareContextView.as_view(), name="context-prepare"),
    path("v1/artifacts/revision", ExactRevisionView.as_view(), name="artifact-revision"),
]
