"""Shared plumbing of the benchmark harness: engines, throwaway databases, workers, tables, statistics.

Every part runs its measurements in a worker subprocess per engine (``bench/worker.py PART``) with
``DATABASE_URL`` pointing at a database created for that run alone: a temporary SQLite file, or a
PostgreSQL database named ``powercontext_bench_*`` that is dropped afterwards. The worker migrates it
with Django's own migrations before it writes anything.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# Default of bench/run.py --locomo: the project folder beside the repository. The file is not part of the
# repository (CC BY-NC 4.0, evaluation only); without it the LoCoMo parts are skipped.
LOCOMO_PATH = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
PG_ADMIN_URL = os.environ.get("POWERCONTEXT_BENCH_PG", "postgres://postgres@127.0.0.1:5432/postgres")
ENGINES = ("sqlite", "postgresql")
ENGINE_LABELS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def django_env(database_url: str | None = None) -> dict[str, str]:
    """The environment for a Django process of the benchmarks: a throwaway SECRET_KEY unless one is set
    (with DEBUG off the server refuses to start without a real one), lexical recall unless one is set (the parts
    measure BM25 recall, the one their figures have always been of; a hybrid row sets it), inline vectors unless
    set (a hybrid row writes, then asks at once: what recall finds once every text is embedded; bench/http_writes.py
    sets each mode itself), and the given database."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="powercontext.settings")
    env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    env.setdefault("POWERCONTEXT_RECALL_MODE", "lexical")
    env.setdefault("POWERCONTEXT_EMBEDDINGS_WRITE", "inline")
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return env


def log(message: str) -> None:
    """Progress on stderr (tables go to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def process_memory() -> dict[str, float]:
    """This process's resident memory in MB: VmRSS, its anonymous and file-backed parts, and PSS (each shared page
    counted once across the processes that map it, e.g. a memory-mapped index shared by several workers)."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    rollup = Path("/proc/self/smaps_rollup").read_text().splitlines()
    pss = next(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))

    def megabytes(kilobytes: str) -> float:
        return int(kilobytes.split()[0]) / 1024

    return {
        "rss": megabytes(status["VmRSS"]),
        "anon": megabytes(status["RssAnon"]),
        "file": megabytes(status["RssFile"]),
        "pss": pss / 1024,
    }


def processes_json(command: Sequence[str], env: dict[str, str], *, count: int, timeout: float) -> list[dict]:
    """``count`` copies of ``command`` started together (from the repository's root, with ``env``); the JSON each
    prints on stdout, in start order."""
    processes = [subprocess.Popen(list(command), cwd=ROOT, env=env, stdout=subprocess.PIPE) for _ in range(count)]
    return [json.loads(process.communicate(timeout=timeout)[0]) for process in processes]


# --- throwaway databases ------------------------------------------------------------------------


def _pg_base() -> str:
    return PG_ADMIN_URL.rsplit("/", 1)[0]


def _pg_admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as connection:
        connection.execute(statement)


@contextmanager
def throwaway_database(engine: str, label: str) -> Iterator[str]:
    """Yield the DATABASE_URL of a new, empty database; drop it afterwards."""
    tag = f"{label}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    if engine == "sqlite":
        directory = Path(tempfile.mkdtemp(prefix=f"powercontext_bench_{label}_"))
        try:
            yield f"sqlite:///{directory / 'bench.sqlite3'}"
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    elif engine == "postgresql":
        name = f"powercontext_bench_{tag}"
        _pg_admin(f'CREATE DATABASE "{name}"')
        try:
            yield f"{_pg_base()}/{name}"
        finally:
            _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        raise ValueError(engine)


def postgres_available() -> bool:
    try:
        _pg_admin("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        log(f"PostgreSQL not reachable ({exc.__class__.__name__}: {exc}); PostgreSQL columns are skipped")
        return False
    return True


def free_port() -> int:
    """A loopback port free now (a server started on it next may still lose a race: the benchmarks run alone)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_answering(url: str, process: subprocess.Popen, name: str, timeout: float = 60) -> None:
    """Until ``url`` answers anything over HTTP (the server ``process`` started is up), or raise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited during start-up")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # any HTTP answer means the server is up
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{name} did not start in time")


def stop_process(process: subprocess.Popen) -> None:
    """Terminate a server the benchmark started, killing it when it does not exit within 30 s."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_worker(part: str, database_url: str, config: dict, *, timeout: float | None = None) -> dict:
    """Run ``bench/worker.py part`` against one database and return its JSON result."""
    with tempfile.TemporaryDirectory(prefix="powercontext_bench_io_") as io_dir:
        config_path = Path(io_dir) / "config.json"
        result_path = Path(io_dir) / "result.json"
        config_path.write_text(json.dumps(config), encoding="utf-8")
        env = django_env(database_url)
        env["PYTHONUNBUFFERED"] = "1"
        completed = subprocess.run(
            [PYTHON, str(ROOT / "bench" / "worker.py"), part, str(config_path), str(result_path)],
            cwd=ROOT,
            env=env,
            timeout=timeout,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"worker {part} failed with exit code {completed.returncode}")
        return json.loads(result_path.read_text(encoding="utf-8"))


def worker_on_engines(engines: str, part: str, config: dict, *, describe: str) -> Iterator[tuple[str, dict]]:
    """``(engine, result)`` of ``bench/worker.py part`` on each engine of the comma-separated ``engines`` in turn,
    each in a throwaway database (PostgreSQL skipped with a line when it is not reachable): what a standalone
    benchmark script runs."""
    for engine in engines.split(","):
        if engine == "postgresql" and not postgres_available():
            continue
        log(f"{ENGINE_LABELS[engine]}: {describe}")
        with throwaway_database(engine, part) as url:
            yield engine, run_worker(part, url, config)


# --- requests inside a worker ---------------------------------------------------------------------


def wsgi_prepare(key: str) -> Callable[[dict], tuple[float, float]]:
    """POST /v1/context/prepare bodies through Django's WSGI handler in this process (no server, no socket), as the
    API key ``key``. Each call returns (seconds until the answer is complete, seconds until the response is closed
    too: what a WSGI server does once the client has the body, when the prepare log's row is queued or written), and
    fails unless the answer is a 200. Inside a worker only: Django must be set up."""
    return wsgi_post(key, "/v1/context/prepare", "200 OK")


def wsgi_post(key: str, path: str, expected: str) -> Callable[[dict], tuple[float, float]]:
    """POST JSON bodies to ``path`` through Django's WSGI handler in this process, as the API key ``key``; each call
    returns (seconds until the answer is complete, seconds until the response is closed too) and fails unless the
    status is ``expected`` (e.g. "201 Created"). Inside a worker only: Django must be set up."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import RequestFactory

    handler = WSGIHandler()
    factory = RequestFactory(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")

    def post(body: dict) -> tuple[float, float]:
        environ = factory.post(path, data=json.dumps(body), content_type="application/json").environ
        statuses: list[str] = []
        begin = time.perf_counter()
        response = handler(environ, lambda status, headers: statuses.append(status))
        answered = time.perf_counter()
        response.close()
        closed = time.perf_counter()
        assert statuses == [expected], (statuses, b"".join(response))
        return answered - begin, closed - begin

    return post


# --- machine --------------------------------------------------------------------------------------


def machine_description() -> str:
    """CPU model, logical cores, memory, OS, Python and database versions, in one line."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = os.cpu_count()
    with suppress(OSError, subprocess.CalledProcessError, ValueError):
        cores = int(subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip())
    memory = "unknown memory"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
                break
    except OSError:
        pass
    import sqlite3

    parts = [
        model,
        f"{cores} cores (nproc)",
        memory,
        f"{platform.system()} {platform.release()}",
        f"Python {platform.python_version()}",
        f"SQLite {sqlite3.sqlite_version}",
    ]
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL) as connection:
            version = connection.execute("SHOW server_version").fetchone()[0]
        parts.append(f"PostgreSQL {version.split()[0]}")
    except Exception:  # noqa: BLE001
        pass
    return ", ".join(parts)


# --- statistics and tables ------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


@dataclass
class Table:
    """A titled table that prints as aligned text and renders as Markdown."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str]

    def text(self) -> str:
        widths = [max(len(str(cell)) for cell in column) for column in zip(self.headers, *self.rows, strict=False)]
        lines = [self.title, "-" * len(self.title)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(self.headers, widths, strict=True)))
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in self.rows]
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(self.headers) + " |")
        lines.append("|" + "|".join("---" for _ in self.headers) + "|")
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in self.rows]
        if self.notes:
            lines.append("")
            lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines)


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def fmt_pct(value: float) -> str:
    return f"{value * 100:.1f}"


def fmt_ratio(value: float) -> str:
    return f"{value:.2f}×"
