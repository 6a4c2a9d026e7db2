from django.contrib import admin
from django.urls import include, path

from operator_tools.views import citation_resolve_view, prepare_inspect_view
from powercontext import health, metrics

handler404 = "powercontext.errors.json_not_found"
handler500 = "powercontext.errors.json_server_error"

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    # Operator tools: staff only (admin_view redirects everyone else to the admin login).
    path("admin/powercontext/resolve/", admin.site.admin_view(citation_resolve_view), name="admin-citation-resolve"),
    path("admin/powercontext/inspect/", admin.site.admin_view(prepare_inspect_view), name="admin-prepare-inspect"),
    path("admin/", admin.site.urls),
    # Each app's HTTP API, at the paths the OpenAPI document publishes.
    path("", include("assembly.api.urls")),
    path("", include("artifacts.api.urls")),
]
