#!/usr/bin/env python
"""Run every shell example of the given Markdown files against a live demo server.

A ```sh block runs with bash (its `http://127.0.0.1:8000` pointed at the test server); it must exit
0. When a ```json block follows it, the command's output must match: every key shown must be
present with that value, `"…"` matches anything and a string ending in `…` matches by prefix.
A block right after `<!-- docs-test: skip -->` is not run (set-up commands that start servers).
The blocks of one file share one shell session as a reader's terminal does: every `export NAME=…` line of
an earlier block runs again before each later block (so the README sets `PC`, the address, once).
"""

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
DOCS_ADDRESS = "http://127.0.0.1:8000"
START_SECONDS = 120  # a loaded 2-core machine takes a while to import the server
BLOCK = re.compile(r"(<!-- docs-test: skip -->\s*)?```(\w*)\n(.*?)```", re.S)


def examples(path: Path):
    """(command, expected JSON or None) pairs of one Markdown file, in order."""
    blocks = [(bool(m.group(1)), m.group(2), m.group(3)) for m in BLOCK.finditer(path.read_text(encoding="utf-8"))]
    for i, (skip, language, text) in enumerate(blocks):
        if language != "sh" or skip:
            continue
        following = blocks[i + 1] if i + 1 < len(blocks) else None
        expected = json.loads(following[2]) if following and following[1] == "json" else None
        yield text, expected


def matches(expected, actual) -> bool:
    if expected == "…":
        return True
    if isinstance(expected, str) and expected.endswith("…") and isinstance(actual, str):
        return actual.startswith(expected[:-1])
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and all(map(matches, expected, actual))
    return expected == actual


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def demo_server(workdir: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A real server process: ``manage.py runserver`` (DEBUG off) on a free port over a fresh SQLite database in
    ``workdir`` holding the demo (``demo/demo.json``). Yields its base URL once ``/healthz`` answers, and the
    server's environment (its database and key: a ``manage.py`` command run with it reads the same data)."""
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{workdir}/docs.sqlite3", PYTHONUNBUFFERED="1")
    env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))  # DEBUG is off: the settings need a real key
    manage = [PYTHON, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, timeout=300)
    subprocess.run(
        [*manage, "load_context_fixtures", str(ROOT / "demo" / "demo.json")],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=300,
    )
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (Path(workdir) / "server.log").open("w")
    server = subprocess.Popen(
        [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited: {(Path(workdir) / 'server.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(base + "/healthz", timeout=1)  # noqa: S310 - loopback only
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not answer /healthz within {START_SECONDS} s") from None
                time.sleep(0.2)
        yield base, env
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()


def main(paths: list[str]) -> int:
    failures = ran = 0
    with demo_server(Path(tempfile.mkdtemp(prefix="powercontext-docs-"))) as (base, env):
        for name in paths:
            session: list[str] = []
            for command, expected in examples(Path(name)):
                ran += 1
                script = "\n".join([*session, command]).replace(DOCS_ADDRESS, base)
                session += [line for line in command.splitlines() if line.startswith("export ")]
                done = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", script],
                    env=env,
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                ok = done.returncode == 0
                if ok and expected is not None:
                    try:
                        ok = matches(expected, json.loads(done.stdout))
                    except json.JSONDecodeError:
                        ok = False
                status = "ok  " if ok else "FAIL"
                print(f"{status} {name}: {command.strip().splitlines()[0][:100]}")
                if not ok:
                    failures += 1
                    print(f"  exit {done.returncode}\n  stdout: {done.stdout[:2000]}\n  stderr: {done.stderr[:2000]}")
    print(f"docs examples: {ran - failures} passed, {failures} failed")
    return 1 if failures or not ran else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
