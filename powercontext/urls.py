from django.contrib import admin
from django.urls import include, path, re_path

from infrastructure import errors
from operator_tools.access import INSPECTOR, RESOLVER, tool_view
from operator_tools.views import citation_resolve_view, prepare_inspect_view
from powercontext import api_docs, health, scrape

handler400 = "infrastructure.errors.json_bad_request"
handler404 = "infrastructure.errors.json_not_found"
handler500 = "infrastructure.errors.json_server_error"

urlpatterns = [
    # Public, keyless (powercontext/api_docs.py): a pointer to what is served here, the committed OpenAPI file and
    # an interactive page over it (its assets under /static/, served by WhiteNoise: nothing from another host).
    path("", api_docs.index, name="index"),
    path("api/schema/", api_docs.openapi_schema, name=api_docs.SCHEMA_URL_NAME),
    path("api/docs/", api_docs.api_docs, name=api_docs.DOCS_URL_NAME),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", scrape.metrics_view, name="metrics"),
    # Operator tools: staff with each tool's permissions (operator_tools/access.py); the admin login for everyone
    # else, 403 for staff without them.
    path("admin/powercontext/resolve/", tool_view(RESOLVER, citation_resolve_view), name=RESOLVER.url_name),
    path("admin/powercontext/inspect/", tool_view(INSPECTOR, prepare_inspect_view), name=INSPECTOR.url_name),
    # The admin's "view on site" redirect (``/admin/r/<type>/<id>/``) serves no model here (none has a URL of its
    # own) and read any row by id for any staff member: it is not routed.
    re_path(r"^admin/r/", errors.json_not_found),
    path("admin/", admin.site.urls),
    # Each app's HTTP API, at the paths the OpenAPI document publishes.
    path("", include("assembly.api.urls")),
    path("", include("artifacts.api.urls")),
]
