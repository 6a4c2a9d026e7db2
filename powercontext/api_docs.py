"""The served API documentation and the pointer at ``/``: public, keyless, and touching no database.

``GET /api/schema/`` answers the committed OpenAPI file (openapi/powercontext.yaml) byte for byte, not a schema
generated per request: what a client reads is exactly the reviewed contract that tests/contract checks against
the code, it costs a file read once per process instead of a generation per request (it is public), and it cannot
vary with the requester or the deployment. It needs no API key: it is the same document the repository publishes
and names no scope, key or data.

``GET /api/docs/`` is drf-spectacular's own Swagger UI view, its assets shipped by drf-spectacular-sidecar and
served by WhiteNoise from ``/static/`` like the admin's (SPECTACULAR_SETTINGS: nothing is loaded from another host).
It reads no key either (SERVE_AUTHENTICATION is empty): its "Authorize" button only sets the Bearer key that "Try it
out" sends to the API, which checks it as for any client.

``GET /`` answers JSON (HTML to a client that prefers it) naming the docs, the schema, the admin and ``/healthz``.
"""

import functools
import html
import json

from django.conf import settings
from django.http import HttpResponse
from django.urls import get_script_prefix, reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularSwaggerView

from powercontext.health import READ_METHODS, method_not_allowed

SCHEMA_FILE = settings.BASE_DIR / "openapi" / "powercontext.yaml"
SCHEMA_CONTENT_TYPE = "application/vnd.oai.openapi; charset=utf-8"
"""The OpenAPI YAML media type (drf-spectacular's own YAML renderer answers the same)."""

SCHEMA_URL_NAME = "api-schema"
DOCS_URL_NAME = "api-docs"


@functools.cache
def _schema_bytes() -> bytes:
    return SCHEMA_FILE.read_bytes()


@csrf_exempt
def openapi_schema(request):
    """The committed OpenAPI document, exactly as committed."""
    if request.method not in READ_METHODS:
        return method_not_allowed()
    return HttpResponse(
        _schema_bytes(),
        content_type=SCHEMA_CONTENT_TYPE,
        headers={"Content-Disposition": 'inline; filename="powercontext.yaml"'},
    )


_swagger_ui = SpectacularSwaggerView.as_view(url_name=SCHEMA_URL_NAME, title="PowerContext API")


@csrf_exempt
def api_docs(request):
    """Swagger UI over the committed schema. GET and HEAD only: any other method is the probes' 405 in the error
    shape (the view's own would be rendered by its HTML renderer, and its OPTIONS has no template to render)."""
    if request.method not in READ_METHODS:
        return method_not_allowed()
    return _swagger_ui(request)


def _links() -> dict[str, str]:
    return {
        "api_docs": reverse(DOCS_URL_NAME),
        "openapi_schema": reverse(SCHEMA_URL_NAME),
        "admin": reverse("admin:index"),
        "healthz": reverse("healthz"),
    }


_TITLES = {
    "api_docs": "API documentation (interactive)",
    "openapi_schema": "OpenAPI schema (YAML)",
    "admin": "Admin (operators)",
    "healthz": "Health probe",
}


def _html(links: dict[str, str]) -> str:
    items = "".join(
        f'<li><a href="{html.escape(url)}">{html.escape(_TITLES[name])}</a> <code>{html.escape(url)}</code></li>'
        for name, url in links.items()
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>PowerContext</title></head>'
        f"<body><h1>PowerContext</h1><p>A context server for LLM agent hosts. The API is under "
        f"<code>/v1/</code>; every request needs an API key.</p><ul>{items}</ul></body></html>\n"
    )


@csrf_exempt
def index(request):
    """``/``: where the docs, the schema, the admin and the probe are; JSON unless the client prefers HTML."""
    if request.method not in READ_METHODS:
        return method_not_allowed()
    links = _links()
    if request.get_preferred_type(["application/json", "text/html"]) == "text/html":
        response = HttpResponse(_html(links), content_type="text/html; charset=utf-8")
    else:
        body = {"name": "PowerContext", "api": f"{get_script_prefix()}v1/", "links": links}
        response = HttpResponse(json.dumps(body), content_type="application/json")
    response["Vary"] = "Accept"
    return response
