"""The selection policy's cost: POST /v1/context/prepare without and with ``selection``, side by side, both engines.

    python bench/selection.py [--n 1000] [--queries 3000] [--warm 600] [--engines sqlite,postgresql]

Per engine, in a throwaway database: bulk-load the synthetic dataset of size N (``bench.datagen``: a current
scope with N memory entries and N/10 experiences, three referenced scopes of N/10 memory entries), give the
scopes operator tiers (current: current_turn, ref1: workspace_override, the others none: user_default) and every
memory entry one of 24 conflict slots (so that slots collide in most pools), then send each query three times
through Django's WSGI handler with the prepare log off: without the policy, with ``{"policy": "authority-v1",
"min_score": 0.2}``, and with the same plus ``"max_tokens": 1200``, rotating which goes first. Two passes of new
queries: the first right after loading (what a fresh worker pays: the policy's per-text memos are still empty), the
steady one after ``--warm`` other queries in every mode (a worker that has served a while). Prints p50/p95 and the
p50 cost of each policy mode over the prepare without it, per pass.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.common import ENGINE_LABELS, percentile, worker_on_engines, wsgi_prepare

SLOTS = 24
WARM_SEED, STEADY_SEED = 101, 202
"""Seeds of the warm-up queries and of the steady pass's (``datagen.queries``): other queries than the first pass's."""
PHASE_FIRST, PHASE_STEADY = "first pass", "steady"
PHASES = (PHASE_FIRST, PHASE_STEADY)
QUERIES = 3000
"""New queries per pass: on this shared machine the p50 cost of a mode moved from run to run by ±2 points over 300,
±1.5 over 1,000 and about ±0.6 over 3,000 (a minute per engine)."""
WARM_QUERIES = 600
ASSEMBLY = {"sections": [{"family": "memory", "limit": 6}, {"family": "experience", "limit": 2}]}
MODES = {
    "none": None,
    "policy": {"policy": "authority-v1", "min_score": 0.2},
    "policy + tokens": {"policy": "authority-v1", "min_score": 0.2, "max_tokens": 1200},
}


def _slots_and_tiers(prefix: str) -> None:
    """Operator tiers on the scopes and a conflict slot on every memory entry version (written around the history
    guards, as the bulk load itself is: a benchmark database only)."""
    from django.db import connection, transaction

    from artifacts.immutability import install_triggers, uninstall_triggers
    from artifacts.models import MemoryEntryVersion, Scope

    Scope.objects.filter(scope_id=f"{prefix}:current").update(authority="current_turn")
    Scope.objects.filter(scope_id=f"{prefix}:ref1").update(authority="workspace_override")
    table = MemoryEntryVersion._meta.db_table
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL session_replication_role = replica")
        else:
            uninstall_triggers(connection)
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET conflict_key = 'slot:' || CAST(id % {SLOTS} AS TEXT)")
        if connection.vendor != "postgresql":
            install_triggers(connection)


def worker(config: dict) -> dict:
    """Runs inside ``bench/worker.py selection`` against a migrated throwaway database."""
    from artifacts import services
    from artifacts.models import PrepareLog, Scope
    from bench import datagen
    from infrastructure.conf import setting_set

    setting_set("POWERCONTEXT_PREPARE_LOG", False)
    vocab = datagen.vocabulary()
    datagen.bulk_load(datagen.dataset(config["n"], vocab=vocab), "bench")
    _slots_and_tiers("bench")
    scopes = list(Scope.objects.filter(scope_id__startswith="bench:"))
    _, key = services.api_key_create(name="bench", read_scopes=scopes, write_scopes=[])
    texts = datagen.queries(vocab, config["queries"])
    reasons: dict[str, int] = {}

    post = wsgi_prepare(key)

    def prepare(query: str, selection: dict | None) -> float:
        body = {"scope_id": "bench:current", "query": query, "max_bytes": 8000, "assembly": ASSEMBLY}
        if selection is not None:
            body["selection"] = selection
        return post(body)[1]

    names = list(MODES)

    def measured(queries: list[str]) -> dict[str, list[float]]:
        timings: dict[str, list[float]] = {name: [] for name in names}
        for i, query in enumerate(queries):
            rotation = names[i % len(names) :] + names[: i % len(names)]
            for name in rotation:
                timings[name].append(prepare(query, MODES[name]))
        return timings

    for query in texts[:10]:  # warm caches and connections
        for name in names:
            prepare(query, MODES[name])
    first = measured(texts)
    # Then other queries in every mode, until the per-text memos (normalized texts and slots, token units) have seen
    # the corpus as a long-running worker's have; then new queries again (never one recall has answered before).
    measured(datagen.queries(vocab, config["warm"], seed=WARM_SEED))
    steady = measured(datagen.queries(vocab, config["queries"], seed=STEADY_SEED))
    # What the policy decided over these queries (one more pass, through the runtime, to count reasons).
    from assembly.policy import SelectionPolicy
    from assembly.runtime import assembly_options_parse, context_prepare
    from operator_tools.views.inspect import AllScopesPrincipal

    options = assembly_options_parse(ASSEMBLY)
    for query in texts:
        outcome = context_prepare(
            principal=AllScopesPrincipal(),
            scope_id="bench:current",
            query=query,
            max_bytes=8000,
            options=options,
            selection=SelectionPolicy(min_score=0.2, max_tokens=1200),
        )
        for decision in outcome.result.decisions:
            reason = decision.reason or decision.outcome
            reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "timings": {
            phase: {k: {"p50": percentile(v, 50), "p95": percentile(v, 95), "n": len(v)} for k, v in timings.items()}
            for phase, timings in ((PHASE_FIRST, first), (PHASE_STEADY, steady))
        },
        "reasons": reasons,
        "logged": PrepareLog.objects.count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--warm", type=int, default=WARM_QUERIES, help="warm-up queries between the two passes")
    parser.add_argument("--engines", default="sqlite,postgresql")
    args = parser.parse_args()
    os.environ.setdefault("SECRET_KEY", "powercontext-bench-only-" + "k" * 40)
    print("| engine | pass | selection | p50 ms | p95 ms | p50 cost |")
    print("|---|---|---|---|---|---|")
    config = {"n": args.n, "queries": args.queries, "warm": args.warm}
    describe = f"N={args.n}, {args.queries} queries, without and with the policy"
    for engine, result in worker_on_engines(args.engines, "selection", config, describe=describe):
        for phase in PHASES:
            t = result["timings"][phase]
            for name in MODES:
                cost = "" if name == "none" else f"{t[name]['p50'] / t['none']['p50'] - 1:+.1%}"
                print(
                    f"| {ENGINE_LABELS[engine]} | {phase} | {name} | {t[name]['p50'] * 1000:.2f} | "
                    f"{t[name]['p95'] * 1000:.2f} | {cost} |"
                )
        print(f"decisions of the policy with tokens: {json.dumps(result['reasons'], sort_keys=True)}")


if __name__ == "__main__":
    main()
