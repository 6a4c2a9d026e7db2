"""Part 3: HTTP throughput and latency under gunicorn, loaded by wrk at concurrency 8.

Per engine: bulk-load the synthetic dataset (``bench.datagen``; 100k entries in the current scope, 1k in
smoke mode), create an API key that may read the four scopes, start ``gunicorn powercontext.wsgi`` on a
free loopback port, then run wrk (2 threads, 8 connections, fixed duration) against
``POST /v1/context/prepare`` (default assembly, 8000 bytes, queries rotating over the generated query set)
and against ``GET /v1/artifacts/revision`` of one small experience revision (the trivial authenticated
endpoint), in rounds whose order alternates (ABBA). Traffic goes to 127.0.0.1 only; every run stops by itself.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench import datagen
from bench.common import PYTHON, ROOT, django_env, log

API_KEY = "pc_bench_" + "0123456789abcdef" * 3
WRK_THREADS = 2
CONNECTIONS = 8
TRIVIAL_PATH = "/v1/artifacts/revision?scope_id=bench%3Acurrent&family=experience&artifact_id=x000000&revision=1"


def setup_worker(config: dict) -> dict:
    """Inside a Django worker: load the dataset and create the key."""
    from artifacts import services
    from artifacts.models import Scope

    data = datagen.dataset(config["n"])
    load = datagen.bulk_load(data, "bench")
    scopes = list(Scope.objects.filter(scope_id__startswith="bench:"))
    services.api_key_create(name="bench", read_scopes=scopes, key=API_KEY)
    return {"counts": load["counts"], "queries": datagen.queries(data.vocab, config.get("queries", 300))}


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


def _prepare_script(queries: list[str]) -> str:
    bodies = [json.dumps({"scope_id": "bench:current", "query": q, "assembly": {}, "max_bytes": 8000}) for q in queries]
    return (
        "local bodies = {" + ",\n".join(_lua_string(b) for b in bodies) + "}\n"
        "local counter = 0\n"
        "wrk.method = 'POST'\n"
        f"wrk.headers['Authorization'] = 'Bearer {API_KEY}'\n"
        "wrk.headers['Content-Type'] = 'application/json'\n"
        "request = function()\n"
        "  counter = counter + 1\n"
        "  return wrk.format(nil, '/v1/context/prepare', nil, bodies[(counter % #bodies) + 1])\n"
        "end\n" + _LUA_DONE
    )


def _trivial_script() -> str:
    return (
        "wrk.method = 'GET'\n"
        f"wrk.headers['Authorization'] = 'Bearer {API_KEY}'\n"
        f"wrk.path = '{TRIVIAL_PATH}'\n" + _LUA_DONE
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(base: str, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("gunicorn exited during start-up")
        try:
            urllib.request.urlopen(base + "/v1/context/prepare", timeout=2)
        except urllib.error.HTTPError:
            return  # any HTTP answer (401/405) means the server is up
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("gunicorn did not start in time")


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
    prepare_first: bool,
    rounds_count: int,
    search_index_dir: str | None = None,
) -> dict:
    """Start gunicorn on the loaded database (with the search index when given), run ``rounds_count`` rounds of
    both wrk loads, stop it. Returns each endpoint's medians over the rounds and each round's prepare share."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = django_env(database_url)
    if search_index_dir is not None:
        env["POWERCONTEXT_SEARCH_INDEX_DIR"] = search_index_dir
    log_file = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    server = subprocess.Popen(
        [str(Path(PYTHON).parent / "gunicorn"), "powercontext.wsgi", "-w", str(workers), "-b", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log_file,
        stderr=log_file,
    )
    try:
        _wait_ready(base, server)
        body = json.dumps({"scope_id": "bench:current", "query": setup["queries"][0], "assembly": {}}).encode()
        assert _check(base, "POST", "/v1/context/prepare", body) == 200
        trivial_path = (
            "/v1/artifacts/revision?scope_id=bench%3Acurrent&family=experience&artifact_id=x000000&revision=1"
        )
        assert _check(base, "GET", trivial_path) == 200
        loads = [("prepare", _prepare_script(setup["queries"])), ("trivial", _trivial_script())]
        if not prepare_first:
            loads.reverse()
        for _, script in loads:
            _wrk(script, base, 2)  # warm every worker on both endpoints
        # Rounds in ABBA order, each pair's share taken side by side: a drift of the machine during the run
        # (another process, CPU frequency) then moves both endpoints of a pair, not one of them.
        rounds: list[dict] = []
        for round_number in range(rounds_count):
            ordered = loads if round_number % 2 == 0 else loads[::-1]
            rounds.append({name: _wrk(script, base, seconds) for name, script in ordered})
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log_file.close()
    log(f"http workers={workers}: {json.dumps(rounds)}")
    return {
        "prepare": _median_of_rounds([r["prepare"] for r in rounds]),
        "trivial": _median_of_rounds([r["trivial"] for r in rounds]),
        "shares": [r["prepare"]["rps"] / r["trivial"]["rps"] for r in rounds],
    }


def _median_of_rounds(rounds: list[dict]) -> dict:
    """Each figure's median over the rounds; counts (requests, errors) summed."""
    summed = ("requests", "errors", "non2xx")
    return {
        key: sum(r[key] for r in rounds) if key in summed else statistics.median(r[key] for r in rounds)
        for key in rounds[0]
    }
