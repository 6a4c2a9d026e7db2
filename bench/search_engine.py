"""Part 9: exact SQL ranking versus the search-engine index (artifacts/recall/engine) on the same corpus.

Per size N: bulk-load the synthetic dataset (``bench.datagen``, as the latency part), build the engine
index of every scope and family at or above the threshold (timed, and its size on disk), then per query,
in alternating order: the current scope's memory top-16 by SQL alone and through the engine (whose result
must be identical), and the whole prepare (default assembly) both ways. Then some writes through the
services that the index does not hold yet, and the same comparison over that unindexed tail.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from bench import datagen
from bench.common import log, percentile

MAX_TIMED_SECONDS = 300
MARGIN_DEPTH = 16
"""How deep (times the limit) the margin measurement reads the engine's own ranking."""


class AllowAll:
    def can_read(self, scope) -> bool:
        return True


def _stats(samples: list[float]) -> dict:
    return {"p50": percentile(samples, 50), "p95": percentile(samples, 95), "n": len(samples)}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def worker(config: dict) -> dict:
    from artifacts.models import Scope
    from artifacts.recall import bm25 as bm25_module
    from artifacts.recall import tokenize
    from artifacts.recall.engine import build, store
    from assembly.runtime import assembly_options_parse, context_prepare
    from bench import rankings
    from infrastructure import metrics
    from infrastructure.conf import setting_set

    n, threshold = config["n"], config["threshold"]
    result: dict = {"n": n, "threshold": threshold}
    vocab = datagen.vocabulary()
    data = datagen.dataset(n, vocab=vocab)
    load = datagen.bulk_load(data, "bench")
    result["load_seconds"], result["counts"] = load["seconds"], load["counts"]
    del data
    current = Scope.objects.get(scope_id="bench:current")
    index_dir = tempfile.mkdtemp(prefix="powercontext_bench_index_")
    setting_set("POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS", threshold)
    setting_set("POWERCONTEXT_SEARCH_INDEX_MAX_LAG", 5000)
    setting_set("POWERCONTEXT_SEARCH_INDEX_DIR", index_dir)

    started = time.perf_counter()
    watermark = build.settled_watermark(0)
    built = []
    with store.writer_lock():
        for scope_pk, family, _documents in build.large_scopes(threshold):
            built.append(build.index_update(scope_pk, family, watermark=watermark))
    result["build_seconds"] = time.perf_counter() - started
    result["indexed_documents"] = sum(r.documents for r in built)
    result["indexes"] = len(built)
    result["index_bytes"] = _size(Path(index_dir))
    log(f"N={n}: loaded in {result['load_seconds']:.0f}s, {len(built)} indexes built in {result['build_seconds']:.1f}s")

    options = assembly_options_parse({})
    texts = datagen.queries(vocab, config["queries"])

    def top16(query: str):
        return rankings.bm25_top_scored_by_scope(scope_pks=[current.pk], family="memory", query=query, limit=16)

    def prepare(query: str):
        return context_prepare(
            principal=AllowAll(), scope_id=current.scope_id, query=query, max_bytes=8000, options=options
        ).result.content

    def depth_needed(query: str, exact: list[tuple[int, int]]) -> float:
        """How deep in the engine's own ranking the exact top-16 reaches, as a multiple of 16 (the engine proposes
        CANDIDATE_FACTOR times the limit); infinity when deeper than MARGIN_DEPTH times."""
        bm25 = bm25_module.bm25_queries(scope_pks_by_family={"memory": [current.pk]}, terms=tokenize.query_terms(query))
        if not exact or ("memory", current.pk) not in bm25:
            return 0.0
        reader = store.reader(current.pk, "memory")
        proposed = store.search(reader, sorted(bm25[("memory", current.pk)].weights), MARGIN_DEPTH * 16).documents
        positions = {document: position for position, document in enumerate(proposed, start=1)}
        indexed = [document for document, _ in exact if document <= reader.meta.watermark]  # the tail is ranked apart
        if any(document not in positions for document in indexed):
            return float("inf")
        return max((positions[document] for document in indexed), default=0) / 16

    def timed(texts: list[str]) -> dict:
        samples: dict[str, list[float]] = {"sql": [], "engine": [], "prepare_sql": [], "prepare_engine": []}
        depths: list[float] = []
        identical = prepare_identical = 0
        unproven = metrics.RECALL_INDEX_FALLBACKS.labels("unproven")._value.get()
        deadline = time.perf_counter() + MAX_TIMED_SECONDS
        for i, query in enumerate(texts):
            if time.perf_counter() > deadline:
                break
            answers = {}
            for engine_on in (i % 2 == 0, i % 2 == 1):  # alternate which side runs first
                setting_set("POWERCONTEXT_SEARCH_INDEX_DIR", index_dir if engine_on else None)
                for name, function in (("", top16), ("prepare_", prepare)):
                    begin = time.perf_counter()
                    answers[(name, engine_on)] = function(query)
                    samples[name + ("engine" if engine_on else "sql")].append(time.perf_counter() - begin)
            identical += answers[("", True)] == answers[("", False)]
            setting_set("POWERCONTEXT_SEARCH_INDEX_DIR", index_dir)
            depths.append(depth_needed(query, answers[("", False)][current.pk]))
            prepare_identical += answers[("prepare_", True)] == answers[("prepare_", False)]
        setting_set("POWERCONTEXT_SEARCH_INDEX_DIR", index_dir)
        count = len(samples["sql"])
        return {
            "timings": {name: _stats(values) for name, values in samples.items()},
            "identical": identical / count,
            "depth_needed": {"p50": percentile(depths, 50), "max": max(depths)},
            "prepare_identical": prepare_identical / count,
            "queries": count,
            # Engine rankings ranked again by SQL (the memory top-16 and every indexed family of the prepare).
            "unproven": metrics.RECALL_INDEX_FALLBACKS.labels("unproven")._value.get() - unproven,
        }

    try:
        for query in texts[:5]:  # warm caches, connections and the engine's searchers
            top16(query), prepare(query)
        result["fresh"] = timed(texts)
        # Writes the index does not hold yet: they are ranked exactly in SQL and merged (the unindexed tail).
        result["tail_documents"] = _write_tail(current, config["tail"], vocab)
        result["with_tail"] = timed(texts[: max(20, len(texts) // 3)])
    finally:
        shutil.rmtree(index_dir, ignore_errors=True)
    return result


def _write_tail(scope, count: int, vocab) -> int:
    """``count`` new memory entries written through the services, 50 per revision, in a new artifact."""
    import numpy as np

    from artifacts import services

    rng = np.random.default_rng(99)
    bodies = [
        " ".join(vocab.words[i] for i in vocab.sample(rng, int(rng.integers(8, 40))).tolist()) for _ in range(count)
    ]
    for start in range(0, count, 50):
        services.memory_revision_create(
            scope=scope,
            artifact_id="tail",
            writes=[
                services.EntryVersionWrite(f"tail-{i}", f"tail-{i}-v1", bodies[i])
                for i in range(start, min(count, start + 50))
            ],
            author="bench",
        )
    return count
