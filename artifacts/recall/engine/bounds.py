"""How far the engine's scores may lie from the exact ones (``bm25``'s exact BM25 over the current statistics).

The engine computes BM25 with our k1 and b but its own statistics (those of its last update), in single precision,
and over document lengths it keeps in one byte, rounded down. ``worth_rescoring`` drops the proposed candidates that
cannot rank, which only saves work, and bounds the exact score of every document left out: the proof that a
rescored ranking is exact (``query.settled``) relies on that bound alone.
"""

from __future__ import annotations

import functools
import math
import struct

from artifacts.recall import tokenize
from artifacts.recall.bm25 import Bm25Query
from artifacts.recall.engine import store

ENGINE_SCORE_MARGIN = 1e-4
"""Relative slack on the engine's scores: it computes them in single precision (a few roundings of about 6e-8
each; its idf is reproduced whole by ``engine_idf``)."""
ENGINE_EXACT_DOCUMENTS_MAX = 2**24
"""Above this many documents the engine's document count, a single-precision value in its explanation, is no longer
exact, and neither would ``engine_idf`` be: such an index proves nothing (its rankings are ranked by SQL)."""
_SINGLE = struct.Struct("f")


def _single(value: float) -> float:
    """``value`` rounded to the nearest single-precision float, as the engine's arithmetic rounds each result."""
    return _SINGLE.unpack(_SINGLE.pack(value))[0]


def engine_idf(documents: float, held: int) -> float:
    """The engine's idf of a term held by ``held`` of ``documents`` documents, as tantivy computes it: the Lucene
    formula (``tokenize.idf``) with every operation in single precision. For a term held by nearly every document
    ``1 + x`` loses most of ``x``: at 100,000 documents its idf is 0.14 % above the double-precision value, more
    than ``ENGINE_SCORE_MARGIN``. (The logarithm, rounded here from double precision, may differ from the engine's
    by a unit in the last place.)"""
    x = _single(_single(_single(documents - held) + 0.5) / _single(_single(held) + 0.5))
    return _single(math.log(_single(1.0 + x)))


_UNPROVABLE = 2**63
"""A score no ranking's last document exceeds."""


def _bound(engine_score: float, ratios: tuple[float, float] | None) -> int:
    """An exact score (micro-units) that no indexed document the engine scores at most ``engine_score`` reaches
    (``score_ratios``' highest times that score, rounded up, with the engine's rounding as slack)."""
    if ratios is None:
        return _UNPROVABLE
    return math.ceil(tokenize.SCORE_SCALE * ratios[1] * engine_score * (1 + ENGINE_SCORE_MARGIN))


LENGTH_KEPT_MIN = 8 / 9
"""The engine's stored document length over the true one, at least, whatever the length: it keeps a length in one
byte as Lucene does (exact below ``_LENGTH_EXACT_BELOW``, then the first four significant bits of its excess over
``_LENGTH_SMALL``), so it rounds down by less than a ninth."""
_LENGTH_SMALL = 24
_LENGTH_EXACT_BELOW = _LENGTH_SMALL + 16


@functools.lru_cache(maxsize=256)
def length_kept(longest: int | None) -> float:
    """The engine's stored length over the true one, at least, for documents of at most ``longest`` terms (None:
    any length). Only chooses the candidates worth rescoring (``worth_rescoring``); no proof relies on it."""
    if longest is None:
        return LENGTH_KEPT_MIN
    least, low = 1.0, _LENGTH_EXACT_BELOW
    while low <= longest:
        # Lengths low .. 2·low - 25 keep their excess over 24 to a multiple of `step`, losing at most step - 1:
        # most, relative to the length, at the first length that loses that much (or the longest, if before).
        step = (low - _LENGTH_SMALL) // 8
        worst = min(low + step - 1, longest)
        least = min(least, (worst - (worst - _LENGTH_SMALL) % step) / worst)
        low = 2 * low - _LENGTH_SMALL
    return least


def score_ratios(query: Bm25Query, reader: store.Reader, scoring: store.EngineScoring) -> tuple[float, float] | None:
    """For any indexed document, (at least, at most) its exact score over the engine's, up to the engine's rounding
    (``ENGINE_SCORE_MARGIN``); None when the engine's document count is too large to be exact.

    The engine's BM25 has our k1 and b (``tokenize``) but its own statistics, and it keeps each document's length in
    one byte, rounded down: ``ρ · dl ≤ dl' ≤ dl`` (``ρ``: ``length_kept`` of the index's longest document). Per query
    term held by a document, our contribution over the engine's is ``(w / w') · (tf + c + f'·dl') / (tf + c + f·dl)``
    with weights ``w``, ``w'`` and length factors ``f``, ``f'`` (k1·b / average length): between
    ``(w / w') · min(1, ρ · f' / f)`` and ``(w / w') · max(1, f' / f)``. Contributions are never negative, so a
    document's ratio lies within its terms' extremes, and so within the query's (a term the engine does not hold is
    in none of its documents). ``w'`` is the engine's own single-precision weight (``engine_idf``); its other
    roundings are covered by ``ENGINE_SCORE_MARGIN``. Only the highest ratio proves anything (``worth_rescoring``).
    """
    if scoring.documents >= ENGINE_EXACT_DOCUMENTS_MAX:
        return None
    k1, b = tokenize.BM25_K1, tokenize.BM25_B
    length_ratio = k1 * b / scoring.average_length / query.length_factor
    weight_ratios = [
        weight / (engine_idf(scoring.documents, held) * (k1 + 1))
        for term, weight in query.weights.items()
        if (held := reader.searcher.doc_freq("text", term))
    ]
    if not weight_ratios:
        return (0.0, 0.0)
    least_kept = length_kept(reader.meta.longest)
    return (min(weight_ratios) * min(1.0, least_kept * length_ratio), max(weight_ratios) * max(1.0, length_ratio))


def worth_rescoring(
    query: Bm25Query, reader: store.Reader, proposal: store.Proposal, *, kept: int
) -> tuple[store.Proposal, int | None]:
    """The proposal without the candidates that cannot rank among its first ``kept`` (the limit plus the documents
    the index holds deleted), and ``proven_above``: an exact score (micro-units) that no indexed document left out
    reaches, None when the engine left none out.

    Every document left out, proposed and dropped or never proposed, scores in the engine at most the best dropped
    one (or the last proposal): its exact score is at most ``_bound`` of that, which uses only the highest ratio. A
    candidate is dropped when that bound is below what the ``kept``-th proposal scores exactly at least (the lowest
    ratio times its engine score, less one micro-unit per term for the exact score's truncated contributions): were
    the lowest ratio wrong, the ranking would only be unproven and ranked by SQL, never wrong.

    Rescoring reads each candidate's postings, the largest part of a prepare at 100k documents; with short documents
    (lengths the engine keeps exactly) this drops about half the candidates (docs/design-notes.md).
    """
    lowest = proposal.lowest_score
    if lowest is None or proposal.scoring is None:
        return proposal, None
    ratios = score_ratios(query, reader, proposal.scoring)
    scores = proposal.scores
    if ratios is not None and len(scores) > kept:
        at_least = math.floor(tokenize.SCORE_SCALE * ratios[0] * scores[kept - 1] * (1 - ENGINE_SCORE_MARGIN)) - len(
            query.weights
        )
        # Scores come best first, and so do their bounds: the first candidate below is the first of those dropped.
        cut = next((p for p in range(kept, len(scores)) if _bound(scores[p], ratios) < at_least), len(scores))
        if cut < len(scores):
            lowest = scores[cut]
            proposal = store.Proposal(proposal.documents[:cut], lowest, proposal.scoring, scores[:cut])
    return proposal, _bound(lowest, ratios)
