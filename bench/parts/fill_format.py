"""Parts 4 and 6, budget fill and format cost on LoCoMo: the report side of ``bench/fill_format.py``'s worker."""

from __future__ import annotations

from pathlib import Path

from bench import common
from bench.common import ENGINE_LABELS, Table, fmt_ratio, log
from bench.parts.recall import FULL_LOCOMO, SMOKE_LOCOMO
from bench.report import Report, met


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
