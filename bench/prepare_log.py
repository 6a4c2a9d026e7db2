"""The prepare log's cost: POST /v1/context/prepare with the log on and off, side by side, on both engines.

    python bench/prepare_log.py [--n 20000] [--queries 300] [--engines sqlite,postgresql]

Per engine, in a throwaway database: bulk-load the synthetic dataset of size N (``bench.datagen``: a current
scope with N memory entries and N/10 experiences, three referenced scopes), then send each query twice
through Django's WSGI handler (middleware, authentication, validation, runtime, log), once with
``POWERCONTEXT_PREPARE_LOG`` on and once off, alternating which goes first. Two times per request: until the
answer is complete (what the client waits for) and until the response is closed as a WSGI server does after
sending it (the log row is written then: the worker's time). Prints p50/p95 and the p50 slowdowns, and the
bytes stored per logged prepare (the table and its indexes / rows).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.common import ENGINE_LABELS, percentile, worker_on_engines, wsgi_prepare

SCOPES = ("current", "ref1", "ref2", "ref3")


def _stored_bytes(connection) -> float:
    """Bytes of the prepare log's table and indexes per row."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM artifacts_preparelog")
        rows = cursor.fetchone()[0] or 1
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_total_relation_size('artifacts_preparelog')")
        else:
            cursor.execute("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE '%preparelog%'")
        return cursor.fetchone()[0] / rows


def worker(config: dict) -> dict:
    """Runs inside ``bench/worker.py prepare_log`` against a migrated throwaway database."""
    from django.db import connection

    from artifacts import services
    from artifacts.models import PrepareLog, Scope
    from bench import datagen
    from infrastructure.conf import setting_set

    vocab = datagen.vocabulary()
    datagen.bulk_load(datagen.dataset(config["n"], vocab=vocab), "bench")
    scopes = list(Scope.objects.filter(scope_id__in=[f"bench:{s}" for s in SCOPES]))
    _, key = services.api_key_create(name="bench", read_scopes=scopes, write_scopes=[])
    texts = datagen.queries(vocab, config["queries"])

    post = wsgi_prepare(key)

    def prepare(query: str, logged: bool) -> tuple[float, float]:
        """(until the answer is complete, until the WSGI server has closed the response too: the log row is written
        then)."""
        setting_set("POWERCONTEXT_PREPARE_LOG", logged)
        return post({"scope_id": "bench:current", "query": query, "max_bytes": 8000, "assembly": {}})

    for query in texts[:10]:  # warm caches and connections
        prepare(query, True), prepare(query, False)
    timings: dict[str, list[float]] = {"on": [], "off": [], "on_closed": [], "off_closed": []}
    for i, query in enumerate(texts):
        for logged in (True, False) if i % 2 else (False, True):
            answered, closed = prepare(query, logged)
            timings["on" if logged else "off"].append(answered)
            timings["on_closed" if logged else "off_closed"].append(closed)
    return {
        "timings": {k: {"p50": percentile(v, 50), "p95": percentile(v, 95), "n": len(v)} for k, v in timings.items()},
        "rows": PrepareLog.objects.count(),
        "bytes_per_row": _stored_bytes(connection),
        "record_chars": sum(len(r) for r in PrepareLog.objects.values_list("record", flat=True))
        / max(1, PrepareLog.objects.exclude(record="").count()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--engines", default="sqlite,postgresql")
    args = parser.parse_args()
    os.environ.setdefault("SECRET_KEY", "powercontext-bench-only-" + "k" * 40)
    print(
        "| engine | log | answer p50 ms | answer p95 ms | p50 slowdown | worker p50 ms (closed) | worker slowdown"
        " | bytes per logged prepare | record chars |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    config = {"n": args.n, "queries": args.queries}
    describe = f"N={args.n}, {args.queries} queries, log on and off"
    for engine, result in worker_on_engines(args.engines, "prepare_log", config, describe=describe):
        t = result["timings"]
        slowdown = t["on"]["p50"] / t["off"]["p50"] - 1
        worker_slowdown = t["on_closed"]["p50"] / t["off_closed"]["p50"] - 1
        label = ENGINE_LABELS[engine]
        print(
            f"| {label} | off | {t['off']['p50'] * 1000:.2f} | {t['off']['p95'] * 1000:.2f} | | "
            f"{t['off_closed']['p50'] * 1000:.2f} | | | |"
        )
        print(
            f"| {label} | on | {t['on']['p50'] * 1000:.2f} | {t['on']['p95'] * 1000:.2f} | {slowdown:+.1%} | "
            f"{t['on_closed']['p50'] * 1000:.2f} | {worker_slowdown:+.1%} | {result['bytes_per_row']:.0f} | "
            f"{result['record_chars']:.0f} |"
        )


if __name__ == "__main__":
    main()
