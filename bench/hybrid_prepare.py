"""Hybrid recall's cost in a prepare: POST /v1/context/prepare with lexical and with hybrid recall, side by side.

    python bench/hybrid_prepare.py [--sizes 1000,10000] [--queries 200] [--engines sqlite,postgresql]

Per engine and size, in a throwaway database: bulk-load the synthetic dataset of that size (``bench.datagen``: a
current scope of N memory entries and N/10 experiences, three referenced scopes of N/10 entries), embed every
document with the packaged model (``manage.py recall_embed``, its rate printed), then send each query through
Django's WSGI handler (prepare log off) with lexical and with hybrid recall, alternating which goes first. Each
query is embedded once before it is timed (the query cache keeps it), so the hybrid figure excludes the query's
embedding, which is printed apart (the packaged model, per query). Printed, not asserted.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.common import ENGINE_LABELS, log, percentile, postgres_available, run_worker, throwaway_database

ASSEMBLY = {"sections": [{"family": "memory", "limit": 6}, {"family": "experience", "limit": 2}]}


def worker(config: dict) -> dict:
    """Runs inside ``bench/worker.py hybrid_prepare`` against a migrated throwaway database."""
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.management import call_command
    from django.test import RequestFactory

    from artifacts import services
    from artifacts.models import Scope
    from artifacts.recall.vectors import query as dense
    from bench import datagen

    settings.POWERCONTEXT_PREPARE_LOG = False
    vocab = datagen.vocabulary()
    datagen.bulk_load(datagen.dataset(config["n"], vocab=vocab), "bench")
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    begin = time.perf_counter()
    call_command("recall_embed", "--batch-size", "64", stderr=io.StringIO())
    embed_seconds = time.perf_counter() - begin
    from artifacts.models import RecallVector

    vectors = RecallVector.objects.count()
    scopes = list(Scope.objects.filter(scope_id__startswith="bench:"))
    _, key = services.api_key_create(name="bench", read_scopes=scopes, write_scopes=[])
    texts = datagen.queries(vocab, config["queries"])
    handler = WSGIHandler()
    factory = RequestFactory(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")

    def prepare(query: str, mode: str) -> float:
        settings.POWERCONTEXT_RECALL_MODE = mode
        body = {"scope_id": "bench:current", "query": query, "max_bytes": 8000, "assembly": ASSEMBLY}
        environ = factory.post("/v1/context/prepare", data=json.dumps(body), content_type="application/json").environ
        statuses = []
        begin = time.perf_counter()
        response = handler(environ, lambda status, headers: statuses.append(status))
        response.close()
        elapsed = time.perf_counter() - begin
        assert statuses == ["200 OK"], (statuses, b"".join(response))
        return elapsed

    embedding = []
    for query in texts:  # each query embedded once, untimed by the prepares: its cost is reported apart
        begin = time.perf_counter()
        dense.query_vector(query)
        embedding.append(time.perf_counter() - begin)
    for query in texts[:10]:  # warm caches, connections and the pairs' copies
        prepare(query, "lexical")
        prepare(query, "hybrid")
    timings: dict[str, list[float]] = {"lexical": [], "hybrid": []}
    for i, query in enumerate(texts):
        for mode in ("lexical", "hybrid") if i % 2 else ("hybrid", "lexical"):
            timings[mode].append(prepare(query, mode))
    from powercontext import metrics

    resident = {
        event: metrics.RECALL_DENSE_RESIDENT.labels(event=event)._value.get() for event in ("hit", "miss", "eviction")
    }
    log(f"dense copies: {resident}")
    return {
        "resident": resident,
        "timings": {k: {"p50": percentile(v, 50), "p95": percentile(v, 95)} for k, v in timings.items()},
        "query_embedding_p50": percentile(embedding[1:], 50),
        "embed_seconds": embed_seconds,
        "vectors": vectors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--engines", default="sqlite,postgresql")
    args = parser.parse_args()
    os.environ.setdefault("SECRET_KEY", "powercontext-bench-only-" + "k" * 40)
    print("| engine | N | lexical p50 ms | hybrid p50 ms | hybrid − lexical | query embedding p50 ms | recall_embed |")
    print("|---|---|---|---|---|---|---|")
    for engine in args.engines.split(","):
        if engine == "postgresql" and not postgres_available():
            continue
        for n in (int(size) for size in args.sizes.split(",")):
            log(f"{ENGINE_LABELS[engine]}: N={n}, {args.queries} queries, lexical and hybrid")
            with throwaway_database(engine, "hybrid") as url:
                result = run_worker("hybrid_prepare", url, {"n": n, "queries": args.queries})
            t = result["timings"]
            lexical, hybrid = t["lexical"]["p50"] * 1000, t["hybrid"]["p50"] * 1000
            rate = result["vectors"] / result["embed_seconds"] if result["embed_seconds"] else 0.0
            print(
                f"| {ENGINE_LABELS[engine]} | {n:,} | {lexical:.2f} | {hybrid:.2f} | {hybrid - lexical:+.2f} ms | "
                f"{result['query_embedding_p50'] * 1000:.2f} | {result['vectors']:,} vectors, {rate:.0f}/s |"
            )


if __name__ == "__main__":
    main()
