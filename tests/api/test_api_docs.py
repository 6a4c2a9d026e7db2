"""The served API documentation (powercontext/api_docs.py): ``/``, ``/api/schema/`` and ``/api/docs/``.

As deployed: DEBUG off, ``collectstatic`` into STATIC_ROOT with the production storage, WhiteNoise serving the
hashed files through the WSGI application. The page must work with no internet: everything it loads is local.
"""

import json
import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
import yaml
from django.core.management import call_command
from django.core.wsgi import get_wsgi_application
from django.test import Client, override_settings

from tests.api.test_static_and_health import PRODUCTION_STORAGE, wsgi_get
from tests.conftest import PROJECT_ROOT

COMMITTED = PROJECT_ROOT / "openapi" / "powercontext.yaml"
PAGES = ("/", "/api/docs/", "/api/schema/")


class _References(HTMLParser):
    """Every ``src`` and ``href`` of a page, and the text of its inline scripts."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.urls += [value for name, value in attrs if name in ("src", "href") and value is not None]
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.scripts.append(data)


def _references(page: bytes) -> _References:
    parser = _References()
    parser.feed(page.decode("utf-8"))
    return parser


@pytest.fixture(scope="module")
def collected_root(tmp_path_factory):
    """One `collectstatic --no-input` with the production storage for the module (the Swagger UI files are large)."""
    root = tmp_path_factory.mktemp("static")
    with override_settings(DEBUG=False, STATIC_ROOT=root, STORAGES=_production_storages()):
        call_command("collectstatic", "--no-input", "-v", "0")
    return root


def _production_storages() -> dict:
    from django.conf import settings

    return {**settings.STORAGES, "staticfiles": {"BACKEND": PRODUCTION_STORAGE}}


@pytest.fixture
def deployed(settings, collected_root, db):
    """The WSGI application as deployed: DEBUG off, the hashed files collected, WhiteNoise scanning STATIC_ROOT."""
    settings.DEBUG = False
    settings.STATIC_ROOT = collected_root
    settings.STORAGES = _production_storages()
    return get_wsgi_application()


# --- the interactive page, as deployed ---------------------------------------------------------------


def test_the_docs_page_loads_only_local_static_files_and_each_is_served(deployed, collected_root):
    status, headers, page = wsgi_get(deployed, "/api/docs/")

    assert status == 200 and headers["Content-Type"].startswith("text/html")
    references = _references(page)
    # No other host anywhere in the page: no CDN, no absolute or protocol-relative URL, no validator badge.
    assert b"://" not in page and b"cdn" not in page.lower()
    assert references.urls, "the page names its Swagger UI files"
    for url in references.urls:
        assert url.startswith("/static/drf_spectacular_sidecar/swagger-ui-dist/"), url
        name = url.removeprefix("/static/")
        status, headers, body = wsgi_get(deployed, url)
        assert status == 200, url
        assert body == (collected_root / name).read_bytes()
        assert "immutable" in headers["Cache-Control"], "hashed names, cached forever"
    kinds = {urlsplit(url).path.rsplit(".", 1)[-1] for url in references.urls}
    assert kinds == {"css", "js", "png"}


def test_the_swagger_ui_files_name_nothing_on_another_host_they_would_load(deployed):
    _, _, page = wsgi_get(deployed, "/api/docs/")
    for url in _references(page).urls:
        if not url.endswith((".css", ".js")):
            continue
        _, _, body = wsgi_get(deployed, url)
        text = body.decode("utf-8")
        if url.endswith(".css"):
            # Styles load nothing: no @import, every url() an inline data: URL.
            assert "@import" not in text
            assert all(u.strip("'\"").startswith("data:") for u in re.findall(r"url\(([^)]*)\)", text)), url
        # Their source maps (for a browser's developer tools) are served too, under their hashed names.
        for source_map in re.findall(r"sourceMappingURL=([^\s*]+)", text):
            status, _, _ = wsgi_get(deployed, urljoin(url, source_map))
            assert status == 200, source_map


def test_the_docs_page_reads_the_served_schema_and_sends_nothing_to_a_validator(deployed):
    _, _, page = wsgi_get(deployed, "/api/docs/")
    script = "\n".join(_references(page).scripts)

    assert re.search(r'\burl: "/api/schema/",', script)
    swagger_settings = json.loads(re.search(r"const swaggerSettings = (\{.*?\});", script, re.S).group(1))
    assert swagger_settings["validatorUrl"] is None
    status, _, schema = wsgi_get(deployed, "/api/schema/")
    assert status == 200 and schema == COMMITTED.read_bytes()


def test_the_root_answers_200_with_its_links_as_deployed(deployed):
    status, headers, body = wsgi_get(deployed, "/")

    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["links"]["api_docs"] == "/api/docs/"


# --- the schema -------------------------------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "Bearer pc_wrong_0123456789abcdef0123456789abcdef"])
def test_the_schema_is_the_committed_file_byte_for_byte_without_a_key(client, authorization):
    # No database: neither the schema nor the page reads a key or anything else (any query would fail the test).
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = client.get("/api/schema/", **headers)

    assert response.status_code == 200
    assert response.content == COMMITTED.read_bytes()
    assert response["Content-Type"] == "application/vnd.oai.openapi; charset=utf-8"
    # tests/contract checks that the committed file is exactly what drf-spectacular generates from the code.
    assert set(yaml.safe_load(response.content)["paths"]) == set(yaml.safe_load(COMMITTED.read_text())["paths"])


def test_the_docs_page_needs_no_key_and_ignores_a_wrong_one(client):
    response = client.get("/api/docs/", HTTP_AUTHORIZATION="Bearer pc_wrong_0123456789abcdef0123456789abcdef")

    assert response.status_code == 200
    assert b"SwaggerUIBundle(" in response.content


def test_the_served_pages_are_not_in_the_openapi_document():
    paths = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))["paths"]

    assert all(path.startswith("/v1/") for path in paths)


# --- the pointer at / -------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "image/png"])
def test_the_root_names_the_docs_the_schema_the_admin_and_the_probe_in_json(client, accept):
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    response = client.get("/", **headers)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json" and response["Vary"] == "Accept"
    body = response.json()
    assert body == {
        "name": "PowerContext",
        "api": "/v1/",
        "links": {
            "api_docs": "/api/docs/",
            "openapi_schema": "/api/schema/",
            "admin": "/admin/",
            "healthz": "/healthz",
        },
    }
    # Every link answers (the admin with its login page).
    for name, url in body["links"].items():
        answer = client.get(url)
        assert answer.status_code == (302 if name == "admin" else 200), name
    assert client.get("/admin/").url.startswith("/admin/login/")


def test_a_browser_gets_the_root_as_a_page_of_links(client):
    response = client.get("/", HTTP_ACCEPT="text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8" and response["Vary"] == "Accept"
    assert set(_references(response.content).urls) == {"/api/docs/", "/api/schema/", "/admin/", "/healthz"}


# --- errors keep the one shape ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@pytest.mark.parametrize("path", PAGES)
def test_other_methods_are_a_405_in_the_error_shape_even_with_csrf_checks_on(path, method):
    response = Client(enforce_csrf_checks=True).generic(method, path)

    assert response.status_code == 405
    assert response.json() == {"error": {"code": "method_not_allowed", "message": "use GET", "fields": []}}
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("path", PAGES)
def test_head_answers_like_get_without_a_body(client, path):
    response = client.head(path)

    assert response.status_code == 200 and response.content == b""


def test_a_path_below_the_docs_is_a_404_in_the_error_shape(client):
    response = client.get("/api/docs/missing")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
