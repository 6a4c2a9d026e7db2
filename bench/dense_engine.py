"""Dense recall for large scopes: the HNSW index (artifacts/recall/vectors/ann/) versus the exact scan.

On a throwaway SQLite database, per size: one scope holding that many vectors of the packaged model's dimension
(512), stored as a write stores them (``RecallVector`` rows, float16), generated as ``bench/dense_index.py`` makes
them (the packaged model's embeddings of the LoCoMo turns, mixed; the queries: embeddings of LoCoMo questions).
The index is built through the real command (``recall_vector_index_build``, timed: the build time and the file's
size). Then, for each query, alternately: ``dense_ranked`` of the scope through the index (the candidates read back
and rescored from the database: one statement) and through the exact scan of this process's resident copy (float32
below POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM, the two-pass int8 copy from it; the copy current, the
generations given, as a prepare passes them), each at the top 16 and the top 64 (``hybrid.DENSE_DEPTH``). Printed:
p50 and p95 of each, and the index's recall of the exact top 16 and top 64 (numpy's float32 scan of every vector,
ties by id: the truth), mean and worst query. The query's embedding is not in these times: it is measured apart
(the packaged model, per query, cache off).

Memory: 3 worker processes started together, each answering the queries through the index of the size (or, for the
reference, through the exact scan of a 1,000-vector scope), report their resident set (VmRSS, and its anonymous and
file-backed parts: the mapped index is file-backed, one copy in the page cache whoever maps it).

    python bench/dense_engine.py [--sizes 10000,100000,1000000] [--queries 200] [--cache PATH]

The vector rows are inserted with SQLite's foreign-key checks off and no RecallDocument behind them: the dense path
reads only the vectors and the pair's corpus row, and building a million documents would take the hour this run
must not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    PYTHON,
    django_env,
    log,
    percentile,
    process_memory,
    processes_json,
    throwaway_database,
)
from bench.dense_index import DIMENSION, _embedded, _texts, mixed, query_embedding_seconds  # noqa: E402

LIMITS = (16, 64)
FAMILY = "memory"
REFERENCE = 1_000
"""The small scope whose workers' memory the index's workers are compared with."""
WORKERS = 3
INSERT_BATCH = 20_000


def _settings(index_dir: str) -> None:
    from django.conf import settings

    from infrastructure.conf import setting_set

    setting_set("POWERCONTEXT_RECALL_MODE", "hybrid")
    setting_set("POWERCONTEXT_EMBEDDINGS", {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"})
    setting_set("POWERCONTEXT_SEARCH_INDEX_DIR", index_dir)
    setting_set("POWERCONTEXT_DENSE_INDEX_MIN_VECTORS", 5_000)
    setting_set("POWERCONTEXT_RESIDENT_VECTORS_MB", 4096)  # the exact scan's copy of 1M vectors (1.5 GB) kept


def _stored_scope(scope_id: str, rows, model_id: str, first_document: int) -> int:
    """A scope holding ``rows`` (unit float16) as RecallVector rows of documents numbered from ``first_document``,
    and its corpus row; its pk."""
    from django.db import connection

    from artifacts import services
    from artifacts.models import RecallCorpusStat, RecallVector
    from artifacts.recall.vectors.ranking import ENCODING

    scope = services.scope_create(scope_id=scope_id)
    RecallCorpusStat.objects.create(scope=scope, family=FAMILY, documents=len(rows), total_length=len(rows))
    table = RecallVector._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA foreign_keys = OFF")
        for start in range(0, len(rows), INSERT_BATCH):
            block = rows[start : start + INSERT_BATCH]
            cursor.executemany(
                f"INSERT INTO {table} (document_id, scope_id, family, model_id, dimension, encoding, vector) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (first_document + start + number, scope.pk, FAMILY, model_id, DIMENSION, ENCODING, row.tobytes())
                    for number, row in enumerate(block)
                ],
            )
        cursor.execute("PRAGMA foreign_keys = ON")
    return scope.pk


def _truth(rows, ids, query_vectors, limit: int) -> list[set[int]]:
    """Per query, the exact top ``limit`` document ids: a float32 scan of every row, block by block (each block's
    best ``4 x limit`` kept), then the kept ones ranked as ``dense_rank`` ranks (cosine desc, id asc)."""
    import numpy as np

    from artifacts.recall.vectors.ranking import nearest

    kept: list[list[np.ndarray]] = [[] for _ in query_vectors]
    for start in range(0, len(rows), 200_000):
        scores = rows[start : start + 200_000].astype(np.float32) @ np.asarray(query_vectors, dtype=np.float32).T
        depth = min(4 * limit, scores.shape[0] - 1)
        best = np.argpartition(-scores, depth, axis=0)[: depth + 1]
        for number in range(len(query_vectors)):
            kept[number].append(best[:, number] + start)
    found = []
    for number, query in enumerate(query_vectors):
        rows_kept = np.unique(np.concatenate(kept[number]))
        ranked = nearest(np.asarray(query, dtype=np.float32), rows[rows_kept].astype(np.float32), ids[rows_kept], limit)
        found.append({document for document, _ in ranked})
    return found


def _run_size(size: int, base, query_vectors, texts: list[str], model_id: str, first_document: int) -> dict:
    import numpy as np
    from django.core.management import call_command

    from artifacts.recall.vectors import query, resident
    from artifacts.recall.vectors.ann import store
    from infrastructure.conf import setting_set

    rows = mixed(base, size)
    started = time.perf_counter()
    scope_pk = _stored_scope(f"bench:dense-{size}", rows, model_id, first_document)
    log(f"{size:,} vectors stored in {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    call_command(
        "recall_vector_index_build",
        "--scope",
        f"bench:dense-{size}",
        "--threads",
        str(os.cpu_count() or 1),  # nothing else to serve: every core
        stdout=sys.stderr,
        stderr=sys.stderr,
    )
    build_seconds = time.perf_counter() - started
    directory = store.index_directory(scope_pk, FAMILY, model_id, DIMENSION)
    file_size = (directory / store.meta_read(directory).file).stat().st_size
    pair = (FAMILY, scope_pk)
    generations = resident.generations([pair])
    index_dir = str(store.dense_root().parent)

    def ranked(text: str, limit: int, through_index: bool):
        setting_set("POWERCONTEXT_SEARCH_INDEX_DIR", index_dir if through_index else "")
        result = query.dense_ranked(
            scope_pks_by_family={FAMILY: [scope_pk]}, query=text, limits={FAMILY: limit}, generations=generations
        )
        return result.ranked[FAMILY][scope_pk]

    for text in texts[:2]:  # the copy read and the index mapped before timing
        ranked(text, 16, False)
        ranked(text, 16, True)
    ids = np.arange(first_document, first_document + size, dtype=np.int64)
    times = {(kind, limit): [] for kind in ("index", "exact") for limit in LIMITS}
    recalls: dict[int, list[float]] = {limit: [] for limit in LIMITS}
    truths = {limit: _truth(rows, ids, query_vectors, limit) for limit in LIMITS}
    for number, text in enumerate(texts):
        for limit in LIMITS:
            order = (True, False) if number % 2 else (False, True)
            for through_index in order:
                started = time.perf_counter()
                answer = ranked(text, limit, through_index)
                times[("index" if through_index else "exact", limit)].append(time.perf_counter() - started)
                if through_index:
                    recalls[limit].append(len({d for d, _ in answer} & truths[limit][number]) / limit)
    setting_set("POWERCONTEXT_SEARCH_INDEX_DIR", index_dir)
    resident.MATRICES.clear()
    store.views_forget()
    log(f"{size:,} vectors measured")
    return {
        "size": size,
        "build": build_seconds,
        "file": file_size,
        "times": {f"{kind}-{limit}": (percentile(v, 50), percentile(v, 95)) for (kind, limit), v in times.items()},
        "recall": {limit: (float(np.mean(v)), float(np.min(v))) for limit, v in recalls.items()},
        "scope": f"bench:dense-{size}",
    }


def _workers_rss(database_url: str, index_dir: str, scope_id: str, queries_path: str) -> list[dict]:
    """RSS of ``WORKERS`` processes started together, each answering the queries of ``scope_id``."""
    command = [PYTHON, str(Path(__file__).resolve()), "--worker", scope_id, "--index-dir", index_dir, queries_path]
    return processes_json(command, django_env(database_url), count=WORKERS, timeout=600)


def _worker(scope_id: str, index_dir: str, queries_path: str) -> int:
    """One worker: answer every query of the file through the dense path of ``scope_id``, then report its memory
    while its siblings still run (each waits until all three have answered)."""
    import django

    django.setup()
    import numpy as np

    from artifacts.models import Scope
    from artifacts.recall.vectors import query, resident
    from artifacts.recall.vectors.providers import configured_provider

    _settings(index_dir)
    model_id = configured_provider().model_id
    vectors = np.load(queries_path)
    scope_pk = Scope.objects.get(scope_id=scope_id).pk
    generations = resident.generations([(FAMILY, scope_pk)])
    for number, vector in enumerate(vectors):
        text = f"query {number}"
        query.QUERY_CACHE.put(None, (model_id, text), vector, 4096)
        for limit in LIMITS:
            query.dense_ranked(
                scope_pks_by_family={FAMILY: [scope_pk]}, query=text, limits={FAMILY: limit}, generations=generations
            )
    time.sleep(3)  # the siblings finish their queries: the three hold the index at once
    print(json.dumps(process_memory()))  # PSS: the index's pages shared three ways
    return 0


def _run(sizes: list[int], queries: int, cache: Path | None, database_url: str) -> tuple[list[dict], dict, tuple]:
    import django

    django.setup()
    import numpy as np
    from django.core.management import call_command

    from artifacts.recall.vectors import query
    from artifacts.recall.vectors.providers import configured_provider

    call_command("migrate", verbosity=0, interactive=False)
    index_dir = tempfile.mkdtemp(prefix="powercontext_bench_dense_index_")
    _settings(index_dir)
    model_id = configured_provider().model_id
    turns, questions = _texts(queries)
    embedded = _embedded(turns + questions, cache)
    base, query_vectors = embedded[: len(turns)], embedded[len(turns) :]
    texts = [f"question {number}" for number in range(len(query_vectors))]
    for text, vector in zip(texts, query_vectors, strict=True):
        query.QUERY_CACHE.put(None, (model_id, text), vector, 4096)
    queries_path = os.path.join(index_dir, "queries.npy")
    np.save(queries_path, query_vectors[:50])

    embedding = query_embedding_seconds(questions[:50])

    _stored_scope(f"bench:dense-{REFERENCE}", mixed(base, REFERENCE), model_id, 1)
    memory = {"reference": _workers_rss(database_url, index_dir, f"bench:dense-{REFERENCE}", queries_path)}
    log(f"{WORKERS} workers on {REFERENCE:,} vectors: {memory['reference']}")
    results = []
    first = 1 + REFERENCE
    for size in sizes:
        results.append(_run_size(size, base, query_vectors, texts, model_id, first))
        first += size
        memory[size] = _workers_rss(database_url, index_dir, results[-1]["scope"], queries_path)
        log(f"{WORKERS} workers on {size:,} vectors: {memory[size]}")
    return results, memory, embedding


def _print(results: list[dict], memory: dict, embedding: tuple) -> None:
    def rss(found: list[dict]) -> str:
        worst = max(found, key=lambda item: item["rss"])
        pss = f", PSS {worst['pss']:,.0f}" if "pss" in worst else ""
        return f"{worst['rss']:,.0f} ({worst['anon']:,.0f} + {worst['file']:,.0f}{pss})"

    print(
        f"query embedding (packaged model, cache off): p50 {embedding[0] * 1000:.1f} ms, p95 {embedding[1] * 1000:.1f}"
    )
    print(f"{WORKERS} workers, exact scan of {REFERENCE:,} vectors, RSS MB (anon + file): {rss(memory['reference'])}")
    print(
        "| vectors | ranking | top 16 p50 ms | p95 | top 64 p50 ms | p95 | recall@16 mean (worst) "
        "| recall@64 mean (worst) | build s | file MB | RSS per worker MB (anon + file) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        for kind in ("exact", "index"):
            times = [result["times"][f"{kind}-{limit}"] for limit in LIMITS]
            recall = [
                "exact" if kind == "exact" else f"{result['recall'][limit][0]:.4f} ({result['recall'][limit][1]:.3f})"
                for limit in LIMITS
            ]
            extra = (
                f"{result['build']:.0f} | {result['file'] / 2**20:,.0f} | {rss(memory[result['size']])}"
                if kind == "index"
                else "| | "
            )
            print(
                f"| {result['size']:,} | {'HNSW index' if kind == 'index' else 'exact scan'} "
                f"| {times[0][0] * 1000:.2f} | {times[0][1] * 1000:.2f} | {times[1][0] * 1000:.2f} "
                f"| {times[1][1] * 1000:.2f} | {recall[0]} | {recall[1]} | {extra} |"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cache", type=Path, help="a .npy file keeping the embeddings between runs")
    parser.add_argument("--worker", metavar="SCOPE_ID", help=argparse.SUPPRESS)
    parser.add_argument("--index-dir", help=argparse.SUPPRESS)
    parser.add_argument("queries_path", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return _worker(args.worker, args.index_dir, args.queries_path)
    with throwaway_database("sqlite", "denseengine") as url:
        os.environ.update(django_env(url))
        results, memory, embedding = _run([int(size) for size in args.sizes.split(",")], args.queries, args.cache, url)
    _print(results, memory, embedding)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
