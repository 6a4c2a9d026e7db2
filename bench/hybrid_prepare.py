"""Hybrid recall's cost in a prepare: POST /v1/context/prepare with lexical and with hybrid recall, side by side.

The worker of part 12 of ``bench/run.py --parts hybrid [--hybrid-sizes 1000,10000]``, per engine and size, in a
throwaway database: bulk-load the synthetic dataset of that size (``bench.datagen``: a current scope of N memory
entries and N/10 experiences, three referenced scopes of N/10 entries), embed every document with the packaged model
(``manage.py recall_embed``, its rate reported), then send each query through Django's WSGI handler (prepare log
off) with lexical and with hybrid recall, alternating which goes first. Each query is embedded once before it is
timed (the query cache keeps it), so the hybrid figure excludes the query's embedding, which is reported apart (the
packaged model, per query).
"""

from __future__ import annotations

import io
import time

from bench.common import log, percentile, wsgi_prepare

ASSEMBLY = {"sections": [{"family": "memory", "limit": 6}, {"family": "experience", "limit": 2}]}


def worker(config: dict) -> dict:
    """Runs inside ``bench/worker.py hybrid_prepare`` against a migrated throwaway database."""
    from django.conf import settings
    from django.core.management import call_command

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
    post = wsgi_prepare(key)

    def prepare(query: str, mode: str) -> float:
        settings.POWERCONTEXT_RECALL_MODE = mode
        return post({"scope_id": "bench:current", "query": query, "max_bytes": 8000, "assembly": ASSEMBLY})[1]

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
