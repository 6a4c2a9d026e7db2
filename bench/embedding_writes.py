"""Issue 52: what a write costs with and without its vector: lexical against hybrid recall (the packaged model).

    .venv/bin/python bench/embedding_writes.py [--smoke] [--engines sqlite,postgresql] [--queries N]

Three bodies, each written as a new memory entry through ``memory_revision_create`` (the service behind
POST /v1/memory/entries: the embedding before its transaction, then one transaction and one revision): 1 KB of
English prose, 4,096 random words (about 26,000 characters) and 65,536 random CJK ideographs
(bench/large_writes.py's). Each engine gets a throwaway database; each recall mode its own child process, the
packaged model loaded before the first timed write. Printed: p50 and p99 milliseconds of each body, lexical and
hybrid side by side (p99 of a few writes is nearly their maximum). ``--queries N`` first times N query embeddings
made while 4 threads embed 65,536-character CJK passages in the same process (what a prepare's query waits for
beside long writes). Figures only: nothing here asserts a time. The same bodies over HTTP, with another tenant
beside long writes and writes per second: bench/http_writes.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, the project root is not
    sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from bench.large_writes import large_body, small_body  # noqa: E402

BODIES = ("1 KB", "4,096 words", "65,536 CJK")
SETTINGS = {"full": {"1 KB": 31, "4,096 words": 15, "65,536 CJK": 9}, "smoke": dict.fromkeys(BODIES, 3)}
MODES = ("lexical", "hybrid")


def words_body(seed: int) -> str:
    """4,096 random lowercase words of 3 to 9 letters."""
    generator = random.Random(seed)
    return " ".join("".join(generator.choices(string.ascii_lowercase, k=generator.randint(3, 9))) for _ in range(4096))


MAKERS = {"1 KB": small_body, "4,096 words": words_body, "65,536 CJK": large_body}


def child(mode: str, repetitions: str, out: str) -> None:
    os.chdir(ROOT)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from artifacts import services
    from artifacts.recall.vectors.providers import configured_provider
    from artifacts.services import EntryVersionWrite

    counts = SETTINGS[repetitions]
    scope = services.scope_create(scope_id="bench:embedding-writes")
    if (provider := configured_provider()) is not None:
        provider.embed_query("load the model")
    serial = iter(range(10**6))

    def write(body: str) -> float:
        started = time.perf_counter()
        services.memory_revision_create(
            scope=scope,
            artifact_id=f"entry-{next(serial)}",
            writes=[EntryVersionWrite("entry", None, body)],
            author="bench",
        )
        return (time.perf_counter() - started) * 1000

    write(small_body(10**6))  # warm-up: connection, statements, caches
    result = {}
    for name in BODIES:
        bodies = [MAKERS[name](seed) for seed in range(counts[name])]
        result[name] = [write(body) for body in bodies]
    Path(out).write_text(json.dumps(result), encoding="utf-8")


def query_while_embedding(queries: int) -> tuple[list[float], int]:
    """Milliseconds of each of ``queries`` query embeddings made while 4 threads embed 65,536-character CJK
    passages with the same packaged model, and how many passages were embedded meanwhile (no database)."""
    import threading

    os.chdir(ROOT)
    os.environ.update({k: v for k, v in common.django_env().items() if k not in os.environ})
    import django

    django.setup()
    from artifacts.recall.vectors.providers import PackagedProvider

    provider = PackagedProvider()
    provider.embed_query("load the model")
    stop, started, embedded = threading.Event(), threading.Barrier(5), []

    def passages(seed: int) -> None:
        body = large_body(seed)
        started.wait()
        while not stop.is_set():
            provider.embed_passages([body])
            embedded.append(seed)

    threads = [threading.Thread(target=passages, args=(seed,), daemon=True) for seed in range(4)]
    for thread in threads:
        thread.start()
    started.wait()
    times = []
    for n in range(queries):
        time.sleep(0.2)  # the passages under way
        begun = time.perf_counter()
        provider.embed_query(f"where did we leave the car, question {n}")
        times.append((time.perf_counter() - begun) * 1000)
    stop.set()
    for thread in threads:
        thread.join()
    return times, len(embedded)


def run_engine(engine: str, mode: str, repetitions: str) -> dict:
    with common.throwaway_database(engine, "embedding_writes") as url, tempfile.TemporaryDirectory() as io_dir:
        out = Path(io_dir) / "result.json"
        env = common.django_env(url) | {
            "PYTHONUNBUFFERED": "1",
            "POWERCONTEXT_RECALL_MODE": mode,
            "POWERCONTEXT_EMBEDDINGS_PROVIDER": "packaged" if mode == "hybrid" else "off",
        }
        command = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--mode", repetitions]
        subprocess.run([*command, "--out", str(out)], cwd=ROOT, env=env, check=True)
        return json.loads(out.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="3 writes of each body: a quick check that it runs")
    parser.add_argument("--engines", default=",".join(common.ENGINES), help='comma-separated (default: both; "": none)')
    parser.add_argument(
        "--queries", type=int, default=0, help="also time N query embeddings while 4 threads embed 64K CJK passages"
    )
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=tuple(SETTINGS), default="full", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.mode, args.out)
        return
    repetitions = "smoke" if args.smoke else "full"
    if args.queries:
        common.log(f"{args.queries} queries while 4 threads embed 65,536-character CJK passages")
        times, embedded = query_while_embedding(args.queries)
        print(
            f"Query embedding while 4 threads embed 65,536-character CJK passages (packaged model): "
            f"p50 {common.percentile(times, 50):,.1f} ms, max {max(times):,.1f} ms over {len(times)} queries; "
            f"{embedded} passages embedded meanwhile\n"
        )
    rows = []
    for engine in filter(None, args.engines.split(",")):
        if engine == "postgresql" and not common.postgres_available():
            continue
        results = {}
        for mode in MODES:
            common.log(f"{engine}: {mode} ({repetitions})")
            results[mode] = run_engine(engine, mode, repetitions)
        for name in BODIES:
            cells = []
            for mode in MODES:
                times = results[mode][name]
                cells += [f"{common.percentile(times, 50):,.1f}", f"{common.percentile(times, 99):,.1f}"]
            rows.append([common.ENGINE_LABELS[engine], name, *cells])
    if not rows:
        return
    counts = SETTINGS[repetitions]
    print(
        common.Table(
            f"Write cost, lexical against hybrid recall with the packaged model ({repetitions})",
            ["engine", "body", "lexical p50 ms", "lexical p99 ms", "hybrid p50 ms", "hybrid p99 ms"],
            rows,
            [
                "Writes of one new memory entry each through memory_revision_create, "
                + ", ".join(f"{counts[name]} of {name}" for name in BODIES)
                + " per mode.",
                common.machine_description(),
            ],
        ).text()
    )


if __name__ == "__main__":
    main()
