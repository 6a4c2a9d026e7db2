"""Hybrid recall's cost in a prepare: POST /v1/context/prepare with lexical and with hybrid recall, side by side.

The worker of part 12 of ``bench/run.py --parts hybrid [--hybrid-sizes 1000,100000]``, per engine and size, in a
throwaway database: bulk-load the synthetic dataset of that size (``bench.datagen``: a current scope of N memory
entries and N/10 experiences, three referenced scopes of N/10 entries), embed every document with the packaged model
(``manage.py recall_embed``, its rate reported), then send each query through Django's WSGI handler (prepare log
off) with lexical recall, with hybrid recall as configured (the packaged model's learned ranker and abstention
floors) and with hybrid recall fused by the model's hand rule alone, each going first in turn. Each query is embedded
once before it is timed (the query cache keeps it), so the hybrid figures exclude the query's embedding, which is
reported apart (the packaged model, per query).

Then the write cost: memory entries POSTed to /v1/memory/entries through the same handler into a scope of their own,
alternately with lexical recall (no vector) and hybrid recall (the packaged model embeds the entry inside the write's
transaction). And the lag scrape's count (``powercontext_recall_vector_lag``) timed with every document missing its
vector (before ``recall_embed``) and with none missing (after): the full count and the capped one /metrics runs.
"""

from __future__ import annotations

import io
import time

from bench.common import log, percentile, wsgi_post, wsgi_prepare

ASSEMBLY = {"sections": [{"family": "memory", "limit": 6}, {"family": "experience", "limit": 2}]}
PROGRESS_SECONDS = 10.0
"""recall_embed's progress reaches the terminal at most this often (its per-batch lines would be thousands)."""


class _Progress(io.TextIOBase):
    """A stream for ``recall_embed``'s stderr that logs its latest line at most every ``PROGRESS_SECONDS``."""

    def __init__(self) -> None:
        self.shown = 0.0

    def write(self, text: str) -> int:
        line = text.strip()
        if line and time.monotonic() - self.shown >= PROGRESS_SECONDS:
            self.shown = time.monotonic()
            log(f"recall_embed:{line.split(':', 1)[-1]}")
        return len(text)


def _lag_counts() -> dict:
    """Seconds of the lag's full count and of the capped count the /metrics scrape runs, and what each counted."""
    from artifacts.recall.vectors.lag import RECALL_VECTOR_LAG_CAP
    from artifacts.recall.vectors.providers import configured_provider
    from artifacts.recall.vectors.selectors import recall_vector_lag

    provider = configured_provider()
    found = {}
    for name, cap in (("full", None), ("capped", RECALL_VECTOR_LAG_CAP)):
        begin = time.perf_counter()
        lag = recall_vector_lag(model_id=provider.model_id, dimension=provider.dimension, cap=cap)
        found[name] = {"seconds": time.perf_counter() - begin, "lag": lag}
    return found


def _write_cost(scope_id: str, texts: list[str], warm: int = 10) -> dict:
    """p50/p95 seconds of a memory entry write through the WSGI handler (one new entry each), lexical and hybrid
    recall alternating which goes first: ``warm`` untimed writes, then the rest of ``texts`` in pairs."""
    from artifacts import services
    from infrastructure.conf import setting_set

    scope = services.scope_create(scope_id=scope_id)
    _, key = services.api_key_create(name="bench-writes", read_scopes=[scope], write_scopes=[scope])
    post = wsgi_post(key, "/v1/memory/entries", "201 Created")
    numbers = iter(range(len(texts)))

    def write(mode: str) -> float:
        setting_set("POWERCONTEXT_RECALL_MODE", mode)
        i = next(numbers)
        return post({"scope_id": scope_id, "artifact_id": "notes", "entry_id": f"e{i}", "body": texts[i]})[1]

    for i in range(warm):  # the handler, the artifact, the model
        write(("lexical", "hybrid")[i % 2])
    timings: dict[str, list[float]] = {"lexical": [], "hybrid": []}
    for pair in range((len(texts) - warm) // 2):
        for mode in ("lexical", "hybrid") if pair % 2 else ("hybrid", "lexical"):
            timings[mode].append(write(mode))
    from artifacts.models import RecallVector

    embedded = RecallVector.objects.filter(scope=scope).count()  # the hybrid writes' (and half the warm writes')
    assert embedded == len(timings["hybrid"]) + warm // 2, embedded
    return {k: {"p50": percentile(v, 50), "p95": percentile(v, 95), "count": len(v)} for k, v in timings.items()}


def worker(config: dict) -> dict:
    """Runs inside ``bench/worker.py hybrid_prepare`` against a migrated throwaway database."""
    from django.conf import settings
    from django.core.management import call_command

    from artifacts import services
    from artifacts.models import Scope
    from artifacts.recall.vectors import query as dense
    from bench import datagen
    from infrastructure.conf import setting_set

    setting_set("POWERCONTEXT_PREPARE_LOG", False)
    vocab = datagen.vocabulary()
    datagen.bulk_load(datagen.dataset(config["n"], vocab=vocab), "bench")
    setting_set("POWERCONTEXT_RECALL_MODE", "hybrid")
    lag_missing = _lag_counts()
    log(f"lag count with every vector missing: {lag_missing}")
    begin = time.perf_counter()
    call_command("recall_embed", "--batch-size", "64", stderr=_Progress())
    embed_seconds = time.perf_counter() - begin
    lag_none = _lag_counts()
    from artifacts.models import RecallVector

    vectors = RecallVector.objects.count()
    scopes = list(Scope.objects.filter(scope_id__startswith="bench:"))
    api_key, key = services.api_key_create(name="bench", read_scopes=scopes, write_scopes=[])
    texts = datagen.queries(vocab, config["queries"])
    post = wsgi_prepare(key)

    from bench.recall_quality import hand_rule

    configured, by_hand = settings.POWERCONTEXT_RECALL_FUSION, hand_rule()

    def prepare(query: str, mode: str) -> float:
        # "hand": hybrid recall fused by the model's hand rule alone (no learned ranker, no abstention floor).
        setting_set("POWERCONTEXT_RECALL_MODE", "hybrid" if mode == "hand" else mode)
        setting_set("POWERCONTEXT_RECALL_FUSION", by_hand if mode == "hand" else configured)
        return post({"scope_id": "bench:current", "query": query, "max_bytes": 8000, "assembly": ASSEMBLY})[1]

    embedding = []
    with dense.query_cache_owner(api_key.pk):  # cached for the key the prepares send (a key hits only its own)
        for query in texts:  # each query embedded once, untimed by the prepares: its cost is reported apart
            begin = time.perf_counter()
            dense.query_vector(query)
            embedding.append(time.perf_counter() - begin)
    modes = ("lexical", "hybrid", "hand")
    for query in texts[:10]:  # warm caches, connections and the pairs' copies
        for mode in modes:
            prepare(query, mode)
    timings: dict[str, list[float]] = {mode: [] for mode in modes}
    for i, query in enumerate(texts):
        for mode in modes[i % 3 :] + modes[: i % 3]:  # each goes first in turn
            timings[mode].append(prepare(query, mode))
    from infrastructure import metrics

    resident = {
        event: metrics.RECALL_DENSE_RESIDENT.labels(event=event)._value.get() for event in ("hit", "miss", "eviction")
    }
    log(f"dense copies: {resident}")
    notes = datagen.queries(vocab, 10 + 2 * config["writes"], seed=7)
    writes = _write_cost("bench:writes", [f"note {i}: {text}" for i, text in enumerate(notes)])
    return {
        "writes": writes,
        "lag": {"missing": lag_missing, "none": lag_none},
        "resident": resident,
        "timings": {k: {"p50": percentile(v, 50), "p95": percentile(v, 95)} for k, v in timings.items()},
        "query_embedding_p50": percentile(embedding[1:], 50),
        "embed_seconds": embed_seconds,
        "vectors": vectors,
    }
