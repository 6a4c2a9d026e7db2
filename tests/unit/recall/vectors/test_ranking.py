"""Dense ranking and the stored encoding (pure numpy)."""

import numpy as np
import pytest

from artifacts.recall.vectors.ranking import (
    QUANTIZED_CANDIDATES,
    VectorRefused,
    decode,
    decode_half,
    dense_rank,
    encode,
    normalized,
    quantize,
    quantized_rank,
    similarities,
)


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


def separated(count=3000, dimension=48, seed=5):
    """Stored (float16) unit rows and a query whose 100 nearest rows stand apart: row i of the first 100 at cosine
    about 0.99 - 0.004 i with the query, far beyond the int8 error (about 0.001), the others random (cosine near 0)."""
    rng = np.random.default_rng(seed)
    query = normalized(rng.standard_normal(dimension), dimension)
    rows = rng.standard_normal((count, dimension))
    for i in range(100):
        cosine = 0.99 - 0.004 * i
        other = rows[i] - (rows[i] @ query) * query
        rows[i] = cosine * query + np.sqrt(1 - cosine**2) * other / np.linalg.norm(other)
    order = rng.permutation(count)
    half = decode_half([encode(row, dimension) for row in rows[order]], dimension)
    return query, half, rng.permutation(np.arange(10, 10 + 7 * count, 7))


def test_int8_codes_times_their_scale_give_back_each_row_within_half_a_step():
    query, half, _ = separated(count=200)
    codes, scales = quantize(half)

    assert codes.dtype == np.int8 and np.abs(codes).max() == 127
    error = np.abs(codes * scales[:, None] - half.astype(np.float32))
    assert (error <= scales[:, None] / 2 + 1e-7).all()


def test_a_zero_row_quantizes_to_zero_and_scores_zero():
    codes, scales = quantize(np.zeros((2, 4), dtype=np.float16))

    assert codes.tolist() == [[0] * 4] * 2 and scales.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("limit", [1, 16, 64])
def test_on_well_separated_vectors_the_two_passes_rank_exactly_as_the_exact_scan(limit):
    query, half, ids = separated()

    expected = dense_rank(query, half.astype(np.float32), ids, limit)
    ranked = quantized_rank(query, *quantize(half), half, ids, limit)

    assert [document for document, _ in ranked] == [document for document, _ in expected]
    assert [cosine for _, cosine in ranked] == pytest.approx([cosine for _, cosine in expected], abs=1e-6)


def test_ties_go_to_the_lower_document_id_even_beyond_the_first_pass_cut():
    count = QUANTIZED_CANDIDATES * 10  # all equal: every row ties at the first pass's cut and is rescored
    half = decode_half([encode([1, 2, 3], 3)] * count, 3)
    ids = np.random.default_rng(3).permutation(np.arange(1, count + 1))

    ranked = quantized_rank([1, 2, 3], *quantize(half), half, ids, 5)

    assert [document for document, _ in ranked] == [1, 2, 3, 4, 5]
    assert ranked == dense_rank([1, 2, 3], half.astype(np.float32), ids, 5)


def test_the_two_passes_rank_nothing_when_there_is_nothing_to_rank():
    half = decode_half([encode([1, 0], 2)], 2)

    assert quantized_rank([1, 0], *quantize(half[:0]), half[:0], [], 5) == []
    assert quantized_rank([1, 0], *quantize(half), half, [1], 0) == []


def test_similarities_give_each_wanted_documents_exact_cosine_by_id_skipping_those_without_a_vector():
    rows = decode([encode(v, 2) for v in ([1, 0], [0, 1], [1, 1])], 2)
    ids = np.array([3, 7, 9], dtype=np.int64)
    unit = normalized([1, 0], 2)

    scored = similarities(unit, rows, ids, [9, 4, 3, 9, 12])

    assert [document for document, _ in scored] == [3, 9]
    np.testing.assert_allclose([cosine for _, cosine in scored], [1.0, 2**-0.5], atol=1e-3)
    assert similarities(unit, rows, ids, []) == []


def test_similarities_from_float16_rows_equal_the_float32_copys():
    rng = np.random.default_rng(5)
    blobs = [encode(v, 16) for v in rng.normal(size=(40, 16))]
    ids = np.arange(0, 80, 2, dtype=np.int64)
    unit = normalized(rng.normal(size=16), 16)

    assert similarities(unit, decode_half(blobs, 16), ids, [0, 10, 78]) == similarities(
        unit, decode(blobs, 16), ids, [0, 10, 78]
    )
