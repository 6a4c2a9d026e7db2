"""What gunicorn itself answers before PowerContext sees a request, with the limits docs/deployment.md configures.

gunicorn refuses an oversized request line or too many headers with its own HTML page (it never reaches the
application, so it cannot be the API's JSON shape); the guide's reverse proxy refuses them first with JSON.
These tests pin the numbers the guide states, against a real gunicorn started with the guide's options.
"""

import http.client
import re
import urllib.parse

import pytest

from tests.conftest import PROJECT_ROOT
from tests.integration.conftest import gunicorn, migrated_sqlite_environment

pytestmark = pytest.mark.engine_independent  # its own databases, whatever the suite's engine (.ci/run)

GUIDE = (PROJECT_ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
LIMIT_OPTIONS = re.findall(r"--limit-request-\S+ \d+", GUIDE.split("ExecStart=", 1)[1].splitlines()[0])
LINE_LIMIT = int(re.search(r"--limit-request-line (\d+)", GUIDE.split("ExecStart=", 1)[1]).group(1))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """gunicorn with the guide's request limits over a migrated SQLite database; yields (host, port)."""
    tmp = tmp_path_factory.mktemp("limits")
    env = migrated_sqlite_environment(tmp)
    options = [part for option in LIMIT_OPTIONS for part in option.split()]
    with gunicorn(tmp / "gunicorn.log", env, options=options) as base:
        yield urllib.parse.urlsplit(base).netloc


def get(netloc: str, target: str, headers: dict | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection(netloc, timeout=30)
    try:
        connection.request("GET", target, headers=headers or {})
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Content-Type", "")
    finally:
        connection.close()


def history_target(request_line_bytes: int) -> str:
    """A history read whose request line (``GET <target> HTTP/1.1``) has exactly this many bytes."""
    start = "/v1/artifacts/history?scope_id=project%3Ademo&family=memory&artifact_id="
    padding = request_line_bytes - len(f"GET {start} HTTP/1.1")
    return start + "%E8%AE%B0" * (padding // 9) + "m" * (padding % 9)


def test_the_guide_raises_the_request_line_limit_so_every_valid_read_fits():
    # Four 200-character identifiers of 3-byte characters, percent-encoded, make a request line of about 7.3 KB:
    # above gunicorn's default 4094 bytes.
    assert LINE_LIMIT == 8190


def test_a_request_line_at_the_limit_reaches_the_api_and_gets_its_json(server):
    status, content_type = get(server, history_target(LINE_LIMIT))
    assert (status, content_type) == (401, "application/json")


def test_a_request_line_past_the_limit_gets_gunicorns_own_414_page(server):
    status, content_type = get(server, history_target(LINE_LIMIT + 1))
    assert (status, content_type) == (414, "text/html")


def test_more_than_a_hundred_headers_get_gunicorns_own_431_page(server):
    status, content_type = get(server, "/healthz", {f"X-Extra-{i}": "1" for i in range(101)})
    assert (status, content_type) == (431, "text/html")
