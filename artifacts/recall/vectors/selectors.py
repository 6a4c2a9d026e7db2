"""Reads of the stored vectors: a pair's matrix for ranking, the documents still to embed (or to embed again), and
the lag."""

from __future__ import annotations

import numpy as np
from django.db.models import Exists, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Coalesce, Length

from artifacts.models import RecallDocument, RecallVector
from artifacts.recall.index import revision_text
from artifacts.recall.vectors.providers import PASSAGE_CHUNK_CHARS
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


def recall_document_newest() -> int:
    """The highest recall document id there is (0: none); the primary key's index answers it."""
    newest = RecallDocument.objects.order_by("-pk").values_list("pk", flat=True).first()
    return newest or 0


def documents_to_embed(*, model_id: str, dimension: int, after: int = 0, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` live documents without a vector by ``model_id`` of ``dimension``, ids above ``after`` in id
    order, with the text recall indexed for each: a memory entry's body; a revision's ``revision_text``."""
    return _with_texts(_without_vector(model_id, dimension), after, limit)


def _with_texts(documents: QuerySet[RecallDocument], after: int, limit: int) -> list[tuple[int, str]]:
    rows = (
        documents.filter(pk__gt=after)
        .order_by("pk")
        .values_list("pk", "entry_version__body", "revision__title", "revision__summary", "revision__body")[:limit]
    )
    return [
        (pk, entry_body if entry_body is not None else revision_text(title, summary, body))
        for pk, entry_body, title, summary, body in rows
    ]


def _longer_than_a_piece(model_id: str, dimension: int) -> QuerySet[RecallDocument]:
    # A text of one piece is embedded whole, before the bound as after it; a longer one was embedded whole before
    # it (issue 52) and as its first pieces' mean since. The database's lengths count characters (SQLite's
    # length() of text, PostgreSQL's char_length); a revision's text adds a newline between its parts, so the sum
    # of the parts' lengths is at most the text's: counted with 2 to spare, every longer text is found (and one of
    # a piece exactly, found in excess, is left out by the caller).
    def length(field: str):
        return Coalesce(Length(field), Value(0))

    revision = length("revision__title") + length("revision__summary") + length("revision__body") + Value(2)
    return (
        RecallDocument.objects.filter(
            Exists(RecallVector.objects.filter(document=OuterRef("pk"), model_id=model_id, dimension=dimension))
        )
        .alias(entry_length=length("entry_version__body"), revision_length=revision)
        .filter(Q(entry_length__gt=PASSAGE_CHUNK_CHARS) | Q(revision_length__gt=PASSAGE_CHUNK_CHARS))
    )


def long_documents_count(*, model_id: str, dimension: int) -> int:
    """How many live documents with a vector by ``model_id`` of ``dimension`` have a text longer than one piece of
    ``PASSAGE_CHUNK_CHARS`` characters (at most a few more: see ``documents_to_embed_again``)."""
    return _longer_than_a_piece(model_id, dimension).count()


def documents_to_embed_again(*, model_id: str, dimension: int, after: int = 0, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` live documents with a vector by ``model_id`` of ``dimension``, ids above ``after`` in id
    order, with the text recall indexed for each, among those whose text may be longer than one piece; the caller
    keeps those that are (``len(text) > PASSAGE_CHUNK_CHARS``). Vectors stored before issue 52's bound embedded
    such a text whole; embedded again, they are what a write stores now."""
    return _with_texts(_longer_than_a_piece(model_id, dimension), after, limit)
