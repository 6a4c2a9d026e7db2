"""Part 2: in-process prepare latency versus the engine's own bare full-text top-16 query.

Per size N: bulk-load the synthetic dataset (``bench.datagen``), build the floor index over the same
memory texts (SQLite: an FTS5 table, ``tokenize='porter unicode61'``, the scope as an indexed token,
``ORDER BY bm25()``; PostgreSQL: a GIN-indexed ``tsvector`` with the scope as a lexeme, ``ts_rank``), then
time, query by query and alternating which goes first, ``context_prepare`` with the default assembly
(``{}`` -> memory 6, experience 2; max_bytes 8000) and the floor query for the same query and scope.
Also timed: PowerContext's own top-16 memory query for the current scope alone (the floor's equivalent).
"""

from __future__ import annotations

import re
import time

from bench import datagen
from bench.common import log, percentile

MAX_TIMED_SECONDS = 420
_WORD = re.compile(r"\w+")


class AllowAll:
    def can_read(self, scope) -> bool:
        return True


def _build_floor(writer, scope_pks: list[int]) -> float:
    started = time.perf_counter()
    marks = ", ".join(str(pk) for pk in scope_pks)
    source = (
        "FROM artifacts_recalldocument d JOIN artifacts_memoryentryversion v ON v.id = d.entry_version_id "
        f"WHERE d.family = 'memory' AND d.scope_id IN ({marks})"
    )
    if writer.vendor == "sqlite":
        writer.execute("CREATE VIRTUAL TABLE bench_floor USING fts5(scope, body, tokenize='porter unicode61')")
        writer.execute(
            f"INSERT INTO bench_floor (rowid, scope, body) SELECT d.id, 'pcscope' || d.scope_id, v.body {source}"
        )
        writer.execute("INSERT INTO bench_floor (bench_floor) VALUES ('optimize')")
    else:
        writer.execute("CREATE TABLE bench_floor (id bigint PRIMARY KEY, tsv tsvector NOT NULL)")
        writer.execute(
            "INSERT INTO bench_floor (id, tsv) SELECT d.id, "
            f"to_tsvector('simple', 'pcscope' || d.scope_id) || to_tsvector('english', v.body) {source}"
        )
        writer.execute("SET maintenance_work_mem = '1GB'")
        writer.execute("CREATE INDEX bench_floor_tsv ON bench_floor USING gin (tsv)")
        writer.execute("ANALYZE bench_floor")
    writer.raw.commit()
    return time.perf_counter() - started


def _floor_query(vendor: str, scope_pk: int, query: str) -> tuple[str, tuple]:
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    if vendor == "sqlite":
        match = f'scope:"pcscope{scope_pk}" AND (' + " OR ".join(f'"{w}"' for w in words) + ")"
        return (
            "SELECT rowid FROM bench_floor WHERE bench_floor MATCH %s ORDER BY bm25(bench_floor, 0.0, 1.0), rowid "
            "LIMIT 16",
            (match,),
        )
    return (
        "SELECT id FROM bench_floor, (SELECT to_tsquery('simple', %s) && to_tsquery('english', %s) AS q) query "
        "WHERE tsv @@ q ORDER BY ts_rank(tsv, q) DESC, id LIMIT 16",
        (f"pcscope{scope_pk}", " | ".join(words)),
    )


def _stats(samples: list[float]) -> dict:
    return {"p50": percentile(samples, 50), "p95": percentile(samples, 95), "n": len(samples)}


def worker(config: dict) -> dict:
    from django.db import connection

    from artifacts.models import Scope
    from assembly.runtime import assembly_options_parse, context_prepare
    from bench import rankings

    n = config["n"]
    result: dict = {"n": n}
    vocab = datagen.vocabulary()
    if config.get("verify_n"):
        small = datagen.dataset(config["verify_n"], vocab=vocab)
        datagen.check_term_frequencies(small)
        datagen.bulk_load(small, "verify-bulk")
        started = time.perf_counter()
        datagen.services_load(small, "verify-services")
        result["verify_services_seconds"] = time.perf_counter() - started
        result["verify"] = datagen.compare_stores(
            small, "verify-bulk", "verify-services", datagen.queries(vocab, 100, seed=7)
        )
        result["verify"]["n"] = config["verify_n"]
        log(f"bulk vs services at N={config['verify_n']}: {result['verify']}")

    started = time.perf_counter()
    data = datagen.dataset(n, vocab=vocab)
    datagen.check_term_frequencies(data, samples=50)
    result["generate_seconds"] = time.perf_counter() - started
    load = datagen.bulk_load(data, "bench")
    result["load_seconds"], result["counts"] = load["seconds"], load["counts"]
    del data
    scope_ids = [f"bench:{suffix}" for suffix in ("current", "ref1", "ref2", "ref3")]
    scopes = {s.scope_id: s for s in Scope.objects.filter(scope_id__in=scope_ids)}
    current = scopes["bench:current"]
    writer = datagen._Writer(connection)
    result["floor_build_seconds"] = _build_floor(writer, [scopes[s].pk for s in scope_ids])
    log(f"N={n}: data loaded in {result['load_seconds']:.0f}s, floor built in {result['floor_build_seconds']:.0f}s")

    options = assembly_options_parse({})
    principal = AllowAll()
    texts = datagen.queries(vocab, config["queries"])

    def prepare(query: str):
        return context_prepare(
            principal=principal, scope_id=current.scope_id, query=query, max_bytes=8000, options=options
        )

    def floor(query: str):
        sql, params = _floor_query(connection.vendor, current.pk, query)
        if connection.vendor == "postgresql":
            # Planned for its own tsquery every time, as an ad hoc full-text query is: once psycopg prepared it,
            # PostgreSQL's generic plan could not see the query's selectivity (measured 5-10x slower).
            with connection.connection.cursor() as cursor:
                cursor.execute(sql, params, prepare=False)
                return cursor.fetchall()
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def ours_top16(query: str):
        return rankings.bm25_top_documents(scope_pk=current.pk, family="memory", query=query, limit=16)

    for query in texts[:5]:  # warm caches and connections
        prepare(query), floor(query), ours_top16(query)
    timings: dict[str, list[float]] = {"prepare": [], "floor": [], "ours_top16": []}
    statuses = {"ready": 0, "empty": 0}
    bytes_total = 0
    deadline = time.perf_counter() + MAX_TIMED_SECONDS
    order = (("prepare", prepare), ("floor", floor), ("ours_top16", ours_top16))
    for i, query in enumerate(texts):
        if time.perf_counter() > deadline:
            break
        rotation = order[i % 3 :] + order[: i % 3]
        for name, function in rotation:
            begin = time.perf_counter()
            value = function(query)
            timings[name].append(time.perf_counter() - begin)
            if name == "prepare":
                statuses[value.result.status] += 1
                bytes_total += value.result.content_bytes
    result["timings"] = {name: _stats(samples) for name, samples in timings.items()}
    result["statuses"] = statuses
    result["mean_content_bytes"] = bytes_total / max(1, len(timings["prepare"]))
    result["queries_planned"] = len(texts)
    return result
