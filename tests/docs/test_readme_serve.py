"""The README's first set-up command, run as a user runs it: `python3 dev.py serve` migrates, loads the demo,
collects the static files and serves the API, a styled admin and the API docs (DEBUG off)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine_independent  # its own databases, whatever the suite's engine (.ci/run)

ROOT = Path(__file__).resolve().parents[2]
DEMO_KEY = json.loads((ROOT / "demo" / "demo.json").read_text(encoding="utf-8"))["api_keys"][0]["key"]
START_SECONDS = 240


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, data: bytes | None = None, headers: dict | None = None):
    request = urllib.request.Request(url, data=data, headers=headers or {})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback only
        return response.status, response.headers, response.read()


@pytest.mark.skipif(os.name != "posix", reason="stops the server's process group")
def test_dev_py_serve_answers_prepare_and_serves_the_admin_styled(tmp_path):
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    # A scratch database, so that the test never touches the checkout's data/powercontext.sqlite3.
    env |= {"DATABASE_URL": f"sqlite:///{tmp_path / 'serve.sqlite3'}", "SECRET_KEY": "test-" + "s" * 50}
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "dev.py", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if _get(f"{base}/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"dev.py serve did not answer within {START_SECONDS} s"
            time.sleep(1)
        body = json.dumps({"scope_id": "project:demo", "query": "How do we release the API?", "assembly": {}})
        status, _, answer = _get(
            f"{base}/v1/context/prepare",
            body.encode(),
            {"Authorization": f"Bearer {DEMO_KEY}", "Content-Type": "application/json"},
        )
        assert status == 200 and json.loads(answer)["status"] == "ready"
        status, headers, css = _get(f"{base}/static/admin/css/base.css")
        assert status == 200 and headers["Content-Type"].startswith("text/css") and b"body" in css
        # The API docs the banner names, with Swagger UI's collected files served by WhiteNoise (DEBUG off).
        status, _, page = _get(f"{base}/api/docs/")
        assert status == 200 and b"://" not in page
        script = re.search(rb'<script src="(/static/[^"]+swagger-ui-bundle[^"]+\.js)"', page).group(1).decode()
        assert _get(base + script)[0] == 200
        assert _get(f"{base}/api/schema/")[2] == (ROOT / "openapi" / "powercontext.yaml").read_bytes()
        printed = (tmp_path / "serve.log").read_text()
        assert f"API documentation: {base}/api/docs/" in printed
        assert f"Demo API key: {DEMO_KEY}" in printed
        # the README's examples and its client example need these two lines, with the port actually served
        assert f"export PC={base} KEY={DEMO_KEY}" in printed
        assert "-m pip install -e ./client" in printed
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()
