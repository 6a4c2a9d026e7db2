"""Part 3: HTTP throughput and latency under gunicorn, loaded by wrk at concurrency 8, anchored to the floor.

Per engine: bulk-load the synthetic dataset (``bench.datagen``; 100k entries in the current scope, 1k in
smoke mode), create an API key that may read and write the four scopes, start ``gunicorn powercontext.wsgi``
on a free loopback port, and beside it the same gunicorn serving a bare WSGI callable (``bench.bare_wsgi``: the
server's floor, no Django). Then wrk (2 threads, 8 connections, fixed duration) runs against every endpoint of
``ENDPOINTS`` in rounds whose order alternates (ABBA): the bare callable, ``GET /healthz`` (Django and the
middleware, no database), ``POST /v1/context/prepare`` (default assembly, 8000 bytes, queries rotating over the
generated query set), the exact reads and history page of ``READS``, and two writes. Every endpoint is stated as
a share of ``/healthz``'s requests per second in the same round. Traffic goes to 127.0.0.1 only; every run
stops by itself.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import ExitStack, contextmanager
from pathlib import Path

from bench import datagen
from bench.common import PYTHON, ROOT, django_env, free_port, log, stop_process, wait_answering

API_KEY = "pc_bench_" + "0123456789abcdef" * 3
WRK_THREADS = 2
CONNECTIONS = 8
_CURRENT = "scope_id=bench%3Acurrent"
READS = {
    # name: (path, query string); every one answers 200 on part 3's dataset
    "GET revision (experience)": (
        "/v1/artifacts/revision",
        f"{_CURRENT}&family=experience&artifact_id=x000000&revision=1",
    ),
    "GET entry version": (
        "/v1/artifacts/revision",
        f"{_CURRENT}&family=memory&artifact_id=memory&revision=1&entry_id=e0000000&entry_version=e0000000-v1",
    ),
    "GET history page": ("/v1/artifacts/history", f"{_CURRENT}&family=experience&artifact_id=x000001"),
}
TRIVIAL_PATH = "{}?{}".format(*READS["GET revision (experience)"])
BARE = "bare WSGI callable"
HEALTHZ = "GET /healthz"
PREPARE = "POST prepare"
WRITES = {
    # name: (path, Lua expression of the JSON body; ``n`` counts the wrk thread's requests, ``t`` tags the thread)
    "POST memory entry": (
        "/v1/memory/entries",
        """'{"scope_id": "bench:writes", "entry_id": "w' .. t .. '-' .. n .. '", "body": "a written entry"}'""",
    ),
    "POST experience revision": (
        "/v1/experiences/revisions",
        # Sixteen artifacts per thread: appending to one would measure waits for its head, not a write.
        """'{"scope_id": "bench:writes", "artifact_id": "w' .. t .. '-' .. (n % 16) .. '", "body": "'"""
        """ .. 'lesson ' .. n .. '"}'""",
    ),
}
ENDPOINTS = (BARE, HEALTHZ, PREPARE, *READS, *WRITES)
"""Every endpoint of part 3, in the order of its table."""


def count_worker(config: dict) -> dict:
    """Inside a Django worker: the prepare log's rows."""
    from artifacts.models import PrepareLog

    return {"rows": PrepareLog.objects.count()}


def setup_worker(config: dict) -> dict:
    """Inside a Django worker: load the dataset, an empty scope for the writes, and the key."""
    from django.db import connection

    from artifacts import services
    from artifacts.models import Scope

    data = datagen.dataset(config["n"])
    load = datagen.bulk_load(data, "bench")
    scopes = list(Scope.objects.filter(scope_id__startswith="bench:"))
    writes = Scope.objects.create(scope_id="bench:writes")
    services.api_key_create(name="bench", read_scopes=[*scopes, writes], write_scopes=[writes], key=API_KEY)
    if connection.vendor == "postgresql":
        # The planner's statistics of the freshly loaded tables, as autovacuum would gather them soon: without
        # them the first plans (kept by prepared statements) are guesses.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return {"counts": load["counts"], "queries": datagen.queries(data.vocab, config.get("queries", 300))}


def prepare_body(query: str) -> str:
    return json.dumps({"scope_id": "bench:current", "query": query, "assembly": {}, "max_bytes": 8000})


def profiled_requests(setup: dict) -> dict[str, tuple[str, str, str, bytes]]:
    """The read-only endpoints as (method, path, query string, body), for ``bench.http_profile``."""
    return {
        HEALTHZ: ("GET", "/healthz", "", b""),
        PREPARE: ("POST", "/v1/context/prepare", "", prepare_body(setup["queries"][0]).encode()),
        **{name: ("GET", path, query, b"") for name, (path, query) in READS.items()},
    }


_LUA_DONE = """
done = function(summary, latency, requests)
  io.write(string.format('BENCH_JSON {"requests": %d, "duration_us": %d, "errors": %d, "non2xx": %d, '
    .. '"p50_us": %d, "p95_us": %d, "p99_us": %d, "mean_us": %f}\\n',
    summary.requests, summary.duration,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.mean))
end
"""


def _lua_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


_AUTHORIZED = f"wrk.headers['Authorization'] = 'Bearer {API_KEY}'\n"


def _prepare_script(queries: list[str]) -> str:
    bodies = [prepare_body(q) for q in queries]
    return (
        "local bodies = {" + ",\n".join(_lua_string(b) for b in bodies) + "}\n"
        "local counter = 0\n"
        "wrk.method = 'POST'\n" + _AUTHORIZED + "wrk.headers['Content-Type'] = 'application/json'\n"
        "request = function()\n"
        "  counter = counter + 1\n"
        "  return wrk.format(nil, '/v1/context/prepare', nil, bodies[(counter % #bodies) + 1])\n"
        "end\n" + _LUA_DONE
    )


def _get_script(path: str, authorized: bool = True) -> str:
    return "wrk.method = 'GET'\n" + (_AUTHORIZED if authorized else "") + f"wrk.path = '{path}'\n" + _LUA_DONE


def _write_script(path: str, body: str) -> str:
    # ``t``: a tag per wrk thread and run (the start time and the thread's number), so that no two runs or threads
    # write the same entry id; ``n`` counts the thread's requests.
    return (
        "local threads = 0\n"
        "setup = function(thread)\n"
        "  threads = threads + 1\n"
        "  thread:set('t', string.format('%d-%d', os.time(), threads))\n"
        "end\n"
        "n = 0\n"
        "wrk.method = 'POST'\n" + _AUTHORIZED + "wrk.headers['Content-Type'] = 'application/json'\n"
        "request = function()\n"
        "  n = n + 1\n"
        f"  return wrk.format(nil, '{path}', nil, {body})\n"
        "end\n" + _LUA_DONE
    )


def scripts(setup: dict) -> dict[str, tuple[str, str]]:
    """Per endpoint: (which server, the wrk script)."""
    loads = {
        BARE: ("bare", _get_script("/", authorized=False)),
        HEALTHZ: ("django", _get_script("/healthz", authorized=False)),
        PREPARE: ("django", _prepare_script(setup["queries"])),
    }
    loads |= {name: ("django", _get_script(f"{path}?{query}")) for name, (path, query) in READS.items()}
    loads |= {name: ("django", _write_script(path, body)) for name, (path, body) in WRITES.items()}
    return loads


def _check(base: str, method: str, path: str, body: bytes | None = None) -> int:
    request = urllib.request.Request(
        base + path,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


def _wrk(script: str, base: str, seconds: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
        path = handle.name
    try:
        completed = subprocess.run(
            [
                "wrk",
                f"-t{WRK_THREADS}",
                f"-c{CONNECTIONS}",
                f"-d{seconds}s",
                "--timeout",
                "30s",
                "-s",
                path,
                base + "/",
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
        )
    finally:
        os.unlink(path)
    for line in completed.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            stats = json.loads(line[len("BENCH_JSON ") :])
            stats["rps"] = stats["requests"] / (stats["duration_us"] / 1e6)
            return stats
    raise RuntimeError(f"wrk printed no result: {completed.stdout}\n{completed.stderr}")


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def search_index_build(database_url: str, index_dir: str) -> float:
    """``manage.py recall_index_build`` into ``index_dir`` for every large scope; returns its seconds."""
    env = {**django_env(database_url), "POWERCONTEXT_SEARCH_INDEX_DIR": index_dir}
    started = time.perf_counter()
    subprocess.run(
        [PYTHON, "manage.py", "recall_index_build"], cwd=ROOT, env=env, check=True, capture_output=True, timeout=1800
    )
    return time.perf_counter() - started


def measure(
    database_url: str,
    setup: dict,
    *,
    workers: int,
    seconds: int,
    reverse_first: bool,
    rounds_count: int,
    search_index_dir: str | None = None,
    worker_class: str = "sync",
    threads: int = 1,
) -> dict:
    """Start gunicorn on the loaded database (with the search index when given) and the bare callable beside it,
    run ``rounds_count`` ABBA rounds over every endpoint, stop both. Returns each endpoint's medians over the
    rounds and, per round, its requests per second over ``/healthz``'s."""
    env = django_env(database_url)
    if search_index_dir is not None:
        env["POWERCONTEXT_SEARCH_INDEX_DIR"] = search_index_dir
    logged_before = prepare_log_rows(database_url)
    answered = 0  # prepares wrk saw answered; the server may answer a few more as wrk stops (in flight)
    with ExitStack() as stack:
        bases = {
            "django": stack.enter_context(_gunicorn("powercontext.wsgi", env, workers, worker_class, threads)),
            "bare": stack.enter_context(_gunicorn("bench.bare_wsgi", env, workers, worker_class, threads)),
        }
        django = bases["django"]
        assert _check(django, "POST", "/v1/context/prepare", prepare_body(setup["queries"][0]).encode()) == 200
        answered += 1
        for path, query in READS.values():
            assert _check(django, "GET", f"{path}?{query}") == 200, path
        loads = list(scripts(setup).items())
        if reverse_first:
            loads.reverse()
        for name, (server, script) in loads:
            warm = _wrk(script, bases[server], 2)  # warm every worker on every endpoint
            answered += warm["requests"] if name == PREPARE else 0
        # Rounds in ABBA order, each round's shares taken side by side: a drift of the machine during the run
        # (another process, CPU frequency) then moves every endpoint of a round, not one of them.
        rounds: list[dict] = []
        for round_number in range(rounds_count):
            ordered = loads if round_number % 2 == 0 else loads[::-1]
            rounds.append({name: _wrk(script, bases[server], seconds) for name, (server, script) in ordered})
            answered += rounds[-1][PREPARE]["requests"]
    # Both servers stopped cleanly (SIGTERM): every prepare they answered has its row, in flight ones included.
    logged = prepare_log_rows(database_url) - logged_before
    in_flight = CONNECTIONS * (len(rounds) + 1)
    lost = "none lost" if answered <= logged <= answered + in_flight else "ROWS MISSING"
    log(f"http workers={workers} {worker_class} threads={threads}: {json.dumps(rounds)}")
    return {
        "endpoints": {name: _median_of_rounds([r[name] for r in rounds]) for name in ENDPOINTS},
        "shares": {name: [r[name]["rps"] / r[HEALTHZ]["rps"] for r in rounds] for name in ENDPOINTS},
        "prepare_log": f"{logged:,} rows for {answered:,} prepares answered (+ up to {in_flight} in flight): {lost}",
    }


def prepare_log_rows(database_url: str) -> int:
    """How many prepare-log rows the database holds."""
    from bench import common

    return common.run_worker("http_count", database_url, {})["rows"]


@contextmanager
def _gunicorn(application: str, env: dict, workers: int, worker_class: str, threads: int):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [str(Path(PYTHON).parent / "gunicorn"), application, "-w", str(workers), "-b", f"127.0.0.1:{port}"]
    command += ["-k", worker_class] + (["--threads", str(threads)] if worker_class == "gthread" else [])
    log_file = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=log_file)
    try:
        wait_answering(base + "/healthz", server, "gunicorn")
        yield base
    finally:
        stop_process(server)
        log_file.close()


def _median_of_rounds(rounds: list[dict]) -> dict:
    """Each figure's median over the rounds; counts (requests, errors) summed."""
    summed = ("requests", "errors", "non2xx")
    return {
        key: sum(r[key] for r in rounds) if key in summed else statistics.median(r[key] for r in rounds)
        for key in rounds[0]
    }
