"""Part 10, many tenants: the report side of ``bench/tenants.py``'s worker."""

from __future__ import annotations

from bench import common
from bench.common import ENGINE_LABELS, Table, fmt_ms, fmt_ratio, log
from bench.report import Report, met

FULL_TENANTS = (10_000, 100)  # tenant scopes x memory entries each: 1M documents (issue 15)
SMOKE_TENANTS = (200, 20)  # enough rows that PostgreSQL plans index reads, as at full size
TENANTS_FLAT = 1.25
"""Many-tenant prepare p50 at most this multiple of the near-empty database's (issue 15: flat)."""


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
