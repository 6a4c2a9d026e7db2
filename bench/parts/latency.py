"""Part 2, prepare latency and growth: the report side of ``bench/latency.py``'s worker."""

from __future__ import annotations

from bench import common
from bench.common import ENGINE_LABELS, Table, fmt_ms, fmt_ratio, log
from bench.report import Report, met


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
