"""Calibrating the abstention floors of ``fusion.gate`` for a model: one rule for the benchmark that chose the shipped
floors (``bench/ranker_study.py``) and the command an operator runs for their own model and data
(``manage.py recall_calibrate``).

Pure (standard library only). The inputs are plain numbers measured by recall itself: per question asked of a scope,
its best lexical share (the best BM25 match's share of the query's lexical bound, 0 without a match) and its best
cosine; and the cosines of every (unrelated question, document) pair.

- ``abstain_share`` and ``abstain_cosine``: of the pairs tried, the first that answers at least ``target`` of the
  unrelated questions with nothing while abstaining on at most ``loss`` of the related ones, the lowest cosine first
  (a paraphrase shares no word: the cosine is all it has), then the lowest share. The cosines tried are quantiles of
  the unrelated questions' best cosines, so every model is calibrated on its own scale.
- ``dense_floor``: the ``DENSE_FLOOR_QUANTILE`` of the unrelated pairs' cosines: a document found by meaning alone
  must be nearer the query than nearly every unrelated pair is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ABSTAIN_SHARES = (0.08, 0.1, 0.12, 0.14, 0.16, 0.18, 0.2)
ABSTAIN_COSINE_QUANTILES = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.975, 1.0)
ABSTAIN_TARGET = 0.95
ABSTAIN_LOSS = 0.002
DENSE_FLOOR_QUANTILE = 0.99
Signals = tuple[float, float]
"""(best lexical share, best cosine) of one question asked of one scope."""


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Floors:
    """Calibrated floors and what they do on the questions they were calibrated on."""

    abstain_share: float
    abstain_cosine: float
    dense_floor: float
    unrelated_empty: float
    """The share of the unrelated questions these floors answer with nothing."""
    related_lost: float
    """The share of the related questions they would answer with nothing (0 without related questions)."""


def _abstains(signals: Signals, share: float, cosine: float) -> bool:
    return signals[0] < share and signals[1] < cosine


def _share_of(signals: Sequence[Signals], share: float, cosine: float) -> float:
    return sum(_abstains(s, share, cosine) for s in signals) / len(signals) if signals else 0.0


def calibrated(
    unrelated: Sequence[Signals],
    related: Sequence[Signals],
    unrelated_pair_cosines: Sequence[float],
    *,
    target: float = ABSTAIN_TARGET,
    loss: float = ABSTAIN_LOSS,
) -> Floors:
    """The floors of the module docstring (when no pair reaches ``target`` within ``loss``: the pair of most
    unrelated questions answered empty within it; when none is within it: no abstention)."""
    if not unrelated or not unrelated_pair_cosines:
        raise ValueError("calibration needs unrelated questions and the cosines of their pairs")
    best_cosines = [cosine for _, cosine in unrelated]
    cosines = sorted({round(quantile(best_cosines, q) + 0.005, 2) for q in ABSTAIN_COSINE_QUANTILES})
    chosen, chosen_empty = (0.0, -1.0), -1.0
    for cosine in cosines:
        for share in ABSTAIN_SHARES:
            if _share_of(related, share, cosine) > loss:
                continue
            empty = _share_of(unrelated, share, cosine)
            if empty >= target:
                chosen, chosen_empty = (share, cosine), empty
                break
            if empty > chosen_empty:
                chosen, chosen_empty = (share, cosine), empty
        else:
            continue
        break
    share, cosine = chosen
    dense_floor = round(quantile(unrelated_pair_cosines, DENSE_FLOOR_QUANTILE), 2)
    return Floors(
        share,
        cosine,
        dense_floor,
        _share_of(unrelated, share, cosine) if share else 0.0,
        _share_of(related, share, cosine),
    )
