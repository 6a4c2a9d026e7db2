"""The admin's settings (login throttling), read through one accessor: ``admin_settings().trusted_proxies`` etc.

Read from ``django.conf.settings`` once and cached until a setting changes (``infrastructure/conf.py``); a bad value is
the system check error ``powercontext.E060`` naming its environment variable (registered by ``artifacts/apps.py``,
which registers what the apps add to the infrastructure). django-axes reads its own ``AXES_*`` settings; these are
what ``powercontext/admin_login.py`` reads of them.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from infrastructure import conf


@dataclass(frozen=True)
class AdminSettings:
    trusted_proxies: int
    """Reverse proxies appending the client's address to ``X-Forwarded-For``; 0: the connection's address."""
    login_failure_limit: int
    """Failed logins of one username from one address before the pair is locked out (``AXES_FAILURE_LIMIT``)."""
    login_cooloff: datetime.timedelta
    """How long a locked-out pair is refused (``AXES_COOLOFF_TIME``)."""


def _positive_duration(value: object) -> str | None:
    if isinstance(value, datetime.timedelta) and value > datetime.timedelta(0):
        return None
    return "must be a positive number of minutes"


admin_settings = conf.Accessor(
    AdminSettings,
    (
        conf.Field("trusted_proxies", "POWERCONTEXT_TRUSTED_PROXIES", "POWERCONTEXT_TRUSTED_PROXIES", conf.whole(0), 0),
        conf.Field(
            "login_failure_limit", "AXES_FAILURE_LIMIT", "POWERCONTEXT_ADMIN_LOGIN_FAILURE_LIMIT", conf.whole(1), 5
        ),
        conf.Field(
            "login_cooloff",
            "AXES_COOLOFF_TIME",
            "POWERCONTEXT_ADMIN_LOGIN_COOLOFF_MINUTES",
            _positive_duration,
            datetime.timedelta(minutes=15),
        ),
    ),
    check_id="powercontext.E060",
)
"""``admin_settings()``: this process's ``AdminSettings``."""
