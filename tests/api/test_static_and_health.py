"""Static files through the WSGI app with DEBUG off, and the /healthz and /readyz probes."""

import io
import json
import os
import subprocess
import sys
import textwrap
from wsgiref.util import setup_testing_defaults

import pytest
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import call_command
from django.core.wsgi import get_wsgi_application
from django.test import Client

from tests import waits
from tests.conftest import PROJECT_ROOT

PRODUCTION_STORAGE = "whitenoise.storage.CompressedManifestStaticFilesStorage"


def wsgi_get(application, path: str, **headers) -> tuple[int, dict, bytes]:
    """One GET through a WSGI application: (status, headers, body)."""
    environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO(b""), **headers}
    setup_testing_defaults(environ)
    started = {}

    def start_response(status, response_headers, exc_info=None):
        started["status"] = int(status.split()[0])
        started["headers"] = dict(response_headers)

    result = application(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        getattr(result, "close", lambda: None)()
    return started["status"], started["headers"], body


# --- static files -------------------------------------------------------------------------------


@pytest.fixture
def collected_static(settings, tmp_path, db):
    """The production storage, after `manage.py collectstatic --no-input` into a fresh STATIC_ROOT.

    (``db``: a real WSGI request closes stale connections when it starts, which touches the database.)
    """
    settings.DEBUG = False
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {"BACKEND": PRODUCTION_STORAGE}}
    call_command("collectstatic", "--no-input", "-v", "0")
    return settings.STATIC_ROOT


def test_the_production_settings_use_the_compressed_manifest_storage():
    completed = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.STORAGES['staticfiles']['BACKEND'])"],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "powercontext.settings", "DEBUG": "false"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.stdout.strip() == PRODUCTION_STORAGE, completed.stderr


def test_admin_css_is_served_with_debug_off(collected_static):
    application = get_wsgi_application()

    status, headers, body = wsgi_get(application, "/static/admin/css/base.css")

    assert status == 200
    assert headers["Content-Type"].startswith("text/css")
    assert body == (collected_static / "admin" / "css" / "base.css").read_bytes()
    assert b"body {" in body or b"body{" in body


def test_hashed_names_are_served_compressed_and_cached_forever(collected_static):
    application = get_wsgi_application()
    url = staticfiles_storage.url("admin/css/base.css")
    assert url != "/static/admin/css/base.css" and url.endswith(".css")

    status, headers, body = wsgi_get(application, url, HTTP_ACCEPT_ENCODING="gzip")

    assert status == 200
    assert headers.get("Content-Encoding") == "gzip"
    assert "immutable" in headers["Cache-Control"]


def test_an_unknown_static_file_is_a_404(collected_static):
    status, _, _ = wsgi_get(get_wsgi_application(), "/static/admin/css/no-such-file.css")

    assert status == 404


# --- probes -------------------------------------------------------------------------------------


def test_healthz_answers_without_database_or_key(client):
    response = client.get("/healthz")  # no django_db mark: any query would fail the test

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_answers_ok_when_every_migration_is_applied(client):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_refuse_other_methods_in_the_error_shape_even_with_csrf_checks_on(db, path, method):
    # A browser-less client has no CSRF cookie: the CSRF middleware's HTML 403 must not answer first.
    response = Client(enforce_csrf_checks=True).generic(method, path)

    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert response["Allow"] == "GET, HEAD"


PROBE = textwrap.dedent(
    """
    import io, json, sys
    from wsgiref.util import setup_testing_defaults
    from powercontext.wsgi import application
    environ = {"PATH_INFO": sys.argv[1], "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO(b"")}
    setup_testing_defaults(environ)
    seen = {}
    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = int(status.split()[0]), dict(headers)
    body = b"".join(application(environ, start_response))
    print(json.dumps({"status": seen["status"], "retry_after": seen["headers"].get("Retry-After"),
                      "body": json.loads(body)}))
    """
)


def _probe(database_url: str, path: str = "/readyz") -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, path],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "powercontext.settings", "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.splitlines()[-1])


def _assert_unavailable(answer: dict, reason: str) -> None:
    assert answer["status"] == 503
    assert answer["retry_after"] == "5"
    assert set(answer["body"]) == {"error"}
    error = answer["body"]["error"]
    assert error["code"] == "service_unavailable" and error["fields"] == []
    assert reason in error["message"]


def test_readyz_is_503_until_migrate_then_200(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"

    _assert_unavailable(_probe(url), "not applied")

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "powercontext.settings", "DATABASE_URL": url}
    waits.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=PROJECT_ROOT, env=env, check=True)
    assert _probe(url) == {"status": 200, "retry_after": None, "body": {"status": "ok"}}


def test_readyz_is_503_when_the_database_is_unreachable_and_healthz_still_200():
    url = "postgres://nobody@127.0.0.1:1/powercontext"  # nothing listens on port 1

    _assert_unavailable(_probe(url), "unreachable")
    assert _probe(url, "/healthz")["body"] == {"status": "ok"}
