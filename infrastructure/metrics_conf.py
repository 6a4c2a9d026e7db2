"""The metrics' and logs' settings, read through one accessor: ``metrics_settings().token`` etc.

Read from ``django.conf.settings`` once and cached until a setting changes (``infrastructure/conf.py``); a bad value is
the system check error ``powercontext.E050`` naming its environment variable (registered by ``artifacts/apps.py``,
which registers what the apps add to the infrastructure). ``PROMETHEUS_MULTIPROC_DIR`` is prometheus-client's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from infrastructure import conf


@dataclass(frozen=True)
class MetricsSettings:
    token: str | None
    """The bearer token ``/metrics`` is served to; None or "": none."""
    loopback: bool
    """``/metrics`` served without a token to loopback clients."""
    json_logs: bool
    """One JSON line per request on the ``powercontext.request`` logger."""


metrics_settings = conf.Accessor(
    MetricsSettings,
    (
        conf.Field("token", "POWERCONTEXT_METRICS_TOKEN", "POWERCONTEXT_METRICS_TOKEN", conf.optional_text, None),
        conf.Field("loopback", "POWERCONTEXT_METRICS_LOOPBACK", "POWERCONTEXT_METRICS_LOOPBACK", conf.boolean, False),
        conf.Field("json_logs", "POWERCONTEXT_JSON_LOGS", "POWERCONTEXT_JSON_LOGS", conf.boolean, False),
    ),
    check_id="powercontext.E050",
)
"""``metrics_settings()``: this process's ``MetricsSettings``."""
