"""Part 3, HTTP throughput under gunicorn and wrk (``bench/http_load.py``) and per layer (``bench/http_profile.py``)."""

from __future__ import annotations

import argparse
import statistics
import tempfile

from bench import common
from bench.common import ENGINE_LABELS, Table, fmt_pct, fmt_ratio, log
from bench.report import Report, ints, met

HTTP_SIZES = (1_000, 100_000)
HTTP_SIZES_SMOKE = (1_000,)
HTTP_SEARCH_INDEX_MIN_N = 100_000
FULL_HTTP_SERVERS = ("sync:2", "sync:3", "gthread:2x4", "gthread:3x4")
SMOKE_HTTP_SERVERS = ("sync:3",)
"""gunicorn's worker class, workers and threads per worker of part 3 (``--http-servers``)."""


def part_http(report: Report, engines: list[str], smoke: bool, options: argparse.Namespace | None = None) -> None:
    from bench import http_load as http

    if not http.wrk_available():
        message = "wrk is not installed (`apt-get install -y wrk`): the HTTP part did not run"
        log(message)
        report.add("3. HTTP throughput", message, [], [])
        return
    options = options or argparse.Namespace(http_sizes=None, http_servers=None, http_seconds=None, http_rounds=None)
    sizes = ints(options.http_sizes) or (HTTP_SIZES_SMOKE if smoke else HTTP_SIZES)
    seconds = options.http_seconds or (1 if smoke else 5)
    rounds_count = options.http_rounds or (2 if smoke else 4)
    servers = [_server(spec) for spec in (options.http_servers or (SMOKE_HTTP_SERVERS if smoke else FULL_HTTP_SERVERS))]
    rows, goals, checks = [], [], []
    for index, (engine, n) in enumerate((engine, n) for engine in engines for n in sizes):
        with (
            common.throwaway_database(engine, "http") as url,
            tempfile.TemporaryDirectory(prefix="powercontext_bench_http_index_") as index_dir,
        ):
            log(f"http: loading N={n} on {ENGINE_LABELS[engine]}")
            setup = common.run_worker("http_setup", url, {"n": n})
            variants = [("SQL", None)]
            if n >= HTTP_SEARCH_INDEX_MIN_N:
                built = http.search_index_build(url, index_dir)
                log(f"http: search index built in {built:.1f}s")
                variants.append(("search index", index_dir))
            for (recall, index_dir), (worker_class, workers, threads) in ((v, s) for v in variants for s in servers):
                result = http.measure(
                    url,
                    setup,
                    workers=workers,
                    seconds=seconds,
                    reverse_first=index % 2 == 1,
                    rounds_count=rounds_count,
                    search_index_dir=index_dir,
                    worker_class=worker_class,
                    threads=threads,
                )
                server = f"{workers} {worker_class}" + (f" × {threads} threads" if worker_class == "gthread" else "")
                label = f"{ENGINE_LABELS[engine]}, N={n:,}, {recall}, {server}"
                shares = {name: statistics.median(values) for name, values in result["shares"].items()}
                for name in http.ENDPOINTS:
                    stats = result["endpoints"][name]
                    low, high = min(result["shares"][name]), max(result["shares"][name])
                    rows.append(
                        [
                            ENGINE_LABELS[engine],
                            f"{n:,}",
                            recall,
                            server,
                            name,
                            f"{stats['rps']:,.0f}",
                            f"{fmt_pct(shares[name])} ({fmt_pct(low)}-{fmt_pct(high)})",
                            f"{stats['p50_us'] / 1000:.2f}",
                            f"{stats['p95_us'] / 1000:.2f}",
                            str(stats["requests"]),
                            str(stats["errors"] + stats["non2xx"]),
                        ]
                    )
                goals += _http_goals(http, label, shares, result)
                checks.append(result["prepare_log"])
    table = Table(
        f"HTTP under gunicorn, wrk {http.WRK_THREADS} threads / {http.CONNECTIONS} connections, "
        f"{rounds_count} rounds of {seconds}s per endpoint (medians)",
        [
            "engine",
            "N",
            "recall",
            "gunicorn workers",
            "endpoint",
            "req/s",
            "% of /healthz (range)",
            "p50 ms",
            "p95 ms",
            "requests",
            "errors",
        ],
        rows,
        [
            "current scope of N entries + N/10 experiences, three referenced scopes of N/10 entries each",
            "load generator, servers and database share the same 2 cores",
            "% of /healthz: the endpoint's requests per second over /healthz's in the same round, median (and range)",
            f"recall 'search index': from N={HTTP_SEARCH_INDEX_MIN_N:,} the same database again with "
            "`manage.py recall_index_build` run first and POWERCONTEXT_SEARCH_INDEX_DIR set for gunicorn",
        ],
    )
    intro = f"""
Two gunicorns side by side on a bulk-loaded database, `gunicorn powercontext.wsgi` and the same command serving
`bench.bare_wsgi` (a bare WSGI callable answering a small JSON body: the server's floor), both with the workers
named in the table, driven by wrk ({http.WRK_THREADS} threads, {http.CONNECTIONS} connections = concurrency 8) after
a 2-second warm-up of each endpoint. The endpoints: the bare callable; `GET /healthz` (Django and the middleware,
no database: the framework's floor); `POST /v1/context/prepare` (default assembly, 8000 bytes, rotating over 300
generated queries, prepare log on); the exact reads `GET /v1/artifacts/revision` of one experience revision and of
one memory entry version, and `GET /v1/artifacts/history` of one experience; two writes (`POST /v1/memory/entries`
of a new entry each time, `POST /v1/experiences/revisions` appending to a per-connection artifact) into a scope of
their own. {rounds_count} rounds of {seconds}s per endpoint whose order alternates (ABBA). Each endpoint is stated
as a share of `/healthz`'s requests per second in the same round (median over the rounds, and the range); req/s,
p50 and p95 are medians over the rounds (wrk's latency histogram), requests and errors their sums. After each
server stops, the prepare log holds a row for every prepare answered (the background writer flushes at a clean
exit): checked below.
"""
    checked = "\n".join(f"- prepare log after the stop: {check}" for check in checks)
    report.add("3. HTTP throughput", intro + "\n" + checked, [table, *_http_profiles(engines, sizes[0], smoke)], goals)


def _http_profiles(engines: list[str], n: int, smoke: bool) -> list[Table]:
    """Per engine, where one request's time goes, layer by layer (bench/http_profile.py), in process."""
    from bench import http_profile

    tables = []
    for engine in engines:
        log(f"http: profiling each layer on {ENGINE_LABELS[engine]}")
        figures = http_profile.profile_engine(engine, n, 100 if smoke else 2000)
        rows = [
            [name, f"{layers['wsgi']:.3f}", *[f"{layers[layer]:.3f}" for layer in http_profile.LAYERS]]
            for name, layers in figures.items()
        ]
        tables.append(
            Table(
                f"One request, layer by layer, in process ({ENGINE_LABELS[engine]}, N={n:,}; ms per request)",
                ["endpoint", "whole WSGI call", *http_profile.LAYERS],
                rows,
                [
                    "bench/http_profile.py: Django's WSGI application called as gunicorn calls it, no socket; mean "
                    "of the fastest of five blocks",
                    "middleware: the handler and middleware outside DRF; drf: DRF's dispatch outside the view "
                    "(request, negotiation, authentication's code, permissions); auth SQL: the key's statement; "
                    "SQL: the endpoint's statements; view: the view outside SQL; render: JSON encoding; "
                    "close: the response's closers",
                ],
            )
        )
    return tables


def _server(spec: str) -> tuple[str, int, int]:
    """``sync:3`` or ``gthread:2x4`` as (worker class, workers, threads)."""
    worker_class, _, count = spec.partition(":")
    workers, _, threads = count.partition("x")
    return worker_class, int(workers), int(threads or 1)


def _http_goals(http, label: str, shares: dict[str, float], result: dict) -> list[str]:
    prepare = shares[http.PREPARE]
    healthz_floor = 1 / shares[http.BARE] if shares[http.BARE] else 0.0
    reads = {name: shares[name] / prepare for name in http.READS}
    slowest = min(reads, key=reads.get)
    tail = result["endpoints"][http.PREPARE]["p95_us"] / max(1, result["endpoints"][http.PREPARE]["p50_us"])
    return [
        f"{label}: prepare {fmt_pct(prepare)} % of /healthz's requests/s (≥ 50 %: {met(prepare >= 0.5)})",
        f"{label}: every exact read at least as fast as a prepare, the slowest ({slowest}) "
        f"{fmt_pct(reads[slowest])} % of the prepare's requests/s (≥ 100 %: {met(reads[slowest] >= 1)})",
        f"{label}: /healthz {fmt_pct(healthz_floor)} % of the bare WSGI callable's requests/s "
        f"(≥ 50 %: {met(healthz_floor >= 0.5)})",
        f"{label}: prepare p95/p50 {fmt_ratio(tail)} (≤ 3×: {met(tail <= 3)})",
    ]
