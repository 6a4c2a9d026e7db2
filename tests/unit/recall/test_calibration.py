"""The calibration rule of the abstention floors (``artifacts.recall.calibration``): pure, no database."""

import pytest

from artifacts.recall.calibration import calibrated, quantile


def test_quantiles_interpolate_between_ranks_as_numpy_does():
    assert quantile([4, 1, 3, 2], 0.5) == 2.5
    assert quantile([1, 2, 3, 4, 5], 0.99) == pytest.approx(4.96)
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_the_lowest_cosine_that_empties_enough_unrelated_questions_is_chosen():
    unrelated = [(0.0, 0.20 + i / 1000) for i in range(100)]  # best cosines 0.20 .. 0.299
    related = [(0.5, 0.6), (0.0, 0.45)]  # one matched by words, one by meaning alone
    floors = calibrated(unrelated, related, [0.1] * 99 + [0.3], target=0.95)

    assert floors.unrelated_empty >= 0.95 and floors.related_lost == 0.0
    assert floors.abstain_cosine <= 0.31 and floors.abstain_share == 0.08  # the lowest share tried is enough
    assert floors.dense_floor == pytest.approx(0.1, abs=0.01)


def test_floors_that_would_lose_related_questions_are_not_chosen():
    unrelated = [(0.0, 0.5)] * 50
    related = [(0.0, 0.5)] * 10  # indistinguishable from the unrelated ones

    floors = calibrated(unrelated, related, [0.2] * 10, loss=0.0)

    assert floors.related_lost == 0.0 and floors.unrelated_empty == 0.0
    assert floors.abstain_share == 0.0  # no abstention
