"""The read replicas' settings, read through one accessor: ``replica_settings().aliases`` etc.

Read from ``django.conf.settings`` once and cached until a setting changes (``infrastructure/conf.py``); a bad value is
the system check error ``powercontext.E020`` naming its environment variable (registered by ``artifacts/apps.py``,
which registers what the apps add to the infrastructure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infrastructure import conf


@dataclass(frozen=True)
class ReplicaSettings:
    aliases: tuple[str, ...]
    """The database aliases of the read replicas (from POWERCONTEXT_READ_REPLICA_URLS); empty: none."""
    max_lag_seconds: int
    skip_seconds: int
    prepare_on_replicas: bool
    health_dir: str
    """"" when each process probes on its own."""


def _field(name: str, setting: str, problem: conf.Problem, default: object, **kwargs: Any) -> conf.Field:
    return conf.Field(name, setting, kwargs.pop("variable", setting), problem, default, **kwargs)


replica_settings = conf.Accessor(
    ReplicaSettings,
    (
        _field(
            "aliases",
            "POWERCONTEXT_READ_REPLICAS",
            conf.names,
            [],
            variable="POWERCONTEXT_READ_REPLICA_URLS",
            convert=tuple,
        ),
        _field("max_lag_seconds", "POWERCONTEXT_REPLICA_MAX_LAG_SECONDS", conf.whole(1), 10),
        # 0 (a test's "check again at every read") works; the environment asks for at least 1.
        _field("skip_seconds", "POWERCONTEXT_REPLICA_SKIP_SECONDS", conf.whole(0), 10),
        _field("prepare_on_replicas", "POWERCONTEXT_PREPARE_ON_REPLICAS", conf.boolean, False),
        _field("health_dir", "POWERCONTEXT_REPLICA_HEALTH_DIR", conf.optional_path, "", convert=conf.path_text),
    ),
    check_id="powercontext.E020",
)
"""``replica_settings()``: this process's ``ReplicaSettings``."""
