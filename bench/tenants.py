"""Part 10: a prepare on one small scope, on a near-empty database and among many tenants.

One database per engine. First the probe, the latency part's dataset at N=100 (``bench.datagen``: a
current scope of 100 memory entries and 10 experiences, referencing three scopes of 10 entries), is
bulk-loaded alone and in-process ``context_prepare`` (default assembly, max_bytes 8000) is timed on it for
the latency part's queries. Then many independent tenant scopes (``datagen.tenants``, the same vocabulary)
are bulk-loaded into the same database and the same prepares are timed again, in the same order. In both
phases an untimed pass first captures each prepare's SQL statements (their count, and the prepared content,
must not change) and warms the pages the queries read; after the tenants' load every captured SELECT is
explained to check that it reads each table of more than 1,000 rows by primary key or through an index whose
first column is the scope.
"""

from __future__ import annotations

import json
import re
import time

from bench import datagen
from bench.common import log
from bench.latency import AllowAll, _stats

MAX_TIMED_SECONDS = 300
PROBE_N = 100
LARGE_TABLE_ROWS = 1000
"""A table with more rows than this after the tenants' load must be read through an index condition."""
EARLY_STOP_ROWS = 100
"""PostgreSQL: an unconditioned scan of a large table that read at most this many rows stopped at once (the inner
side of a merge join on ids the planner knows are low), which bounds it like an index condition."""
_TABLE = re.compile(r'\b(?:FROM|JOIN)\s+"?(\w+)"?(?:\s+(?:AS\s+)?"?(\w+)"?)?', re.IGNORECASE)
_KEYWORDS = {"on", "where", "join", "inner", "left", "cross", "group", "order", "limit", "using", "union", "natural"}


def _captured(function, query: str) -> tuple[object, list[tuple[str, object]]]:
    """``function(query)``'s value and the SQL statements (with their parameters) it ran."""
    from django.db import connection

    statements: list[tuple[str, object]] = []

    def record(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        value = function(query)
    return value, statements


def _large_tables() -> set[str]:
    from django.db import connection

    large = set()
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(
                f"SELECT COUNT(*) FROM (SELECT 1 FROM {connection.ops.quote_name(table)} LIMIT %s) t",
                [LARGE_TABLE_ROWS + 1],
            )
            if cursor.fetchone()[0] > LARGE_TABLE_ROWS:
                large.add(table)
    return large


def _aliases(sql: str, tables: set[str]) -> dict[str, str]:
    """Alias (or name) -> table for the real tables a statement names after FROM or JOIN."""
    aliases = {}
    for table, alias in _TABLE.findall(sql):
        if table in tables:
            aliases[table] = table
            if alias and alias.lower() not in _KEYWORDS:
                aliases[alias] = table
    return aliases


def _index(cursor, vendor: str, name: str) -> tuple[str, str, bool]:
    """(table, first column, primary key?) of an index."""
    if vendor == "sqlite":
        cursor.execute("SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = %s", [name])
        table = cursor.fetchone()[0]
        cursor.execute(f'PRAGMA index_info("{name}")')
        return table, cursor.fetchone()[2], False
    cursor.execute(
        "SELECT c.relname, a.attname, i.indisprimary FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid "
        "JOIN pg_class c ON c.oid = i.indrelid JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0] "
        "WHERE x.relname = %s",
        [name],
    )
    return cursor.fetchone()


def unbounded_reads(sql: str, params, large: set[str], all_tables: set[str]) -> list[str]:
    """How ``sql``'s plan reads a large table other than by primary key or a scope-leading index condition
    (an empty list: every large table is read through one of them). SQLite: the plan of EXPLAIN QUERY PLAN;
    PostgreSQL: EXPLAIN ANALYZE's, where a scan that read at most EARLY_STOP_ROWS rows passes too."""
    from django.db import connection

    vendor = connection.vendor
    offenders = []
    with connection.cursor() as cursor:
        if vendor == "sqlite":
            aliases = _aliases(sql, all_tables)
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            for detail in [row[-1] for row in cursor.fetchall()]:
                match = re.match(r"(SCAN|SEARCH) (?:TABLE )?(\w+)(.*)", detail)
                if not match or aliases.get(match[2], match[2]) not in large:
                    continue
                index = re.search(r"USING (?:COVERING )?INDEX (\w+)", match[3])
                if match[1] == "SEARCH" and (
                    "INTEGER PRIMARY KEY" in match[3] or (index and _index(cursor, vendor, index[1])[1] == "scope_id")
                ):
                    continue
                offenders.append(f"{aliases.get(match[2], match[2])}: {detail}")
        else:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
            nodes = [(json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]]
            while nodes:
                node = nodes.pop()
                nodes += node.get("Plans", [])
                kind = node["Node Type"]
                read = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
                if "Index Name" in node:
                    table, first, primary = _index(cursor, vendor, node["Index Name"])
                    bounded = "Index Cond" in node and (primary or first == "scope_id")
                    if table in large and not bounded and read > EARLY_STOP_ROWS:
                        offenders.append(f"{table}: {kind} on {node['Index Name']}")
                elif node.get("Relation Name") in large and kind == "Seq Scan" and read > EARLY_STOP_ROWS:
                    offenders.append(f"{node['Relation Name']}: {kind}")
    return offenders


def worker(config: dict) -> dict:
    from django.db import connection

    from artifacts.recall import resident
    from assembly.runtime import assembly_options_parse, context_prepare

    result: dict = {"scopes": config["scopes"], "entries": config["entries"], "probe_n": PROBE_N}
    vocab = datagen.vocabulary()
    probe = datagen.dataset(PROBE_N, vocab=vocab)
    datagen.check_term_frequencies(probe, samples=20)
    result["probe_counts"] = datagen.bulk_load(probe, "probe")["counts"]
    scope_id = probe.scope_ids("probe")[0]
    del probe
    options = assembly_options_parse({})
    principal = AllowAll()
    texts = datagen.queries(vocab, config["queries"])

    def prepare(query: str):
        return context_prepare(principal=principal, scope_id=scope_id, query=query, max_bytes=8000, options=options)

    def measure() -> dict:
        # Both phases start without copies of the probe's postings in memory: the first query ranks in SQL
        # (its statements are explained below), the second loads the copies, the rest rank from them.
        resident.COPIES.clear()
        contents, statements = [], []
        for query in texts:  # untimed, first: capturing costs time of its own, and it warms every query's pages
            outcome, captured = _captured(prepare, query)
            contents.append(outcome.result.content)
            statements.append(captured)
        samples: list[float] = []
        deadline = time.perf_counter() + MAX_TIMED_SECONDS
        for query in texts * config["rounds"]:  # a few rounds: a burst of the machine's other work weighs less
            if time.perf_counter() > deadline:
                break
            begin = time.perf_counter()
            prepare(query)
            samples.append(time.perf_counter() - begin)
        return {"samples": samples, "contents": contents, "statements": statements}

    empty = measure()
    log(f"tenants: probe timed on the near-empty database, p50 {_stats(empty['samples'])['p50'] * 1000:.2f} ms")

    started = time.perf_counter()
    data = datagen.tenants(config["scopes"], config["entries"], vocab=vocab)
    result["generate_seconds"] = time.perf_counter() - started
    load = datagen.bulk_load(data, "tenant")
    result["load_seconds"], result["counts"] = load["seconds"], load["counts"]
    del data
    if connection.vendor == "postgresql":
        # What autovacuum would start on the freshly inserted tables now: done before timing, not during it.
        started = time.perf_counter()
        connection.ensure_connection()
        connection.connection.execute("VACUUM")
        result["vacuum_seconds"] = time.perf_counter() - started
        log(f"tenants: vacuumed in {result['vacuum_seconds']:.0f}s")
    log(
        f"tenants: {config['scopes']:,} scopes x {config['entries']} entries generated in "
        f"{result['generate_seconds']:.0f}s, loaded in {result['load_seconds']:.0f}s"
    )
    many = measure()

    timed = min(len(empty["samples"]), len(many["samples"]))  # the same prepares timed in both phases
    counts_empty = [len(s) for s in empty["statements"]]
    counts_many = [len(s) for s in many["statements"]]
    large = _large_tables()
    all_tables = set(connection.introspection.table_names())
    offenders: dict[str, int] = {}
    explained = 0
    for statements in many["statements"]:
        for sql, params in statements:
            if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            explained += 1
            for offender in unbounded_reads(sql, params, large, all_tables):
                offenders[offender] = offenders.get(offender, 0) + 1
    result.update(
        {
            "queries": len(texts),
            "timed": timed,
            "empty": _stats(empty["samples"][:timed]),
            "many": _stats(many["samples"][:timed]),
            "statements_min": min(counts_many),
            "statements_max": max(counts_many),
            "same_statement_counts": counts_empty == counts_many,
            "identical_content": empty["contents"] == many["contents"],
            "large_tables": sorted(large),
            "explained": explained,
            "unbounded_reads": offenders,
        }
    )
    return result
