"""Writes of the stored vectors: store a batch, insert a write's new documents' vectors, and embed every document
still without a vector (or, once, every long one again)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from artifacts.models import RecallCorpusStat, RecallDocument, RecallVector
from artifacts.recall.vectors.providers import PASSAGE_CHUNK_CHARS, EmbeddingProvider
from artifacts.recall.vectors.ranking import ENCODING, VectorRefused, encode
from artifacts.recall.vectors.selectors import documents_to_embed, documents_to_embed_again

DEFAULT_BATCH_SIZE = 64


def recall_vectors_store(
    *, model_id: str, dimension: int, vectors: Mapping[int, Sequence[float]], replace: bool = False
) -> int:
    """Store one vector by ``model_id`` per document id (normalized, half floats); returns how many were stored.

    Every vector must have ``dimension`` finite numbers, or none is stored (``VectorRefused``). A document removed
    meanwhile is skipped, and so is one that already has a vector by this model and dimension (another embedder was
    first, unless ``replace``: then it is replaced too); one by this model of another dimension (the model's
    dimension changed) is replaced. Skipped documents are not counted: two drainers racing on one batch count it
    once between them (``powercontext_recall_vectors_drained``).
    """
    encoded = {document_id: encode(vector, dimension) for document_id, vector in vectors.items()}
    if not encoded:
        return 0
    with transaction.atomic():
        # Locked (PostgreSQL) so that none is removed before the vectors referring to it are in.
        documents = list(
            RecallDocument.objects.select_for_update()
            .filter(pk__in=list(encoded))
            .order_by("pk")
            .values_list("pk", "scope_id", "family")
        )
        # One vector per document and model (the unique constraint): a stale one of another dimension, which no
        # reader takes, gives way to the new one; with ``replace``, any.
        stale = RecallVector.objects.filter(document_id__in=[pk for pk, _, _ in documents], model_id=model_id)
        (stale if replace else stale.exclude(dimension=dimension)).delete()
        # Read under the documents' lock (PostgreSQL) or the write lock (SQLite's IMMEDIATE transactions): another
        # embedder's vectors committed before it are seen here, and none can be committed until this one ends.
        # What is left of ``stale`` is by this model and dimension.
        present = set() if replace else set(stale.values_list("document_id", flat=True))
        documents = [document for document in documents if document[0] not in present]
        RecallVector.objects.bulk_create(
            [
                RecallVector(
                    document_id=pk,
                    scope_id=scope_pk,
                    family=family,
                    model_id=model_id,
                    dimension=dimension,
                    encoding=ENCODING,
                    vector=encoded[pk],
                )
                for pk, scope_pk, family in documents
            ],
            ignore_conflicts=True,  # a safety net: with the lock above, no conflict is left to ignore
        )
        # A worker's copy of a pair's vectors stays current by the pair's generation (``vectors.resident``), which a
        # write of the pair renews; vectors stored apart from any write (``recall_embed``) renew it themselves.
        pairs = Q()
        for scope_pk, family in sorted({(scope_pk, family) for _, scope_pk, family in documents}):
            pairs |= Q(scope_id=scope_pk, family=family)
        if documents:
            RecallCorpusStat.objects.filter(pairs).update(generation=0)  # the database's trigger chooses the new one
    return len(documents)


def recall_vectors_insert(*, model_id: str, dimension: int, vectors: Sequence[tuple[RecallDocument, bytes]]) -> None:
    """Store the encoded vectors (``encode``) of documents the caller's transaction has just created: one INSERT
    (no lock nor check: the documents are the transaction's own, so none is removed or has a vector yet)."""
    if vectors:
        RecallVector.objects.bulk_create(
            [
                RecallVector(
                    document_id=document.pk,
                    scope_id=document.scope_id,
                    family=document.family,
                    model_id=model_id,
                    dimension=dimension,
                    encoding=ENCODING,
                    vector=vector,
                )
                for document, vector in vectors
            ]
        )


def passage_vectors(provider: EmbeddingProvider, texts: Sequence[str]) -> list[list[float]]:
    """One vector per text by ``provider``, in order. A blank text gets a zero vector without asking the provider
    (nearest to nothing, and no longer waiting to be embedded). ``VectorRefused`` when the provider answers another
    number of vectors; ``EmbeddingUnavailable`` as the provider raises it."""
    sent = [text for text in texts if text.strip()]
    embedded = provider.embed_passages(sent) if sent else []
    if len(embedded) != len(sent):
        raise VectorRefused(f"the provider gave {len(embedded)} vectors for {len(sent)} texts")
    answers = iter(embedded)
    return [next(answers) if text.strip() else [0.0] * provider.dimension for text in texts]


@dataclass
class EmbedProgress:
    """Where an embedding pass stands: documents embedded and stored so far, and the seconds it has run."""

    embedded: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0


def recall_vectors_embed_pending(
    *,
    provider: EmbeddingProvider,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Callable[[EmbedProgress], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    long_again: bool = False,
    after: int = 0,
) -> EmbedProgress:
    """Embed and store, batch by batch, every live document without a vector by the provider's model.

    Resumable: a pass stopped anywhere (``should_stop``, an ``EmbeddingUnavailable`` from the provider, a crash)
    leaves what it stored, and the next pass starts with the documents still without a vector. A vector of another
    dimension than the provider's is refused (``VectorRefused``), never stored.

    ``long_again``, instead: embed again every live document with a vector by the provider's model whose text is
    longer than one piece (``PASSAGE_CHUNK_CHARS``), replacing its vector. Vectors stored before issue 52's bound
    embedded such a text whole, where a write now stores the mean of its first pieces; a text of one piece was and
    is embedded whole. Such a pass stopped anywhere keeps what it replaced, and the next one starts from the first.

    ``after``: only documents whose id is above it (the drainer's incremental pass, ``vectors.drainer``).
    """
    state = EmbedProgress()
    started = time.monotonic()
    while not should_stop():
        select = documents_to_embed_again if long_again else documents_to_embed
        documents = select(model_id=provider.model_id, dimension=provider.dimension, after=after, limit=batch_size)
        if not documents:
            break
        after = documents[-1][0]
        if long_again:  # the selector's length is a bound: a text of one piece exactly is left as it is
            documents = [(pk, text) for pk, text in documents if len(text) > PASSAGE_CHUNK_CHARS]
        embedded = passage_vectors(provider, [text for _, text in documents])
        vectors = dict(zip((pk for pk, _ in documents), embedded, strict=True))
        state.embedded += recall_vectors_store(
            model_id=provider.model_id, dimension=provider.dimension, vectors=vectors, replace=long_again
        )
        state.seconds = time.monotonic() - started
        if progress is not None:
            progress(state)
    state.seconds = time.monotonic() - started
    return state
