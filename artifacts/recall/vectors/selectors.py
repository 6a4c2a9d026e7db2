"""Reads of the stored vectors: a pair's matrix for ranking, the documents still to embed, and the lag."""

from __future__ import annotations

import numpy as np
from django.db.models import Exists, OuterRef, QuerySet

from artifacts.models import RecallDocument, RecallVector
from artifacts.recall.index import revision_text
from artifacts.recall.vectors.ranking import ENCODING, decode


def vectors_for_pair(
    scope_pk: int, family: str, model_id: str, *, dimension: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The vectors of one scope (its primary key) and family by ``model_id``: (document ids, float32 matrix), one
    row per document in id order. Rows of any other model, encoding or dimension (``dimension``, when given, else
    the pair's first row's) are left out."""
    rows = list(
        RecallVector.objects.filter(scope_id=scope_pk, family=family, model_id=model_id, encoding=ENCODING)
        .order_by("document_id")
        .values_list("document_id", "dimension", "vector")
    )
    if dimension is None:
        dimension = rows[0][1] if rows else 0
    rows = [row for row in rows if row[1] == dimension]
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    return ids, decode([row[2] for row in rows], dimension)


def _without_vector(model_id: str, dimension: int) -> QuerySet[RecallDocument]:
    # The dimension counts: a model name served at another dimension (an endpoint's ``dimension`` changed) gives
    # vectors the readers skip, so a document with only such a vector still waits to be embedded.
    return RecallDocument.objects.exclude(
        Exists(RecallVector.objects.filter(document=OuterRef("pk"), model_id=model_id, dimension=dimension))
    )


def recall_vector_lag(*, model_id: str, dimension: int, scope_pk: int | None = None, cap: int | None = None) -> int:
    """How many live documents (of one scope, when given) have no vector by ``model_id`` of ``dimension`` yet; with
    ``cap``, counted no further than ``cap`` (the answer is then ``min(lag, cap)``: the scan stops at the cap-th
    document found, so a large backlog costs no more than ``cap`` of them)."""
    documents = _without_vector(model_id, dimension)
    if scope_pk is not None:
        documents = documents.filter(scope_id=scope_pk)
    if cap is not None:
        # A sliced queryset counts as SELECT COUNT(*) FROM (SELECT ... LIMIT cap): the anti-join stops there.
        return documents.values("pk")[:cap].count()
    return documents.count()


def documents_to_embed(*, model_id: str, dimension: int, after: int = 0, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` live documents without a vector by ``model_id`` of ``dimension``, ids above ``after`` in id
    order, with the text recall indexed for each: a memory entry's body; a revision's ``revision_text``."""
    rows = (
        _without_vector(model_id, dimension)
        .filter(pk__gt=after)
        .order_by("pk")
        .values_list("pk", "entry_version__body", "revision__title", "revision__summary", "revision__body")[:limit]
    )
    return [
        (pk, entry_body if entry_body is not None else revision_text(title, summary, body))
        for pk, entry_body, title, summary, body in rows
    ]
