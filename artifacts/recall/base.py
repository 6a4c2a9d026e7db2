"""The contract every ranker answers, written once: rank (family, scope) pairs for a query, or leave out a pair it
cannot prove.

A ranker (``ranking``: exact BM25 in SQL; ``resident``: the same from copies of small pairs' postings in this
process; ``engine``: tantivy candidates rescored exactly; a dense ranker would be one more sibling) gets each pair's
query, already compiled (``bm25.Bm25Query`` for the lexical rankers), and the limit of each family. It answers in
one of two forms:

- ``Ranker``: per pair it can answer, its first ``limit`` documents as ``Ranked`` rows, in ``ranking_order``. A pair
  absent from the answer is one the ranker cannot rank, or cannot prove it ranked exactly; the planner asks another.
- ``StatementRanker``: per pair, SQL ``Part``s yielding ``(document_id, score)`` that the planner runs inside the
  statement that reads the ranked documents (no round trip of their own), and a proof it checks on the scores kept
  (``settled``); an unproven pair is ranked again by another ranker.

Rankers never import one another; the planner (``planner``) is the one place that picks a ranker per pair and merges
their answers. This module imports nothing of recall: it is the bottom a ranker builds on, with ``sql``, ``tables``,
``tokenize`` and ``documents``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

Pair = tuple[str, int]
"""(family, scope pk): one ranking."""
Ranked = list[tuple[int, int]]
"""(document id, integer score) rows of one pair, by (score desc, document id): ``ranking_order``."""
Part = tuple[str, list]
"""SQL and its parameters yielding ``(document_id, score)`` rows."""
Rescored = tuple[int, int, Part]
"""(branch, limit, part): one part of a pair's ranking inside a statement of several pairs (``top_of_parts_sql``)."""

Query = TypeVar("Query", contravariant=True)
Answer = TypeVar("Answer")


def ranking_order(ranked: Sequence) -> tuple[int, int]:
    """Sort key of a ranked ``(document id, score, …)`` row: score descending, then document id ascending, the SQL
    rankings' ``ORDER BY score DESC, document_id`` (the same tie-break whichever path ranked it)."""
    return -ranked[1], ranked[0]


def first_of_each_branch(scored_sql: str) -> str:
    """``(branch, document_id, score)``: of ``scored_sql``'s ``(branch, lim, document_id, score)`` rows, each branch's
    first ``lim`` by (score desc, document id): the SQL ranking's order and tie-break."""
    return (
        "SELECT branch, document_id, score FROM (SELECT branch, document_id, score, lim, "
        "ROW_NUMBER() OVER (PARTITION BY branch ORDER BY score DESC, document_id ASC) AS position "
        f"FROM ({scored_sql}) AS scored) AS numbered WHERE position <= lim"
    )


def top_of_parts_sql(rescored: Sequence[Rescored]) -> tuple[str, list]:
    """``(branch, document_id, score)``: each branch's first ``limit`` of its parts' rows by (score desc, document
    id). Branch and limit are the caller's own integers, written into the SQL; the parts' rows are disjoint."""
    union = " UNION ALL ".join(
        f"SELECT {int(branch)} AS branch, {int(limit)} AS lim, document_id, score FROM ({part_sql}) AS rescored{number}"
        for number, (branch, limit, (part_sql, _)) in enumerate(rescored)
    )
    return first_of_each_branch(union), [value for _, _, (_, part_params) in rescored for value in part_params]


class Ranker(Protocol[Query]):
    """Ranks pairs now: ``resident.ranked_in_memory``, ``engine.ranked_by_index``, ``ranking.ranked_by_sql``."""

    def __call__(self, queries: Mapping[Pair, Query], *, limits: Mapping[str, int]) -> dict[Pair, Ranked]:
        """Per pair of ``queries`` it answers, its exact first ``limits[family]`` rows; the others absent."""
        ...


class StatementRanker(Protocol[Query, Answer]):
    """Ranks pairs inside the planner's read statement, then proves each: the ``engine`` package
    (``rescoring_by_index``, ``settled``)."""

    def rescoring_by_index(self, queries: Mapping[Pair, Query], *, limits: Mapping[str, int]) -> dict[Pair, Answer]:
        """Per pair of ``queries`` it may answer, an answer whose ``parts`` (a list of ``Part``) yield its rows."""
        ...

    def settled(self, pair: Pair, answer: Answer, scores: Sequence[int], *, limit: int) -> bool:
        """Whether the scores kept of the parts' rows (best first) prove the pair's ranking exact."""
        ...
