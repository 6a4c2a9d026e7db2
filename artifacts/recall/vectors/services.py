"""Writes of the stored vectors: store a batch, and embed every document still without a vector."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from django.db import transaction

from artifacts.models import RecallDocument, RecallVector
from artifacts.recall.vectors.providers import EmbeddingProvider
from artifacts.recall.vectors.ranking import ENCODING, VectorRefused, encode
from artifacts.recall.vectors.selectors import documents_to_embed

DEFAULT_BATCH_SIZE = 64


def recall_vectors_store(*, model_id: str, dimension: int, vectors: Mapping[int, Sequence[float]]) -> int:
    """Store one vector by ``model_id`` per document id (normalized, half floats); returns how many were stored.

    Every vector must have ``dimension`` finite numbers, or none is stored (``VectorRefused``). A document removed
    meanwhile is skipped, and so is one that already has a vector by this model (another embedder was first).
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
        created = RecallVector.objects.bulk_create(
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
            ignore_conflicts=True,
        )
    return len(created)


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
) -> EmbedProgress:
    """Embed and store, batch by batch, every live document without a vector by the provider's model.

    Resumable: a pass stopped anywhere (``should_stop``, an ``EmbeddingUnavailable`` from the provider, a crash)
    leaves what it stored, and the next pass starts with the documents still without a vector. A vector of another
    dimension than the provider's is refused (``VectorRefused``), never stored.
    """
    state = EmbedProgress()
    started = time.monotonic()
    after = 0
    while not should_stop():
        documents = documents_to_embed(model_id=provider.model_id, after=after, limit=batch_size)
        if not documents:
            break
        after = documents[-1][0]
        texts = [text for _, text in documents if text.strip()]
        embedded = provider.embed_passages(texts) if texts else []
        if len(embedded) != len(texts):
            raise VectorRefused(f"the provider gave {len(embedded)} vectors for {len(texts)} texts")
        # An empty text gets a zero vector: nearest to nothing, and no longer waiting to be embedded.
        vectors = {pk: [0.0] * provider.dimension for pk, text in documents if not text.strip()}
        vectors.update(zip((pk for pk, text in documents if text.strip()), embedded, strict=True))
        state.embedded += recall_vectors_store(
            model_id=provider.model_id, dimension=provider.dimension, vectors=vectors
        )
        state.seconds = time.monotonic() - started
        if progress is not None:
            progress(state)
    state.seconds = time.monotonic() - started
    return state
