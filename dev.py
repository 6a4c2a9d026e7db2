#!/usr/bin/env python3
"""Set-up commands that need only Python 3.11+ (standard library).

    python3 dev.py serve   # venv, migrate SQLite, load the demo, print the key and a curl, serve :8000
                           # (--address 127.0.0.1 --port 8001 for another address or port)
    python3 dev.py test    # test venv, then the whole suite on every core (DATABASE_URL picks the engine)

Any further arguments of `test` go to pytest. The suite runs in pytest-xdist workers, one per core (`-n auto
--dist loadgroup`: tests that share a server or a file are marked `xdist_group` and run on one worker); an
`-n`/`--numprocesses` of your own, or `-p no:xdist`, replaces that (`-n 0` runs in this one process).

`serve` installs requirements.txt (what the server needs); `test` installs requirements-dev.txt
(requirements.txt plus the test, lint and benchmark tools); each keeps its own stamp, so neither reinstalls
what is already there. While pip installs, each line it prints is shown with the seconds elapsed (and a line
every 15 s when it prints nothing), then how long the whole install took.
The virtual environment is `.venv` beside this file for `serve` and `.venv-test` for `test`, so that installing
the test tools never touches (and so never restarts) a server that `dev.py serve` runs, unless POWERCONTEXT_VENV
names another directory (relative to this file) for both, so that one checkout can keep one venv per Python line,
e.g. `POWERCONTEXT_VENV=.venv-py3.11 python3.11 dev.py test`. It is created with the Python that runs dev.py.
"""

import hashlib
import os
import queue
import subprocess
import sys
import threading
import time
import venv
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TEST_VENV = ".venv-test"
"""The venv of `dev.py test` when POWERCONTEXT_VENV names none: never the one `dev.py serve` runs from."""
VENV = ROOT / os.environ.get("POWERCONTEXT_VENV", ".venv")
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
REQUIREMENTS = ROOT / "requirements.txt"
DEV_REQUIREMENTS = ROOT / "requirements-dev.txt"
STAMP = VENV / ".requirements.sha256"
DEV_STAMP = VENV / ".requirements-dev.sha256"
EDITABLE_PROJECTS = (
    ROOT / "client" / "pyproject.toml",
    ROOT / "integrations" / "hermes_powercontext" / "pyproject.toml",
    ROOT / "integrations" / "powercontext_mcp" / "pyproject.toml",
    ROOT / "integrations" / "langgraph_powercontext" / "pyproject.toml",
)
DEMO_KEY = "pc_demo_0123456789abcdef0123456789abcdef"


def _run(*args, **kwargs) -> None:
    completed = subprocess.run([str(a) for a in args], cwd=ROOT, **kwargs)
    if completed.returncode:
        sys.exit(completed.returncode)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _echo_with_elapsed(
    args: Sequence[object], *, quiet_seconds: float = 15.0, clock: Callable[[], float] = time.monotonic
) -> int:
    """Run ``args``, printing each line of its output (stdout and stderr) after the seconds elapsed, and a line
    whenever it has been silent for ``quiet_seconds``; return its exit status."""
    started = clock()

    def say(text: str) -> None:
        print(f"[{clock() - started:4.0f}s] {text}", flush=True)

    process = subprocess.Popen(
        [str(a) for a in args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=os.environ | {"PYTHONUNBUFFERED": "1"},  # pip's lines as it prints them, not a buffer at a time
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=quiet_seconds)
        except queue.Empty:
            say("… still working")
            continue
        if line is None:
            return process.wait()
        say(line.rstrip())


def _install(requirements: Path) -> None:
    """pip install -r ``requirements`` into the venv, showing pip's progress (a line or more per package)."""
    print(f"installing {requirements.name} into {_shown(VENV)} (seconds elapsed on the left)", flush=True)
    started = time.monotonic()
    status = _echo_with_elapsed(
        [PYTHON, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off", "-r", requirements]
    )
    elapsed = time.monotonic() - started
    if status:
        print(f"installing {requirements.name} failed after {elapsed:.0f} s (pip exit status {status})", flush=True)
        sys.exit(status)
    print(f"installed {requirements.name} into {_shown(VENV)} in {elapsed:.0f} s", flush=True)


def _digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_environment(dev: bool = False) -> None:
    """Create the venv; install requirements.txt (dev: requirements-dev.txt) when it changed since the last install."""
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs under whatever python3 is first
        sys.exit(f"PowerContext needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        print(f"creating {VENV} with Python {sys.version.split()[0]}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    runtime = _digest(REQUIREMENTS)
    if dev:  # requirements-dev.txt includes requirements.txt and installs the editable client and integration
        stamp, requirements = DEV_STAMP, DEV_REQUIREMENTS
        wanted = _digest(REQUIREMENTS, DEV_REQUIREMENTS, *EDITABLE_PROJECTS)
    else:
        stamp, requirements, wanted = STAMP, REQUIREMENTS, runtime
    if not stamp.exists() or stamp.read_text().strip() != wanted:
        _install(requirements)
        stamp.write_text(wanted)
        if dev:  # the runtime part came with it
            STAMP.write_text(runtime)


def versions() -> str:
    """Python and Django of the venv, e.g. `Python 3.11.7, Django 5.2.19 (.venv-py3.11)`."""
    code = "import platform, django; print(f'Python {platform.python_version()}, Django {django.get_version()}')"
    completed = subprocess.run([str(PYTHON), "-c", code], cwd=ROOT, capture_output=True, text=True)
    return f"{completed.stdout.strip() or 'unknown Python/Django'} ({_shown(VENV)})"


def serve(argv: list[str]) -> None:
    import argparse
    import secrets

    parser = argparse.ArgumentParser(prog="python3 dev.py serve")
    parser.add_argument("--address", default="127.0.0.1", help="default 127.0.0.1 (others need ALLOWED_HOSTS)")
    parser.add_argument("--port", type=int, default=8000, help="default 8000")
    options = parser.parse_args(argv)
    address = f"{options.address}:{options.port}"
    ensure_environment()
    # A random key for this checkout, kept in data/ (DEBUG is off, so the settings need one).
    key_file = ROOT / "data" / "secret_key"
    if not key_file.exists() and not (os.environ.get("SECRET_KEY") or os.environ.get("SECRET_KEY_FILE")):
        key_file.parent.mkdir(exist_ok=True)
        key_file.touch(mode=0o600)
        key_file.write_text(secrets.token_urlsafe(50) + "\n")
    _run(PYTHON, "manage.py", "migrate", "--no-input", "-v", "0")
    _run(PYTHON, "manage.py", "load_context_fixtures", "demo/demo.json")
    _run(PYTHON, "manage.py", "collectstatic", "--no-input", "-v", "0")
    print(
        "\nPowerContext is starting on http://" + address + "/ (admin: /admin/, create a login with"
        " `.venv/bin/python manage.py createsuperuser`).\n"
        f"API documentation: http://{address}/api/docs/ (the OpenAPI schema: http://{address}/api/schema/)\n"
        f"Demo API key: {DEMO_KEY}\nTry:\n"
        f"  curl -s http://{address}/v1/context/prepare -H 'Authorization: Bearer {DEMO_KEY}' "
        "-H 'Content-Type: application/json' "
        """-d '{"scope_id": "project:demo", "query": "How do we release the API?", "assembly": {}}'\n"""
        "The README's examples read the address and key from your shell:\n"
        f"  export PC=http://{address} KEY={DEMO_KEY}\n"
        "The Python client is not part of the server; install it into this venv with\n"
        f"  {_shown(PYTHON)} -m pip install -e ./client\n",
        flush=True,
    )
    os.execv(PYTHON, [str(PYTHON), "manage.py", "runserver", address])


def use_venv(directory: str) -> None:
    """Point this module (and, through POWERCONTEXT_VENV, every ``dev.py`` a test starts) at the venv ``directory``
    (relative to this file)."""
    global VENV, BIN, PYTHON, STAMP, DEV_STAMP
    os.environ["POWERCONTEXT_VENV"] = directory
    VENV = ROOT / directory
    BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
    PYTHON = BIN / "python"
    STAMP = VENV / ".requirements.sha256"
    DEV_STAMP = VENV / ".requirements-dev.sha256"


def pytest_arguments(extra: list[str]) -> list[str]:
    """pytest's arguments for ``extra``: one xdist worker per core, tests of one ``xdist_group`` on one worker,
    unless ``extra`` chooses the workers itself."""
    chosen = any(
        a in ("-n", "--numprocesses", "no:xdist", "-pno:xdist") or a.startswith(("-n", "--numprocesses="))
        for a in extra
    )
    return list(extra) if chosen else ["-n", "auto", "--dist", "loadgroup", *extra]


def test(extra: list[str]) -> None:
    if "POWERCONTEXT_VENV" not in os.environ:
        use_venv(TEST_VENV)
    ensure_environment(dev=True)
    engine = "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    print(f"running the test suite on {engine} with {versions()}", flush=True)
    started = time.monotonic()
    completed = subprocess.run([str(PYTHON), "-m", "pytest", *pytest_arguments(extra)], cwd=ROOT)
    print(f"the test suite on {engine} took {time.monotonic() - started:.0f} s", flush=True)
    sys.exit(completed.returncode)


if __name__ == "__main__":
    command, *rest = sys.argv[1:] or ["help"]
    if command == "serve":
        serve(rest)
    elif command == "test":
        test(rest)
    else:
        sys.exit(__doc__)
