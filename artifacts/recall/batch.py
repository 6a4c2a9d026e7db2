"""Rank and read the candidates of several families and scopes in one statement.

A prepare over small scopes is mostly plumbing: per family and scope a ranking, per family a read of the
ranked documents. Here every (family, scope) ranking is a derived table of one UNION ALL whose branches also
join the document's citation and body, so the database is asked once. A large scope whose ranking prunes
(several statements of its own, ``ranking.ranked``) joins the same statement with its ranked rows as VALUES.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db import connection

from artifacts.models import Family
from artifacts.recall import ranking, tokenize

_DOCUMENTS = "JOIN artifacts_recalldocument d ON d.id = k.document_id JOIN artifacts_artifact a ON a.id = d.artifact_id"
# Per family: what a ranked document ``k`` is read as, in the columns of ``RankedDocument``.
_READS = {
    # The citation of a memory entry names the artifact's head; version, liveness and head are read in the
    # same statement, so the citation is consistent even while writers retire versions.
    Family.MEMORY: (
        "a.artifact_id, a.head_revision, v.entry_id, v.version_id, v.body, NULL, NULL",
        "JOIN artifacts_memoryentryversion v ON v.id = d.entry_version_id WHERE v.retired_in_revision IS NULL",
    ),
    Family.EXPERIENCE: (
        "a.artifact_id, r.revision, NULL, NULL, r.body, r.title, r.summary",
        "JOIN artifacts_artifactrevision r ON r.id = d.revision_id",
    ),
}
_READS[Family.TOPIC_MEMORY] = _READS[Family.EXPERIENCE]

BATCHED_FAMILIES = frozenset(_READS)
"""The families whose candidates this module ranks and reads."""


@dataclass(frozen=True)
class RankedDocument:
    """One ranked document with what its citation and body need (entry fields for memory only)."""

    document_id: int
    score: int
    artifact_id: str
    revision: int
    entry_id: str | None
    version_id: str | None
    body: str
    title: str | None
    summary: str | None


def _values_sql(rows: Sequence[tuple[int, int]]) -> tuple[str, list]:
    """Already ranked ``(document_id, score)`` rows as a relation with those column names."""
    values = ", ".join(["(%s, %s)"] * len(rows))
    params = [value for row in rows for value in row]
    if connection.vendor == "postgresql":
        return f"SELECT * FROM (VALUES {values}) AS v(document_id, score)", params
    return f"SELECT column1 AS document_id, column2 AS score FROM (VALUES {values})", params


def bm25_ranked_documents(
    *, scope_pks_by_family: Mapping[str, Sequence[int]], query: str, limits: Mapping[str, int]
) -> dict[str, dict[int, list[RankedDocument]]]:
    """Per family and scope, its top ``limits[family]`` live documents by (score desc, document id).

    Statistics take one statement for all families; rankings and reads one more, plus the pruning
    statements of any large scope. Every family and scope asked for has an entry, maybe empty.
    """
    result: dict[str, dict[int, list[RankedDocument]]] = {
        family: {scope_pk: [] for scope_pk in scope_pks} for family, scope_pks in scope_pks_by_family.items()
    }
    terms = tokenize.query_terms(query)
    if not terms:
        return result
    queries = ranking.bm25_queries(scope_pks_by_family=scope_pks_by_family, terms=terms)
    branches: list[str] = []
    params: list = []
    keys: list[tuple[str, int]] = []
    for family, scope_pks in scope_pks_by_family.items():
        columns, joins = _READS[family]
        for scope_pk in scope_pks:
            if (family, scope_pk) not in queries:
                continue
            bm25 = queries[(family, scope_pk)]
            limit = limits[family]
            if ranking.ranking_prunes(bm25):
                rows = ranking.ranked(bm25, scope_pk=scope_pk, family=family, limit=limit)
                if not rows:
                    continue
                ranked_sql, ranked_params = _values_sql(rows)
            else:
                ranked_sql, ranked_params = ranking.ranked_all_sql(bm25, scope_pk=scope_pk, family=family, limit=limit)
            # The branch number is the position in ``keys``: a literal of ours, never input.
            branches.append(
                f"SELECT {len(keys)} AS branch, k.document_id, k.score, {columns} "
                f"FROM ({ranked_sql}) AS k {_DOCUMENTS} {joins}"
            )
            params += ranked_params
            keys.append((family, scope_pk))
    if not branches:
        return result
    for branch, *fields in ranking.fetch(" UNION ALL ".join(branches), params):
        family, scope_pk = keys[branch]
        result[family][scope_pk].append(RankedDocument(*fields))
    for per_scope in result.values():
        for documents in per_scope.values():
            documents.sort(key=lambda document: (-document.score, document.document_id))
    return result
