"""Micro benchmark of dense recall's query side (artifacts/recall/vectors/query.py, resident.py).

On a throwaway database (SQLite by default, ``--engine postgresql``): the synthetic corpus (``bench.datagen``) with
a random unit vector of 512 dimensions per memory document, so one scope of 10,000 documents and scopes of 1,000.
Timed, median and p95 of ``--repeat`` calls: ``dense_ranked`` of one scope with its vectors read from the database
(miss), from this process's copy after reading the generation (hit), and from the copy with the generations given
(hit, no statement); and the packaged model's query embedding (first call, which loads the model, then per query,
cache off). The query vector itself is cached in the timed ``dense_ranked`` calls.

    python bench/dense_query.py [--engine sqlite|postgresql] [--repeat 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import django_env, log, percentile, throwaway_database  # noqa: E402

DIMENSION = 512
LIMIT = 16
SIZES = {"current": 10_000, "ref1": 1_000}


def _timed(call, repeat: int, before=None) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return percentile(samples, 50), percentile(samples, 95)


def _run(repeat: int) -> list[tuple[str, float, float]]:
    import django

    django.setup()
    import numpy as np
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from artifacts.models import RecallDocument, RecallVector, Scope
    from artifacts.recall.vectors import query, resident
    from artifacts.recall.vectors.providers import PackagedProvider, configured_provider
    from artifacts.recall.vectors.ranking import ENCODING, encode
    from bench import datagen
    from infrastructure.conf import setting_set

    call_command("migrate", verbosity=0, interactive=False)
    datagen.bulk_load(datagen.dataset(SIZES["current"]), "bench")
    setting_set("POWERCONTEXT_RECALL_MODE", "hybrid")
    setting_set("POWERCONTEXT_EMBEDDINGS", {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"})
    model_id = configured_provider().model_id
    rng = np.random.default_rng(37)
    for scope_id in (f"bench:{name}" for name in SIZES):
        documents = list(
            RecallDocument.objects.filter(scope__scope_id=scope_id, family="memory").values_list("pk", "scope_id")
        )
        RecallVector.objects.bulk_create(
            [
                RecallVector(
                    document_id=pk,
                    scope_id=scope_pk,
                    family="memory",
                    model_id=model_id,
                    dimension=DIMENSION,
                    encoding=ENCODING,
                    vector=encode(rng.standard_normal(DIMENSION), DIMENSION),
                )
                for pk, scope_pk in documents
            ],
            batch_size=2000,
        )
        log(f"{scope_id}: {len(documents)} vectors")

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # as autovacuum would after a bulk load (else the first statements are slow)
    rows: list[tuple[str, float, float]] = []
    text = "what did we decide about the deployment"
    query.QUERY_CACHE.put(None, (model_id, text), np.asarray(rng.standard_normal(DIMENSION), dtype=np.float32), 256)
    for name, size in sorted(SIZES.items(), key=lambda item: item[1]):
        scope_pk = Scope.objects.get(scope_id=f"bench:{name}").pk
        pair = ("memory", scope_pk)

        def call(generations=None, scope_pk=scope_pk):
            return query.dense_ranked(
                scope_pks_by_family={"memory": [scope_pk]},
                query=text,
                limits={"memory": LIMIT},
                generations=generations,
            )

        rows.append((f"dense_ranked, {size:,} vectors, miss (read)", *_timed(call, repeat, resident.MATRICES.clear)))
        call()
        with CaptureQueriesContext(connection) as statements:
            call()
        rows.append((f"dense_ranked, {size:,} vectors, hit ({len(statements)} statement)", *_timed(call, repeat)))
        generations = resident.generations([pair])
        rows.append(
            (f"dense_ranked, {size:,} vectors, hit, generations given", *_timed(lambda g=generations: call(g), repeat))
        )

    provider = PackagedProvider()
    started = time.perf_counter()
    provider.embed_query("warm up")
    rows.append(("packaged embed_query, first call (loads the model)", time.perf_counter() - started, 0.0))
    texts = iter([f"what did we decide about release {i} of the deployment" for i in range(repeat * 2)])
    rows.append(("packaged embed_query, one query", *_timed(lambda: provider.embed_query(next(texts)), repeat)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    with throwaway_database(args.engine, "densequery") as url:
        os.environ.update(django_env(url))
        rows = _run(args.repeat)
    print(f"{'measure':<60} {'p50 ms':>9} {'p95 ms':>9}")
    for label, p50, p95 in rows:
        print(f"{label:<60} {p50 * 1000:>9.2f} {p95 * 1000:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
