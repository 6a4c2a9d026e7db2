"""Part 8, prepare log cost: the report side of ``bench/prepare_log.py``'s worker."""

from __future__ import annotations

from bench import common
from bench.common import ENGINE_LABELS, Table, fmt_ms, log
from bench.report import Report, met


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
