"""Vectors written with the write (issue 37): a new recall document's vector commits with the document, when the
provider answers in time; otherwise the write still succeeds, and ``manage.py recall_embed`` embeds it later.

Only while recall is hybrid and a provider is configured (``vectors_on_write``); in lexical mode a write embeds
nothing (switching to hybrid later: ``recall_embed`` fills the backlog, ``powercontext_recall_vector_lag`` shows it).

The texts a write will index are embedded before its transaction opens, whatever the provider: no row lock, nor
SQLite's write lock, is held while a model embeds (issue 52). A provider embeds at most a passage's first
``PASSAGE_CHARS`` characters (``providers.passage_chunks``), which bounds what a write waits for:

- the packaged model runs in this process (milliseconds for a short text, ~0.25 s for the longest): the write
  waits for it in the request's own thread;
- an endpoint is a network call, made from a small thread pool, waited on for at most the provider's timeout capped
  by ``POWERCONTEXT_EMBEDDINGS["write_wait"]``.

Either way the transaction stores the vectors of its new documents in one INSERT, each for exactly the text recall
indexed for its document (``recall_index_add``'s text; a vector embedded for another text is dropped). A document
left without one is counted (``powercontext_recall_vectors_write_misses``) and logged.

With ``POWERCONTEXT_EMBEDDINGS["write"] = "deferred"`` a write embeds nothing: it stores its documents without
vectors (found by their words at once) and, once its transaction commits, wakes the process's drainer
(``vectors.drainer``), which embeds them moments later.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextvars import ContextVar

from django.db import transaction

from artifacts.models import RecallDocument
from artifacts.recall.conf import embeddings_settings, recall_settings
from artifacts.recall.vectors.drainer import deferred_provider, drainer_wake
from artifacts.recall.vectors.providers import (
    EmbeddingProvider,
    EmbeddingUnavailable,
    PackagedProvider,
    configured_provider,
)
from artifacts.recall.vectors.ranking import VectorRefused, encode
from artifacts.recall.vectors.services import passage_vectors, recall_vectors_insert
from infrastructure import metrics
from vocabulary.recall_modes import RECALL_MODE_HYBRID

logger = logging.getLogger(__name__)

EMBEDDING_THREADS = 4
"""Endpoint calls of writes under way at once in a process; a write finding them all busy waits its bound, then
goes without (a slow endpoint never queues writes behind it)."""

_ahead: ContextVar[WriteVectors | None] = ContextVar("recall_vectors_ahead", default=None)
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _embedder() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:  # made on first use: its threads start in the worker, never before a fork
            _executor = ThreadPoolExecutor(max_workers=EMBEDDING_THREADS, thread_name_prefix="embed-on-write")
        return _executor


def write_wait(provider: EmbeddingProvider) -> float:
    """Seconds a write waits for an endpoint's vectors: the provider's timeout, capped by the setting."""
    cap = embeddings_settings().write_wait
    return min(getattr(provider, "timeout", cap), cap)


class WriteVectors:
    """The vectors of one write's new recall documents: ``add`` each document with the text it indexes, then
    ``store`` them, inside the write's transaction. Does nothing without a provider (lexical recall, or "off")."""

    def __init__(
        self,
        provider: EmbeddingProvider | None = None,
        ready: dict[str, list[float]] | None = None,
        *,
        deferred: bool = False,
    ) -> None:
        self.provider = provider
        self.deferred = deferred
        """Writes' vectors are the drainer's (``provider`` is then None): ``store`` only wakes it."""
        self._deferred_documents = 0
        self.ready = ready if ready is not None else {}
        """Vectors embedded before the transaction, by text."""
        self.miss_reason, self.miss_detail = "text", "a text other than the one embedded"
        """Why a document whose text is not in ``ready`` has no vector: the embedding before the transaction failed
        (``timeout``, ``unavailable``), else its text is not one the write embedded (``text``)."""
        self._documents: list[tuple[RecallDocument, str]] = []

    def add(self, document: RecallDocument, text: str) -> None:
        if self.provider is not None:
            self._documents.append((document, text))
        elif self.deferred:
            self._deferred_documents += 1

    def store(self) -> int:
        """Store the added documents' vectors in one INSERT; returns how many documents got one. Deferred: none,
        and the drainer is woken once the transaction commits (before, it could not see the documents)."""
        if self._deferred_documents:
            self._deferred_documents = 0
            transaction.on_commit(drainer_wake)
        if self.provider is None or not self._documents:
            return 0
        provider = self.provider
        by_text, reason, detail = self.ready, self.miss_reason, self.miss_detail
        try:
            rows = [(d, encode(by_text[text], provider.dimension)) for d, text in self._documents if text in by_text]
        except VectorRefused as exc:
            rows, reason, detail = [], "unavailable", str(exc)
        recall_vectors_insert(model_id=provider.model_id, dimension=provider.dimension, vectors=rows)
        if missed := len(self._documents) - len(rows):
            metrics.RECALL_VECTORS_WRITE_MISSES.labels(reason=reason).inc(missed)
            logger.warning(
                "recall vectors on write: %d of %d new documents left without a vector by %s (%s: %s); "
                "manage.py recall_embed embeds them later",
                missed,
                len(self._documents),
                provider.model_id,
                reason,
                detail,
            )
        self._documents = []
        return len(rows)


@contextlib.contextmanager
def vectors_embedded_ahead(texts: Sequence[str]) -> Iterator[None]:
    """Embed ``texts`` now for a write the caller runs inside a transaction of its own (an idempotent write's, which
    holds its claim, and on SQLite the write lock, from its start): the write's ``vectors_on_write`` then takes these
    vectors instead of calling the endpoint with that transaction open."""
    token = _ahead.set(vectors_on_write(texts))
    try:
        yield
    finally:
        _ahead.reset(token)


def vectors_on_write(texts: Sequence[str]) -> WriteVectors:
    """What a write about to index ``texts`` stores as their vectors; call it before the write's transaction opens.

    In hybrid recall, embeds ``texts`` now (unless ``vectors_embedded_ahead`` did, or writes are deferred: then
    nothing, and the drainer embeds them after the commit): the packaged model in this
    thread, an endpoint waited on for at most ``write_wait``. A failure or a late answer leaves the write's documents
    without vectors (counted and logged when storing), never fails the write.
    """
    if (ahead := _ahead.get()) is not None:
        vectors = WriteVectors(ahead.provider, ahead.ready, deferred=ahead.deferred)
        vectors.miss_reason, vectors.miss_detail = ahead.miss_reason, ahead.miss_detail
        return vectors
    if recall_settings().mode != RECALL_MODE_HYBRID:
        return WriteVectors()
    if deferred_provider() is not None:  # embedded moments later by the drainer, never in the request
        return WriteVectors(deferred=True)
    provider = configured_provider()
    if provider is None:
        return WriteVectors()
    vectors = WriteVectors(provider, ready={})
    distinct = list(dict.fromkeys(texts))
    if not distinct:
        return vectors
    if isinstance(provider, PackagedProvider):  # in process and bounded (PASSAGE_CHARS): no thread, no deadline
        try:
            vectors.ready = dict(zip(distinct, passage_vectors(provider, distinct), strict=True))
        except (EmbeddingUnavailable, VectorRefused) as exc:
            vectors.miss_reason, vectors.miss_detail = "unavailable", str(exc)
        return vectors
    wait = write_wait(provider)
    pending = _embedder().submit(passage_vectors, provider, distinct)
    try:
        vectors.ready = dict(zip(distinct, pending.result(timeout=wait), strict=True))
    except FutureTimeout:
        pending.cancel()  # not started yet (every thread busy): never sent; else it ends at the provider's timeout
        vectors.miss_reason, vectors.miss_detail = "timeout", f"no answer within {wait:g}s"
    except (EmbeddingUnavailable, VectorRefused) as exc:
        vectors.miss_reason, vectors.miss_detail = "unavailable", str(exc)
    return vectors
