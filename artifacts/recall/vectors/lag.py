"""``powercontext_recall_vector_lag`` on ``GET /metrics``: the live documents still without a vector by the
configured model, counted when scraped (registered with ``metrics.scrape_extra_register`` by ``ArtifactsConfig``)."""

from __future__ import annotations

import time

from django.db import DatabaseError
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from artifacts.recall.conf import recall_settings
from artifacts.recall.vectors.providers import configured_provider
from artifacts.recall.vectors.selectors import recall_vector_lag
from vocabulary.recall_modes import RECALL_MODE_HYBRID

RECALL_VECTOR_LAG_CAP = 100_000
"""The lag scrape counts no further: a larger backlog reads as this value, with ``..._lag_capped`` 1."""
RECALL_VECTOR_LAG_REFRESH_SECONDS = 30.0
"""A process counts the lag at most once in this many seconds; scrapes in between get the value it counted last."""
_LAG_COUNTED: dict[tuple[str, int], tuple[float, int]] = {}
"""Per process: (model id, dimension) -> (monotonic time counted, lag counted up to the cap)."""
_clock = time.monotonic


def recall_vector_lag_counted(model_id: str, dimension: int) -> int:
    """The lag for the scrape, bounded twice: counted up to ``RECALL_VECTOR_LAG_CAP`` documents, and at most once
    per ``RECALL_VECTOR_LAG_REFRESH_SECONDS`` in this process (a full anti-join per scrape costs a scan of every
    document, too much at a million)."""
    key = (model_id, dimension)
    now = _clock()
    counted = _LAG_COUNTED.get(key)
    if counted is not None and now - counted[0] < RECALL_VECTOR_LAG_REFRESH_SECONDS:
        return counted[1]
    lag = recall_vector_lag(model_id=model_id, dimension=dimension, cap=RECALL_VECTOR_LAG_CAP)
    _LAG_COUNTED[key] = (now, lag)
    return lag


def recall_vector_lag_text() -> bytes:
    """``powercontext_recall_vector_lag`` and ``powercontext_recall_vector_lag_capped`` while recall is hybrid: the
    live documents still without a vector by the configured model (``manage.py recall_embed`` embeds them, and with
    deferred writes each process's drainer, ``vectors.drainer``, moments after the write), counted
    by ``recall_vector_lag_counted`` (capped, refreshed at most every 30 s per process). Left out when recall is
    lexical, no provider is configured, or the database does not answer (the scrape still succeeds)."""
    if recall_settings().mode != RECALL_MODE_HYBRID:
        return b""
    provider = configured_provider()
    if provider is None:
        return b""
    try:
        lag = recall_vector_lag_counted(provider.model_id, provider.dimension)
    except DatabaseError:
        return b""
    gauge = GaugeMetricFamily(
        "powercontext_recall_vector_lag",
        "Live recall documents without a vector by the configured embedding model "
        f"(counted up to {RECALL_VECTOR_LAG_CAP}, at most every {RECALL_VECTOR_LAG_REFRESH_SECONDS:g} s).",
        labels=["model"],
    )
    gauge.add_metric([provider.model_id], lag)
    capped = GaugeMetricFamily(
        "powercontext_recall_vector_lag_capped",
        "1 when powercontext_recall_vector_lag reached its cap: the lag is at least that value.",
        labels=["model"],
    )
    capped.add_metric([provider.model_id], 1 if lag >= RECALL_VECTOR_LAG_CAP else 0)

    class _Lag:
        def collect(self):
            yield gauge
            yield capped

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Lag())
    return generate_latest(registry)
