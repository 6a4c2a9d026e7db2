"""Hybrid prepare on large scopes (issue 52, item 3): POST /v1/context/prepare through the dense index and through
the exact scan, side by side, with lexical recall beside them, on both engines.

Per engine (a throwaway database each, one subprocess each) and size: one scope holding that many memory entries,
bulk-loaded as the search-engine part loads them (``bench.datagen``: synthetic words, 5–60 per entry), its search
index built (``recall_index_build``: the lexical side at large sizes), a vector per entry stored as a write stores
it (float16 ``RecallVector`` rows: the packaged model's embeddings of the LoCoMo turns, mixed as
``bench/dense_engine.py`` mixes them: embedding a million synthetic texts would take hours and tell nothing more
about the cost) and the dense index built through the real command (``recall_vector_index_build``). Each query (the
datagen queries: their words find the entries by BM25) is given a LoCoMo question's embedding as its query vector,
put in the query cache the prepare reads (so the dense side sees real question-to-turn cosines, and the query's
embedding is not in the times: it is measured apart, the packaged model per query, cache off). Then, per query,
alternately: the prepare with lexical recall, with hybrid recall through the dense index, and with hybrid recall
through the exact scan of the worker's resident copy (``POWERCONTEXT_DENSE_INDEX_MIN_VECTORS`` above the size; the
float32 copy below ``POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM``, the int8 two-pass copy from it), through
Django's WSGI handler, prepare log off, memory section of 6. Printed: p50 and p95 of each, the share of prepares
whose content the index left identical to the exact scan's, and the resident memory of 3 worker processes started
together answering the prepares through the index (VmRSS, its anonymous and file-backed parts and PSS), against the
same at 1,000 entries.

    python bench/hybrid_large.py [--sizes 10000,100000,1000000] [--engines sqlite,postgresql] [--queries 100]
        [--cache PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    ENGINE_LABELS,
    PYTHON,
    django_env,
    log,
    percentile,
    process_memory,
    processes_json,
    throwaway_database,
)

REFERENCE = 1_000
"""The small scope whose workers' memory the large ones' are compared with."""
WORKERS = 3
WORKER_QUERIES = 50
ASSEMBLY = {"sections": [{"family": "memory", "limit": 6}]}
MODES = ("lexical", "index", "exact")
INSERT_BATCH = 20_000


def _settings(index_dir: str) -> None:
    from django.conf import settings

    from infrastructure.conf import setting_set

    setting_set("POWERCONTEXT_PREPARE_LOG", False)
    setting_set("POWERCONTEXT_EMBEDDINGS", {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"})
    setting_set("POWERCONTEXT_SEARCH_INDEX_DIR", index_dir)
    setting_set("POWERCONTEXT_DENSE_INDEX_MIN_VECTORS", 5_000)
    setting_set("POWERCONTEXT_RESIDENT_VECTORS_MB", 4096)  # the exact scan's copy of 1M vectors kept


def _mode(mode: str, size: int) -> None:
    from infrastructure.conf import setting_set

    setting_set("POWERCONTEXT_RECALL_MODE", "lexical" if mode == "lexical" else "hybrid")
    setting_set("POWERCONTEXT_DENSE_INDEX_MIN_VECTORS", 5_000 if mode == "index" else size + 1)


def _scope_id(size: int) -> str:
    return f"large{size}:t0000000"


def _load(size: int, base, model_id: str) -> tuple[int, float]:
    """The scope of ``size`` entries, its vectors and both indexes; (scope pk, seconds of the dense build)."""
    from django.core.management import call_command
    from django.db import connection

    from artifacts.models import RecallDocument, RecallVector, Scope
    from artifacts.recall.vectors.ranking import ENCODING
    from bench import datagen
    from bench.dense_index import DIMENSION, mixed

    started = time.perf_counter()
    datagen.bulk_load(datagen.tenants(1, size, vocab=datagen.vocabulary()), f"large{size}")
    scope = Scope.objects.get(scope_id=_scope_id(size))
    documents = list(
        RecallDocument.objects.filter(scope=scope, family="memory").order_by("pk").values_list("pk", flat=True)
    )
    rows = mixed(base, len(documents))
    table, columns = RecallVector._meta.db_table, "document_id, scope_id, family, model_id, dimension, encoding, vector"
    values = (
        (document, scope.pk, "memory", model_id, DIMENSION, ENCODING, row.tobytes())
        for document, row in zip(documents, rows, strict=True)
    )
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for value in values:
                    copy.write_row(value)
        else:
            batch = []
            for value in values:
                batch.append(value)
                if len(batch) == INSERT_BATCH:
                    cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s)", batch)
                    batch = []
            if batch:
                cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s)", batch)
        # The planner's statistics of the vectors, as autovacuum's analyze gathers them after a load this size (the
        # bulk load analyzed the tables before the vectors were in).
        cursor.execute(f"ANALYZE {table}")
    log(f"{size:,} entries and vectors stored in {time.perf_counter() - started:.0f} s")
    call_command("recall_index_build", stdout=sys.stderr, stderr=sys.stderr)
    started = time.perf_counter()
    call_command(
        "recall_vector_index_build",
        "--scope",
        _scope_id(size),
        "--threads",
        str(os.cpu_count() or 1),
        stdout=sys.stderr,
        stderr=sys.stderr,
    )
    return scope.pk, time.perf_counter() - started


def _prepared(scope_pk: int, query_vectors, texts: list[str]):
    """A prepare function for the scope (as an API key reading it, each text's query vector in the cache): through
    Django's WSGI handler, it returns (seconds until the answer is complete, the prepared content)."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import RequestFactory

    from artifacts import services
    from artifacts.models import Scope
    from artifacts.recall.vectors import query
    from artifacts.recall.vectors.providers import configured_provider

    scope = Scope.objects.get(pk=scope_pk)
    api_key, key = services.api_key_create(name=f"bench {scope.scope_id} {os.getpid()}", read_scopes=[scope])
    model_id = configured_provider().model_id
    for text, vector in zip(texts, query_vectors, strict=False):
        query.QUERY_CACHE.put(api_key.pk, (model_id, text), vector, 4096)
    handler = WSGIHandler()
    factory = RequestFactory(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")

    def prepare(text: str) -> tuple[float, str]:
        body = {"scope_id": scope.scope_id, "query": text, "max_bytes": 8000, "assembly": ASSEMBLY}
        environ = factory.post("/v1/context/prepare", data=json.dumps(body), content_type="application/json").environ
        statuses: list[str] = []
        started = time.perf_counter()
        response = handler(environ, lambda status, headers: statuses.append(status))
        seconds = time.perf_counter() - started
        content = b"".join(response)
        response.close()
        assert statuses == ["200 OK"], (statuses, content)
        return seconds, json.loads(content)["content"]

    return prepare


def _run_size(size: int, base, query_vectors, texts: list[str], model_id: str) -> dict:
    from artifacts.recall.vectors import resident
    from artifacts.recall.vectors.ann import store

    scope_pk, build_seconds = _load(size, base, model_id)
    prepare = _prepared(scope_pk, query_vectors, texts)
    for text in texts[:3]:  # the copies read, the indexes mapped before timing
        for mode in MODES:
            _mode(mode, size)
            prepare(text)
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    identical = 0
    for number, text in enumerate(texts):
        contents = {}
        for mode in MODES[number % 3 :] + MODES[: number % 3]:  # each goes first in turn
            _mode(mode, size)
            seconds, contents[mode] = prepare(text)
            times[mode].append(seconds)
        identical += contents["index"] == contents["exact"]
    resident.MATRICES.clear()
    store.views_forget()
    log(f"{size:,} entries measured")
    return {
        "size": size,
        "build": build_seconds,
        "times": {mode: (percentile(v, 50), percentile(v, 95)) for mode, v in times.items()},
        "identical": identical / len(texts),
        "queries": len(texts),
    }


def _workers_rss(database_url: str, index_dir: str, size: int, queries_path: str) -> list[dict]:
    """RSS of ``WORKERS`` processes started together, each answering ``WORKER_QUERIES`` prepares of the scope."""
    command = [PYTHON, str(Path(__file__).resolve()), "--rss-worker", str(size), "--index-dir", index_dir, queries_path]
    return processes_json(command, django_env(database_url), count=WORKERS, timeout=1800)


def _rss_worker(size: int, index_dir: str, queries_path: str) -> int:
    """One worker: prepare through the index every query of the file, then report its memory while its siblings
    still run."""
    import django

    django.setup()
    import numpy as np

    from artifacts.models import Scope
    from bench import datagen

    _settings(index_dir)
    _mode("index", size)
    vectors = np.load(queries_path)
    texts = datagen.queries(datagen.vocabulary(), len(vectors))
    prepare = _prepared(Scope.objects.get(scope_id=_scope_id(size)).pk, vectors, texts)
    for text in texts:
        prepare(text)
    time.sleep(3)  # the siblings finish their prepares: the three hold the index at once
    print(json.dumps(process_memory()))
    return 0


def _engine_run(sizes: list[int], queries: int, cache: Path | None, database_url: str) -> dict:
    import django

    django.setup()
    import numpy as np
    from django.core.management import call_command

    from artifacts.recall.vectors.providers import configured_provider
    from bench import datagen
    from bench.dense_index import _embedded, _texts, query_embedding_seconds

    call_command("migrate", verbosity=0, interactive=False)
    index_dir = tempfile.mkdtemp(prefix="powercontext_bench_hybrid_large_")
    _settings(index_dir)
    model_id = configured_provider().model_id
    turns, questions = _texts(queries)
    embedded = _embedded(turns + questions, cache)
    base, query_vectors = embedded[: len(turns)], embedded[len(turns) :]
    texts = datagen.queries(datagen.vocabulary(), len(query_vectors))
    queries_path = os.path.join(index_dir, "queries.npy")
    np.save(queries_path, query_vectors[:WORKER_QUERIES])

    embedding = query_embedding_seconds(questions[:50])
    results, memory = [], {}
    for size in [REFERENCE, *sizes]:
        result = _run_size(size, base, query_vectors, texts, model_id)
        memory[size] = _workers_rss(database_url, index_dir, size, queries_path)
        log(f"{WORKERS} workers on {size:,} entries: {memory[size]}")
        if size != REFERENCE:
            results.append(result)
    return {
        "results": results,
        "memory": {str(size): found for size, found in memory.items()},
        "embedding": embedding,
    }


def _print(engine: str, report: dict) -> None:
    def rss(found: list[dict]) -> str:
        worst = max(found, key=lambda item: item["rss"])
        return f"{worst['rss']:,.0f} ({worst['anon']:,.0f} + {worst['file']:,.0f}; PSS {worst['pss']:,.0f})"

    label = ENGINE_LABELS[engine]
    embedding = report["embedding"]
    print(
        f"{label}: query embedding (packaged model, cache off, apart from the times below): p50 "
        f"{embedding[0] * 1000:.1f} ms, p95 {embedding[1] * 1000:.1f}; {WORKERS} workers on {REFERENCE:,} entries, "
        f"RSS per worker MB (anon + file; PSS): {rss(report['memory'][str(REFERENCE)])}"
    )
    print(
        "| engine | entries | lexical p50 / p95 ms | hybrid, dense index p50 / p95 | hybrid, exact scan p50 / p95 "
        "| index content identical to exact % | dense build s | RSS per worker MB, 3 workers (anon + file; PSS) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for result in report["results"]:
        times = result["times"]

        def cell(mode: str, times=times) -> str:
            return f"{times[mode][0] * 1000:.2f} / {times[mode][1] * 1000:.2f}"

        memory = rss(report["memory"][str(result["size"])])
        print(
            f"| {label} | {result['size']:,} | {cell('lexical')} | {cell('index')} | {cell('exact')} "
            f"| {100 * result['identical']:.1f} | {result['build']:.0f} | {memory} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--cache", type=Path, help="a .npy file keeping the LoCoMo embeddings between runs")
    parser.add_argument("--engine-run", help=argparse.SUPPRESS)
    parser.add_argument("--rss-worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--index-dir", help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.rss_worker:
        return _rss_worker(args.rss_worker, args.index_dir, args.path)
    if args.engine_run:
        report = _engine_run(sizes, args.queries, args.cache, os.environ["DATABASE_URL"])
        Path(args.path).write_text(json.dumps(report), encoding="utf-8")
        return 0
    for engine in args.engines.split(","):
        with throwaway_database(engine, "hybridlarge") as url, tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "report.json"
            command = [PYTHON, str(Path(__file__).resolve()), "--engine-run", engine, "--sizes", args.sizes]
            command += ["--queries", str(args.queries), str(out)]
            if args.cache:
                command += ["--cache", str(args.cache)]
            subprocess.run(command, cwd=ROOT, env=django_env(url), check=True)
            _print(engine, json.loads(out.read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
