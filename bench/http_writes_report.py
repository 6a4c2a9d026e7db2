"""The tables ``bench/http_writes.py`` prints, and what it measures: its modes, bodies and client counts."""

from __future__ import annotations

from bench import common

MODES = ("lexical", "hybrid", "deferred")
"""Lexical recall, hybrid with vectors embedded in the write (inline), hybrid with vectors embedded after it."""
BODIES = ("1 KB", "4,096 words", "65,536 CJK")
LONG_WRITERS = 4
THROUGHPUT_CLIENTS = 8


def ms(values: list[float], q: float) -> str:
    return f"{common.percentile(values, q):,.0f}"


def tables(results: dict, size: dict) -> list[common.Table]:
    """The four tables of a run, every engine's rows side by side."""
    latency, beside, totals, drains, verdicts = [], [], [], [], []
    embedded = MODES[1:]
    for engine, result in results.items():
        label = common.ENGINE_LABELS[engine]
        times = result["latency"]
        for name in BODIES:
            row = [label, name, *(f"{ms(times[mode][name], 50)} / {ms(times[mode][name], 99)}" for mode in MODES)]
            lexical = common.percentile(times["lexical"][name], 50)
            row += [f"{common.percentile(times[mode][name], 50) / lexical:.2f}×" for mode in embedded]
            latency.append(row)
        for mode in MODES[::-1]:
            got = result["beside"][mode]
            (idle_prepares, idle_writes), (prepares, writes) = got["idle"], got["loaded"]
            share = common.percentile(prepares, 99) / common.percentile(idle_prepares, 99)
            beside.append(
                [
                    label,
                    mode,
                    ms(idle_prepares, 99),
                    ms(prepares, 99),
                    f"{share:.2f}×",
                    ms(idle_writes, 99),
                    ms(writes, 99),
                    str(got["long_writes"]),
                    str(got["503"]),
                    str(got["failed"]),
                ]
            )
            if mode in embedded:
                verdicts.append(
                    f"{label} {mode} (b): prepare p99 {share:.2f}× idle (target ≤ 3×: "
                    f"{'met' if share <= 3 else 'missed'}), {got['503']} 503s (target none: "
                    f"{'met' if got['503'] == 0 else 'missed'})"
                )
        rates = {mode: [rate for rate, _ in result["throughput"][mode]] for mode in MODES}
        medians = {mode: sorted(rates[mode])[len(rates[mode]) // 2] for mode in MODES}
        failed = sum(other for mode in MODES for _, other in result["throughput"][mode])
        shares = {mode: medians[mode] / medians["lexical"] for mode in embedded}
        cjk = {
            mode: common.percentile(times[mode]["65,536 CJK"], 50) / common.percentile(times[mode]["1 KB"], 50)
            for mode in embedded
        }
        totals.append(
            [
                label,
                *(f"{medians[mode]:,.1f}" for mode in MODES),
                *(f"{shares[mode]:.0%}" for mode in embedded),
                *(" / ".join(f"{rate:,.1f}" for rate in rates[mode]) for mode in embedded),
                str(failed),
                *(f"{cjk[mode]:.1f}×" for mode in embedded),
            ]
        )
        for mode in embedded:
            verdicts.append(
                f"{label} {mode} (c): {shares[mode]:.0%} of lexical writes/s (target ≥ 70 %: "
                f"{'met' if shares[mode] >= 0.7 else 'missed'}); (d) 65,536 CJK / 1 KB {cjk[mode]:.1f}× (target ≤ "
                f"25×: {'met' if cjk[mode] <= 25 else 'missed'})"
            )
        for drain in result["drains"]:
            rate = drain["backlog"] / drain["seconds"] if drain["seconds"] > 0 else 0.0
            drains.append(
                [
                    label,
                    drain["phase"],
                    str(drain["backlog"]),
                    f"{drain['seconds']:,.1f}",
                    f"{rate:,.1f}",
                    str(drain["left"]),
                ]
            )
    writes = size["writes"]
    machine = common.machine_description()
    return [
        common.Table(
            "(a) Write latency over HTTP, lexical against hybrid recall (inline and deferred vectors)",
            [
                "engine",
                "body",
                *(f"{mode} p50 / p99 ms" for mode in MODES),
                *(f"{mode}/lexical" for mode in embedded),
            ],
            latency,
            [
                "POST /v1/memory/entries, one at a time, the modes alternating: "
                + ", ".join(f"{writes[name]} of {name}" for name in BODIES)
                + " per mode; the ratios are of the p50s. Not 2xx in the warm-up and (a): "
                + ", ".join(f"{common.ENGINE_LABELS[e]} {r['latency_failed']}" for e, r in results.items())
                + ".",
                machine,
            ],
        ),
        common.Table(
            f"(b) Another tenant beside {LONG_WRITERS} clients writing 65,536-character CJK entries",
            [
                "engine",
                "recall",
                "prepare p99 idle ms",
                "prepare p99 loaded ms",
                "loaded/idle",
                "1 KB write p99 idle ms",
                "1 KB write p99 loaded ms",
                "long writes",
                "503s",
                "not 2xx",
            ],
            beside,
            [
                f"{size['probes']} prepares and {size['probes']} 1 KB writes of the other tenant, in turn, idle then "
                f"loaded; long writes: those answered while loaded; 503s and not 2xx: of every request then."
            ],
        ),
        common.Table(
            "(c) Writes per second over HTTP and (d) the long write's cost",
            [
                "engine",
                *(f"{mode} writes/s" for mode in MODES),
                *(f"{mode}/lexical" for mode in embedded),
                *(f"{mode} rounds" for mode in embedded),
                "not 201",
                *(f"(d) {mode} 64K CJK / 1 KB p50" for mode in embedded),
            ],
            totals,
            [
                f"{THROUGHPUT_CLIENTS} clients writing 1 KB entries, {size['rounds']} rounds of {size['seconds']} s "
                "per mode, the order reversed every other round; the median round.",
                *verdicts,
            ],
        ),
        common.Table(
            "(e) Deferred vectors: the backlog after each phase and the seconds until it is 0",
            ["engine", "after", "backlog", "seconds to 0", "documents/s", "left at timeout"],
            drains,
            ["Documents without a vector in the deferred server's database, polled every 0.1 s."],
        ),
    ]
