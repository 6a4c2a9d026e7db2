"""Dense ranking and the stored encoding (pure numpy)."""

import numpy as np
import pytest

from artifacts.recall.vectors.ranking import VectorRefused, decode, dense_rank, encode, normalized


def test_a_stored_vector_comes_back_unit_length_within_half_float_precision():
    stored = encode([3.0, 4.0, 0.0], 3)

    assert len(stored) == 6
    np.testing.assert_allclose(decode([stored], 3)[0], [0.6, 0.8, 0.0], atol=1e-3)


def test_a_vector_of_another_dimension_or_not_finite_is_refused():
    with pytest.raises(VectorRefused):
        encode([1.0, 2.0], 3)
    with pytest.raises(VectorRefused):
        encode([1.0, float("nan"), 0.0], 3)
    with pytest.raises(VectorRefused):
        decode([encode([1.0, 0.0, 0.0], 3)[:-1]], 3)


def test_a_zero_vector_stays_zero():
    assert normalized([0.0, 0.0], 2).tolist() == [0.0, 0.0]


def test_documents_rank_by_cosine_best_first():
    matrix = decode([encode(v, 2) for v in ([1, 0], [0, 1], [1, 1])], 2)

    ranked = dense_rank([2.0, 0.1], matrix, [7, 8, 9], 3)

    assert [document_id for document_id, _ in ranked] == [7, 9, 8]
    assert ranked[0][1] == pytest.approx(0.9988, abs=1e-3)


def test_ties_go_to_the_lower_document_id_even_at_the_cut():
    matrix = decode([encode([1, 0], 2)] * 5, 2)

    assert [d for d, _ in dense_rank([1, 0], matrix, [50, 10, 40, 20, 30], 2)] == [10, 20]
    assert [d for d, _ in dense_rank([1, 0], matrix, [50, 10, 40, 20, 30], 9)] == [10, 20, 30, 40, 50]


def test_nothing_to_rank_ranks_nothing():
    assert dense_rank([1, 0], np.zeros((0, 2), dtype=np.float32), [], 5) == []
    assert dense_rank([1, 0], decode([encode([1, 0], 2)], 2), [1], 0) == []
