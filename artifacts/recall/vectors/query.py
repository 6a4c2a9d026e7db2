"""The query side of dense recall: a prepare's query embedded once (cached, bounded in time), then each (family,
scope) pair's documents nearest it, from this process's copies of the pairs' vectors (``vectors.resident``).

Never in a prepare's way: when recall is lexical (POWERCONTEXT_RECALL_MODE) nothing is embedded and no statement
runs; when no provider is configured, the provider fails, or the endpoint does not answer within
POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT, the answer says why (``DenseResult.outcome``), has no rankings, and the
prepare ranks lexically. Each such fallback is logged and counted (``powercontext_recall_dense_fallbacks``).

The endpoint is called on a short-lived thread waited on for at most the query timeout, with its own timeout
lowered to the same: that bounds its whole exchange (``EndpointProvider``), so the thread, and the in-flight permit
it holds, ends soon after however slowly a server answers; the packaged model runs inline: a query is at most
``QUERY_CHARS`` characters, a few milliseconds of compute. Query vectors are cached per caller (the prepare's API
key, ``query_cache_owner``), model and text, the last POWERCONTEXT_EMBEDDINGS_QUERY_CACHE of them in all (0: no
cache), so a caller's repeated query costs no embedding and no caller learns another's queries from a hit.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
from django.core.exceptions import ImproperlyConfigured

from artifacts.recall.conf import embeddings_settings, recall_settings
from artifacts.recall.vectors import ann, resident
from artifacts.recall.vectors.providers import (
    EmbeddingProvider,
    EmbeddingUnavailable,
    EndpointProvider,
    PackagedProvider,
    configured_provider,
)
from artifacts.recall.vectors.ranking import VectorRefused, normalized
from infrastructure import metrics
from vocabulary.recall_modes import RECALL_MODE_LEXICAL

logger = logging.getLogger(__name__)

ANSWERED, TIMEOUT, UNAVAILABLE, OFF, MODE_IS_LEXICAL = "answered", "timeout", "unavailable", "off", "lexical-mode"
"""``DenseResult.outcome``: ranked densely; or why not (the first three are counted as fallbacks)."""
QUERY_CHARS = 2048
"""A query is embedded from at most its first this many characters: its cost is bounded whatever is sent."""
IN_FLIGHT_MAX = 8
"""Endpoint calls of this process still running past their wait (a slow server): beyond these, a query times out
at once rather than start one more thread."""


@dataclass(frozen=True)
class DenseResult:
    """Per family and scope pk, the first ``limits[family]`` (document id, cosine), cosine desc then document id
    asc; the model that embedded the query (None when none did) and the outcome (``ANSWERED`` or why not); and
    ``similarities``: per (family, scope pk) asked, the exact cosine of each wanted document with a vector, by id."""

    outcome: str
    model_id: str | None = None
    ranked: dict[str, dict[int, list[tuple[int, float]]]] = field(default_factory=dict)
    similarities: dict[tuple[str, int], list[tuple[int, float]]] = field(default_factory=dict)


class _QueryCache:
    """The last query vectors, each kept for the caller that asked (``query_cache_owner``), least recently used out.

    Per caller because a hit is visibly faster than an embedding (no round trip to an endpoint): shared, any API key
    could time a query to learn whether another key had just sent the same text. Bounded as a whole (``size``
    entries): when full, the caller holding the most entries gives way (its least recently used; the caller adding
    one, when it holds as many as any other), so a key alone uses all of it and a key sending distinct queries
    without end pushes out only its own once it holds the most: never another key below an equal share.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_owner: dict[Hashable, OrderedDict[tuple[str, str], np.ndarray]] = {}
        self.count = 0

    def get(self, owner: Hashable, key: tuple[str, str]) -> np.ndarray | None:
        """``owner``'s vector of ``key`` (model id, text), or None."""
        with self.lock:
            vectors = self.by_owner.get(owner)
            if vectors is None:
                return None
            vector = vectors.get(key)
            if vector is not None:
                vectors.move_to_end(key)
            return vector

    def put(self, owner: Hashable, key: tuple[str, str], vector: np.ndarray, size: int) -> None:
        """Keeps ``vector`` as ``owner``'s of ``key`` (model id, text), the cache held to ``size`` entries in all."""
        with self.lock:
            vectors = self.by_owner.setdefault(owner, OrderedDict())
            self.count += key not in vectors
            vectors[key] = vector
            vectors.move_to_end(key)
            while self.count > size:
                mine = len(vectors)
                others = (other for other in self.by_owner if other != owner)
                largest = max(others, key=lambda other: len(self.by_owner[other]), default=None)
                # The adding caller gives an older entry of its own, never the one it adds: holding only that,
                # it takes another caller's place (as a new key must, in a cache full of one key's queries).
                own = largest is None or (mine > 1 and mine >= len(self.by_owner[largest]))
                giving = owner if own else largest
                self.by_owner[giving].popitem(last=False)
                self.count -= 1
                if not self.by_owner[giving]:
                    del self.by_owner[giving]

    def clear(self) -> None:
        """Empties the cache (every caller's)."""
        with self.lock:
            self.by_owner.clear()
            self.count = 0


QUERY_CACHE = _QueryCache()
_OWNER: ContextVar[Hashable] = ContextVar("query_cache_owner", default=None)


@contextmanager
def query_cache_owner(owner: Hashable) -> Iterator[None]:
    """Within the block, query vectors are cached for ``owner`` alone (a prepare's API key id; None: the callers
    without one, the operator's tools and the benchmarks).

    A context variable rather than an argument: the cache is reached through the recall sources, whose signature
    (``scopes``, ``query``) is the contract every configured source implements, and which know no caller. The
    prepare runtime sets it around its recall, as it sets what the sources note (``sources.recall_hybrid_noted``).
    """
    token = _OWNER.set(owner)
    try:
        yield
    finally:
        _OWNER.reset(token)


_in_flight = threading.BoundedSemaphore(IN_FLIGHT_MAX)


def _options() -> tuple[float, int]:
    options = embeddings_settings()
    return float(options.query_timeout), options.query_cache


def _fallback(reason: str, detail: str) -> None:
    metrics.RECALL_DENSE_FALLBACKS.labels(reason=reason).inc()
    # No provider is a configuration, said once per prepare at info; a failure is worth a warning.
    level = logging.INFO if reason == OFF else logging.WARNING
    logger.log(level, "dense recall fell back to lexical (%s): %s", reason, detail)


def _embed_bounded(provider: EmbeddingProvider, text: str, timeout: float) -> list[float]:
    """The endpoint's vector of ``text`` within ``timeout`` seconds (TimeoutError otherwise)."""
    if isinstance(provider, EndpointProvider) and provider.timeout > timeout:
        provider = copy.copy(provider)  # the thread's own waits end with the query's
        provider.timeout = timeout
    if not _in_flight.acquire(blocking=False):
        raise TimeoutError(f"{IN_FLIGHT_MAX} query embeddings still running")
    outcome: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["vector"] = provider.embed_query(text)
        except BaseException as exc:  # handed to the waiting prepare
            outcome["error"] = exc
        finally:
            _in_flight.release()
            done.set()

    threading.Thread(target=run, name="powercontext-query-embedding", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"no query embedding within {timeout} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["vector"]  # type: ignore[return-value]


def _embedded(text: str) -> tuple[np.ndarray | None, str, str | None]:
    """(unit query vector or None, outcome, model id): from the cache, else the configured provider."""
    try:
        provider = configured_provider()
    except ImproperlyConfigured as exc:
        _fallback(UNAVAILABLE, f"the embeddings settings are invalid: {exc}")
        return None, UNAVAILABLE, None
    if provider is None:
        _fallback(OFF, "no embeddings provider is configured")
        return None, OFF, None
    text = text[:QUERY_CHARS]
    timeout, cache_size = _options()
    key, owner = (provider.model_id, text), _OWNER.get()
    if cache_size and (cached := QUERY_CACHE.get(owner, key)) is not None:
        return cached, ANSWERED, provider.model_id
    try:
        if isinstance(provider, PackagedProvider):  # compute in this thread, bounded by the query's length
            raw = provider.embed_query(text)
        else:
            raw = _embed_bounded(provider, text, timeout)
        vector = normalized(raw, provider.dimension)
    except TimeoutError as exc:
        _fallback(TIMEOUT, str(exc))
        return None, TIMEOUT, provider.model_id
    except (EmbeddingUnavailable, VectorRefused) as exc:
        reason = TIMEOUT if "TimeoutError" in str(exc) else UNAVAILABLE
        _fallback(reason, str(exc))
        return None, reason, provider.model_id
    if cache_size:
        QUERY_CACHE.put(owner, key, vector, cache_size)
    return vector, ANSWERED, provider.model_id


def query_vector(text: str) -> np.ndarray | None:
    """The unit float32 vector of ``text`` by the configured provider, or None when it cannot be had now (no
    provider, a failure, the query timeout): the prepare then ranks lexically."""
    return _embedded(text)[0]


def dense_ranked(
    *,
    scope_pks_by_family: Mapping[str, Sequence[int]],
    query: str,
    limits: Mapping[str, int],
    generations: Mapping[tuple[str, int], int] | None = None,
    wanted: Mapping[tuple[str, int], Sequence[int]] | None = None,
) -> DenseResult:
    """Per family and scope pk, its first ``limits[family]`` documents nearest ``query`` as (document id, cosine),
    cosine desc then document id asc; documents without a vector by the provider's model are absent.

    ``generations`` (the pairs' corpus generations, keyed (family, scope pk), as the BM25 statistics read them)
    spares the statement that reads them. ``wanted`` (documents by (family, scope pk)): whose exact cosine to give
    too (``DenseResult.similarities``), from the same copies, no statement more. In lexical mode: outcome
    ``MODE_IS_LEXICAL`` at once, nothing embedded, no statement.
    """
    if recall_settings().mode == RECALL_MODE_LEXICAL:
        return DenseResult(MODE_IS_LEXICAL)
    vector, outcome, model_id = _embedded(query)
    if vector is None or model_id is None:  # a vector always comes with its model id
        return DenseResult(outcome, model_id)
    pairs = [(family, pk) for family, pks in scope_pks_by_family.items() for pk in pks if limits.get(family, 0) > 0]
    # Large pairs with a dense index are answered from it; the others, and any whose index cannot answer, by the
    # exact scan of this process's copies.
    by_index = ann.ranked_by_index(pairs, vector, model_id=model_id, limits=limits, wanted=wanted)
    scanned = [pair for pair in pairs if pair not in by_index.ranked]
    matrices = resident.current_matrices(
        scanned, model_id=model_id, dimension=vector.shape[0], known_generations=generations
    )
    ann.count_missing(by_index, matrices)
    by_pair = resident.ranked_all(matrices, vector, limits) | by_index.ranked
    ranked: dict[str, dict[int, list[tuple[int, float]]]] = {family: {} for family in scope_pks_by_family}
    for family, pk in pairs:
        ranked[family][pk] = by_pair.get((family, pk), [])
    scored = resident.similarities_all(matrices, vector, wanted) if wanted else {}
    return DenseResult(ANSWERED, model_id, ranked, scored | by_index.similarities)
