"""Prometheus metrics (docs/metrics.md) and who may read them (``GET /metrics``: ``powercontext/scrape.py``).

The metrics live in prometheus-client's default registry. Under gunicorn each worker process counts on
its own; with ``PROMETHEUS_MULTIPROC_DIR`` set (an empty directory, before the workers start) every
worker writes its samples there and ``/metrics`` aggregates all of them (prometheus-client's
multiprocess mode). ``/metrics`` answers only a bearer of ``POWERCONTEXT_METRICS_TOKEN``, or, with
``POWERCONTEXT_METRICS_LOOPBACK`` on, a client connecting from a loopback address; otherwise 404.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Callable

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest

from infrastructure.metrics_conf import metrics_settings

# Every label value comes from a bounded set: a value taken from the request as it was sent would let any
# client (no key needed) add label sets without limit, each kept by every worker until it restarts.
# The methods of RFC 9110 and PATCH; anything else a client invents is counted as "other".
HTTP_METHOD_LABELS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})
OTHER_METHOD_LABEL = "other"

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUEST_DURATION = Histogram(
    "powercontext_http_request_duration_seconds",
    "Time to answer one HTTP request, by endpoint (URL name), method (a standard one, else other) and status code.",
    ["endpoint", "method", "status"],
    buckets=_LATENCY_BUCKETS,
)
PREPARE_CONTENT_BYTES = Histogram(
    "powercontext_prepare_content_bytes",
    "UTF-8 bytes of the content of each successful prepare (0 when empty).",
    buckets=(0, 256, 512, 1024, 2000, 4000, 8000, 16000, 32000, 64000, 128000),
)
PREPARE_BUDGET_FILL = Histogram(
    "powercontext_prepare_budget_fill_ratio",
    "content_bytes / max_bytes of each successful prepare.",
    buckets=(0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0),
)
PREPARE_CANDIDATES = Counter(
    "powercontext_prepare_candidates",
    "Candidates the assembly core decided on, by family, outcome and reason code.",
    ["family", "outcome", "reason"],
)
RECALL_DURATION = Histogram(
    "powercontext_recall_duration_seconds",
    "Time one family's recall source (and reranker) took within a prepare.",
    ["family"],
    buckets=_LATENCY_BUCKETS,
)
WRITES = Counter(
    "powercontext_writes",
    "Write requests by endpoint and outcome (the status code).",
    ["endpoint", "outcome"],
)
UNAVAILABLE = Counter(
    "powercontext_unavailable",
    "503 answers by cause (database, recall_source, standby, other).",
    ["cause"],
)
RECALL_INDEX_ANSWERS = Counter(
    "powercontext_recall_index_answers",
    "Scope rankings answered by the search-engine index (candidates from the engine, rescored exactly in SQL).",
)
RECALL_INDEX_FALLBACKS = Counter(
    "powercontext_recall_index_fallbacks",
    "Scope rankings the search-engine index should have answered but SQL did, by reason "
    "(missing, corrupt, unreadable, panic, mismatch, stale, error, unproven).",
    ["reason"],
)
RECALL_RESIDENT_LOADS = Counter(
    "powercontext_recall_resident_loads",
    "Copies of a small scope's postings read into this process's memory (recall.resident).",
)
RECALL_DENSE_FALLBACKS = Counter(
    "powercontext_recall_dense_fallbacks",
    "Prepares in hybrid recall that ranked lexically only, by reason: timeout (the query was not embedded within"
    " POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT), unavailable (the provider failed), off (no provider configured).",
    ["reason"],
)
RECALL_DENSE_RESIDENT = Counter(
    "powercontext_recall_dense_resident",
    "Scope vectors for dense recall by event: hit (this process's copy was current), miss (read from the"
    " database), eviction (a copy dropped to stay within POWERCONTEXT_RESIDENT_VECTORS_MB).",
    ["event"],
)
RECALL_DENSE_INDEX_ANSWERS = Counter(
    "powercontext_recall_dense_index_answers",
    "Scope rankings of dense recall answered by the dense (HNSW) index, its candidates rescored exactly.",
)
RECALL_DENSE_INDEX_FALLBACKS = Counter(
    "powercontext_recall_dense_index_fallbacks",
    "Scope rankings of dense recall the dense index should have answered but the exact scan did, by reason "
    "(missing, corrupt, unreadable, mismatch, stale, error).",
    ["reason"],
)
RECALL_VECTORS_WRITE_MISSES = Counter(
    "powercontext_recall_vectors_write_misses",
    "Recall documents a write left without a vector, by reason (timeout: the endpoint slower than the write's wait;"
    " unavailable: the provider failed or refused; text: embedded for another text); manage.py recall_embed embeds"
    " them later.",
    ["reason"],
)
RECALL_VECTORS_DRAINED = Counter(
    "powercontext_recall_vectors_drained",
    "Vectors stored by this process's background drainer (POWERCONTEXT_EMBEDDINGS_WRITE=deferred).",
)
RECALL_VECTORS_DRAIN_FAILURES = Counter(
    "powercontext_recall_vectors_drain_failures",
    "Passes of the background drainer that failed (logged; the drainer waits and tries again).",
)
PREPARE_LOG_WRITE_FAILURES = Counter(
    "powercontext_prepare_log_write_failures",
    "Prepare-log rows that could not be written (the prepare itself still answered).",
)
DATABASE_RETRIES = Counter(
    "powercontext_database_retries",
    "Requests safe to repeat that the database dropped (a failover, a restart) and that were run once more, by"
    " outcome: recovered (the second attempt answered) or failed (answered 503).",
    ["outcome"],
)
REPLICA_READS = Counter(
    "powercontext_replica_reads",
    "Replica-safe reads by where they were answered: replica; miss (not replicated yet, read again on the primary);"
    " error (the replica failed mid-read, read again on the primary).",
    ["outcome"],
)
PREPARE_READS = Counter(
    "powercontext_prepare_reads",
    "Prepares by where their reads ran, counted when POWERCONTEXT_PREPARE_ON_REPLICAS is on and a replica is"
    " configured: replica, with why (token: it has replayed the request's consistency token; lag: no token, within"
    " the lag bound); primary, with why (no_replica: none usable; behind: the replica has not replayed the token;"
    " error: the replica failed mid-prepare; refused: the prepare raised on the replica and ran again here).",
    ["where", "reason"],
)
REPLICA_SKIPS = Counter(
    "powercontext_replica_skips",
    "Times a read replica was taken out of use for POWERCONTEXT_REPLICA_SKIP_SECONDS, by reason (down, lagging,"
    " error; not a standby of the primary: not_in_recovery, other_cluster, other_database, other_timeline); its"
    " reads went to the primary meanwhile.",
    ["alias", "reason"],
)


def method_label(method: str | None) -> str:
    """The ``method`` label of a request: a standard HTTP method as is, any other as ``other``."""
    return method if method in HTTP_METHOD_LABELS else OTHER_METHOD_LABEL


def _registry() -> CollectorRegistry:
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _token_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def metrics_token_matches(presented: str, token: str) -> bool:
    """Whether the token presented is the whole token, in constant time whatever either's length.

    Both sides are hashed first, so ``hmac.compare_digest`` always compares two 32-byte digests: a prefix of the
    token, the token with more after it and any other wrong token take the same time and are refused alike (a
    character-by-character or a length-dependent comparison would let a client recover the token a piece at a time).
    """
    return hmac.compare_digest(_token_digest(presented), _token_digest(token))


def metrics_allowed(request) -> bool:
    """Whether this request may read the metrics (token, or loopback when allowed)."""
    token = metrics_settings().token
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return metrics_token_matches(header[len("Bearer ") :].strip(), token)
    return metrics_settings().loopback and _loopback(request.META.get("REMOTE_ADDR", ""))


SCRAPE_EXTRAS: list[Callable[[], bytes]] = []
"""Exposition text the apps add to each scrape (``scrape_extra_register``), each computed per scrape."""


def scrape_extra_register(extra: Callable[[], bytes]) -> None:
    """Add ``extra()``'s exposition text to every scrape (an app's ``AppConfig.ready``): how an app contributes a
    gauge it counts when scraped, without this module importing the app."""
    if extra not in SCRAPE_EXTRAS:
        SCRAPE_EXTRAS.append(extra)


def scrape_text() -> bytes:
    """What ``GET /metrics`` answers: every registered metric (all workers' in multiprocess mode), then each app's
    extras."""
    return generate_latest(_registry()) + b"".join(extra() for extra in SCRAPE_EXTRAS)
