"""Part 11, the selection policy's cost: the report side of ``bench/selection.py``'s worker."""

from __future__ import annotations

from bench import common
from bench.common import ENGINE_LABELS, Table, fmt_ms, log
from bench.report import Report, met

SELECTION_COST_GOAL = 0.10
"""The selection policy's prepare p50 at most this much over the same prepare without it (issue 35)."""


def part_selection(report: Report, engines: list[str], smoke: bool) -> None:
    from bench import selection

    config = {"n": 1000, "queries": 20 if smoke else selection.QUERIES, "warm": 20 if smoke else selection.WARM_QUERIES}
    rows, goals, notes = [], [], []
    for engine in engines:
        log(f"selection policy on {ENGINE_LABELS[engine]}")
        with common.throwaway_database(engine, "selection") as url:
            result = common.run_worker("selection", url, config)
        label = ENGINE_LABELS[engine]
        for phase in selection.PHASES:
            t = result["timings"][phase]
            for name in selection.MODES:
                cost = t[name]["p50"] / t["none"]["p50"] - 1
                rows.append(
                    [label, phase, name, str(t[name]["n"]), fmt_ms(t[name]["p50"]), fmt_ms(t[name]["p95"])]
                    + ["" if name == "none" else f"{cost:+.1%}"]
                )
                if name != "none":
                    goals.append(
                        f"{label}, {phase}: prepare with the policy ({name}) at most {SELECTION_COST_GOAL:.0%} slower "
                        f"at p50: {cost:+.1%}: {met(cost <= SELECTION_COST_GOAL)}"
                    )
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in sorted(result["reasons"].items()))
        notes.append(f"{label}: decisions of the policy with tokens over the queries: {reasons}")
    table = Table(
        f"Prepare without and with the selection policy ({config['n']:,} memory entries, {config['queries']} new "
        f"queries per pass, rotating; {config['warm']} others in between)",
        ["engine", "pass", "selection", "requests", "p50 ms", "p95 ms", "p50 cost"],
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
Two passes of new queries (none that recall has answered before): the first right after the load, what a fresh
worker pays (the policy's per-text memos, normalized texts and token units, are still empty), the steady one after
{config["warm"]} other queries in every mode, a worker that has served a while.
`bench/selection.py` runs this part alone. Printed, not asserted: the machine is shared (see the load average).
"""
    report.add("11. Selection policy cost", intro, [table], goals)
