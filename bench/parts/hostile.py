"""Part 7, hostile requests: the report side of ``bench/hostile.py``'s and ``bench/hostile_references.py``'s workers."""

from __future__ import annotations

from bench import common
from bench.common import ENGINE_LABELS, Table, fmt_ms, fmt_ratio, log
from bench.report import Report, met

FULL_HOSTILE = {"entries": 24, "entry_characters": 20_000, "repetitions": 7, "write_repetitions": 3}
SMOKE_HOSTILE = {"entries": 3, "entry_characters": 2_000, "repetitions": 2, "write_repetitions": 1}
FULL_REFERENCES = {"entries": 20, "entry_characters": 200, "repetitions": 9}
SMOKE_REFERENCES = {"entries": 2, "entry_characters": 50, "repetitions": 1}
"""Part 7's scope of 64 references: memory entries per reference, their CJK characters (issue 34, point 5)."""


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
