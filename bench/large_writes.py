"""Large-write benchmark: a 65,536-character CJK memory entry against a 1 KB one, created and updated.

    .venv/bin/python bench/large_writes.py [--smoke] [--engines sqlite,postgresql] [--document-tokens N]

A 65,536-character run of CJK ideographs drawn from the whole basic block (U+4E00–U+9FFF) tokenizes into
about 65,000 distinct bigrams: one posting and one term-statistics row each, every one of them written when
the entry is created and undone when it is replaced, were it indexed whole. The index holds a document's
first ``RECALL_MAX_DOCUMENT_TOKENS`` terms (vocabulary/limits.py), so these writes index that many;
``--document-tokens N`` measures another prefix (how the limit was chosen). The 1 KB entry is English prose
(about 160 terms).
Each engine gets a throwaway database (bench/common.py) migrated by a child process; the writes go through
``memory_revision_create``, the service behind POST /v1/memory/entries, one transaction and one revision
each:

- create: a new entry (a new memory artifact each time, so every write starts from the same state);
- update: the entry's body replaced by another of the same kind (the old version retired and unindexed,
  the new one indexed).

Printed: the median milliseconds of each, side by side per engine, and the ratio of the CJK write to the
1 KB write (issue 34 asks for at most 25x). ``--statement-timeout SECONDS`` (PostgreSQL) cancels a statement
that runs longer, and the row says so instead of waiting: the write path before issue 34's fix ran a 64K CJK
update for more than ten minutes. Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, the project root is not
    sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

LARGE_CHARACTERS = 65_536
SCOPE = "bench:large-writes"
SETTINGS = {"full": {"small": 21, "large": 5}, "smoke": {"small": 5, "large": 2}}
PROSE = (
    "The deploy freezes on Fridays after noon; rollbacks need a second reviewer and a ticket that names the "
    "failing check. Latency budgets are per endpoint, measured at the load balancer, and a regression of more "
    "than ten percent blocks the release until the owner signs off. "
)


def small_body(seed: int) -> str:
    """About 1 KB of English prose, different for every seed."""
    return (f"Note {seed}. " + PROSE * 5)[:1024]


def large_body(seed: int) -> str:
    """65,536 random CJK ideographs: about 65,000 distinct bigrams."""
    generator = random.Random(seed)
    return "".join(chr(0x4E00 + generator.randrange(0x9FFF - 0x4E00)) for _ in range(LARGE_CHARACTERS))


# --- child: one engine -----------------------------------------------------------------------------


def _median_ms(action, repetitions: int) -> float | None:
    """The median milliseconds of ``action``, or None when a statement was cancelled (--statement-timeout)."""
    from django.db import OperationalError

    times = []
    for n in range(repetitions):
        started = time.perf_counter()
        try:
            action(n)
        except OperationalError as error:
            print(f"cancelled after {time.perf_counter() - started:.1f} s: {error}", file=sys.stderr)
            return None
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def child(mode: str, out: str, document_tokens: int | None) -> None:
    os.chdir(ROOT)
    import django
    from django.core.management import call_command

    django.setup()
    if document_tokens is not None:  # the prefix term_frequencies indexes, for this process only
        from artifacts.recall import tokenize

        tokenize.RECALL_MAX_DOCUMENT_TOKENS = document_tokens
    call_command("migrate", verbosity=0, interactive=False)
    from artifacts import services
    from artifacts.services import EntryVersionWrite

    config = SETTINGS[mode]
    scope = services.scope_create(scope_id=SCOPE)
    serial = iter(range(10**6))

    def create(body) -> callable:
        def write(n: int) -> None:
            number = next(serial)
            services.memory_revision_create(
                scope=scope,
                artifact_id=f"create-{number}",
                writes=[EntryVersionWrite("entry", None, body(number))],
                author="bench",
            )

        return write

    def update(label: str, body) -> callable:
        services.memory_revision_create(
            scope=scope, artifact_id=label, writes=[EntryVersionWrite("entry", None, body(10**6))], author="bench"
        )

        def write(n: int) -> None:
            services.memory_revision_create(
                scope=scope, artifact_id=label, writes=[EntryVersionWrite("entry", None, body(n))], author="bench"
            )

        return write

    bodies = {n: large_body(n) for n in range(config["large"] + 1)} | {10**6: large_body(10**6)}

    def large(n: int) -> str:
        return bodies.get(n) or large_body(n)

    create(small_body)(0)  # warm-up: connection, statements, caches
    result = {
        "small_create": _median_ms(create(small_body), config["small"]),
        "small_update": _median_ms(update("small", small_body), config["small"]),
        "large_create": _median_ms(create(large), config["large"]),
        "large_update": _median_ms(update("large", large), config["large"]),
    }
    Path(out).write_text(json.dumps(result), encoding="utf-8")


# --- parent ------------------------------------------------------------------------------------------


def run_engine(engine: str, mode: str, statement_timeout: int | None, document_tokens: int | None) -> dict:
    with common.throwaway_database(engine, "large_writes") as url, tempfile.TemporaryDirectory() as io_dir:
        out = Path(io_dir) / "result.json"
        if statement_timeout and engine == "postgresql":
            url += f"?options=-c%20statement_timeout%3D{statement_timeout * 1000}"
        env = common.django_env(url) | {"PYTHONUNBUFFERED": "1"}
        command = [sys.executable, str(Path(__file__).resolve()), "--child", "--mode", mode, "--out", str(out)]
        if document_tokens is not None:
            command += ["--document-tokens", str(document_tokens)]
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        return json.loads(out.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="fewer repetitions: a quick check that it runs")
    parser.add_argument("--engines", default=",".join(common.ENGINES), help="comma-separated (default: both)")
    parser.add_argument("--statement-timeout", type=int, help="PostgreSQL: cancel a statement after SECONDS")
    parser.add_argument(
        "--document-tokens", type=int, help="index this many terms of a document instead of RECALL_MAX_DOCUMENT_TOKENS"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=tuple(SETTINGS), default="full", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.mode, args.out, args.document_tokens)
        return
    mode = "smoke" if args.smoke else "full"
    rows = []
    for engine in args.engines.split(","):
        if engine == "postgresql" and not common.postgres_available():
            continue
        common.log(f"{engine}: start ({mode})")
        r = run_engine(engine, mode, args.statement_timeout, args.document_tokens)
        for kind in ("create", "update"):
            small, large = r[f"small_{kind}"], r[f"large_{kind}"]
            label = common.ENGINE_LABELS[engine]
            if large is None:
                rows.append([label, kind, f"{small:.1f}", f"> {args.statement_timeout * 1000} (cancelled)", "n/a"])
            else:
                rows.append([label, kind, f"{small:.1f}", f"{large:.1f}", common.fmt_ratio(large / small)])
    repetitions = SETTINGS[mode]
    from vocabulary.limits import RECALL_MAX_DOCUMENT_TOKENS

    indexed = args.document_tokens if args.document_tokens is not None else RECALL_MAX_DOCUMENT_TOKENS
    print(
        common.Table(
            f"A 65,536-character CJK memory write against a 1 KB one ({mode})",
            ["engine", "write", "1 KB ms", "64K CJK ms", "ratio"],
            rows,
            [
                f"Median of {repetitions['small']} (1 KB) and {repetitions['large']} (64K CJK) writes through "
                "memory_revision_create, one revision each; issue 34's target: ratio at most 25x.",
                f"Indexed: each document's first {indexed:,} terms.",
                common.machine_description(),
            ],
        ).text()
    )


if __name__ == "__main__":
    main()
