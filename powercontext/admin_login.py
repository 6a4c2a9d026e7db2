"""Admin login throttling (django-axes) behind the reverse proxy: the client's address, and the lockout page.

A failed admin login costs a password hash (hundreds of milliseconds of CPU) on the workers the API shares.
django-axes counts failures per username and client address (database tables, so every gunicorn worker sees
the same counts) and, once ``AXES_FAILURE_LIMIT`` is reached, refuses further attempts of that pair for the
cool-off before any password is hashed: its backend comes first in ``AUTHENTICATION_BACKENDS`` and stops the
login there. Settings in powercontext/settings.py, operators' guide in docs/deployment.md ("The admin").
"""

from __future__ import annotations

import ipaddress
import math

from django.shortcuts import render

from infrastructure.admin_conf import admin_settings


def _address(raw: str) -> str | None:
    try:
        return str(ipaddress.ip_address(raw.strip()))
    except ValueError:
        return None


def client_ip_address(request) -> str | None:
    """The client's address: ``REMOTE_ADDR``, or behind ``POWERCONTEXT_TRUSTED_PROXIES`` proxies the address the
    outermost of them saw, which it appended to ``X-Forwarded-For`` (entries further left are the client's own
    claims and are ignored). A header too short or not an address: ``REMOTE_ADDR``.
    """
    proxies = admin_settings().trusted_proxies
    remote = _address(request.META.get("REMOTE_ADDR", ""))
    if not proxies:
        return remote
    forwarded = [part for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if len(forwarded) < proxies:
        return remote
    return _address(forwarded[-proxies]) or remote


def lockout_response(request, original_response=None, credentials=None):
    """The page a locked-out login gets: 429 with Retry-After, saying why and for how long (never the JSON/CORS
    variant django-axes sends to XMLHttpRequest callers)."""
    admin = admin_settings()
    seconds = int(admin.login_cooloff.total_seconds())
    context = {"failure_limit": admin.login_failure_limit, "cooloff_minutes": math.ceil(seconds / 60)}
    response = render(request, "admin/powercontext/login_locked_out.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response
