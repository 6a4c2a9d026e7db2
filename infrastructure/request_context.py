"""Per-request context: the request id (``X-Request-ID``), latency metrics and the JSON request log.

``RequestContextMiddleware`` accepts a sane incoming ``X-Request-ID`` (1–128 of ``A-Z a-z 0-9 . _ : -``)
or generates one, returns it on every response, observes the request's latency (and writes) in the
metrics, and, with ``POWERCONTEXT_JSON_LOGS`` on, logs one JSON line per request on the
``powercontext.request`` logger: request id, API key name (never the key), scope, endpoint, method,
status and duration. Views name the scope they served with ``request_annotate``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time

from infrastructure import metrics
from infrastructure.metrics_conf import metrics_settings
from infrastructure.middleware import API_PREFIXES
from vocabulary.limits import MAX_IDENTIFIER_CHARACTERS

REQUEST_ID_HEADER = "X-Request-ID"
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
READ_ONLY_POST_PATHS = frozenset({"/v1/context/prepare", "/v1/memory/search"})
"""API paths (``request.path_info``: without a script prefix) whose POST stores nothing of the caller's: a prepare
writes only its log row, a search nothing. Not counted as writes, and safe to run twice (``failover``)."""
request_logger = logging.getLogger("powercontext.request")


def is_api_write(request) -> bool:
    """Whether the request asks the API to store something: a write method on an API path, a prepare or a search
    excepted."""
    return is_api_write_operation(request.method, request.path_info)


def is_api_write_operation(method: str, path: str) -> bool:
    """``is_api_write`` of a method and a path (without a script prefix), for the OpenAPI file too."""
    return method in WRITE_METHODS and path.startswith(API_PREFIXES) and path not in READ_ONLY_POST_PATHS


def request_annotate(request, *, scope: str | None) -> None:
    """Name the scope a request served, for the request log (a DRF or a Django request): as sent, cut one character
    past the longest valid id, so a refused 2 MB ``scope_id`` costs the log a line of ordinary length."""
    if scope is not None:
        scope = scope[: MAX_IDENTIFIER_CHARACTERS + 1]
    getattr(request, "_request", request).powercontext_scope = scope


def _request_id(request) -> str:
    incoming = request.headers.get(REQUEST_ID_HEADER, "")
    # 32 random hex digits, as uuid4().hex gave, at a fraction of its cost (no UUID object per request).
    return incoming if incoming and _SANE_REQUEST_ID.fullmatch(incoming) else os.urandom(16).hex()


def _endpoint(request) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"
    return match.view_name or "unnamed"


def _key_name(request) -> str | None:
    # DRF puts the authenticated API-key principal on the Django request; never evaluate a lazy user here.
    user = request.__dict__.get("user")
    return getattr(user, "name", None) if hasattr(type(user), "can_write") else None


class RequestContextMiddleware:
    """Request id in and out, one latency observation, and one JSON log line (when enabled) per request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        request.request_id = _request_id(request)
        response = self.get_response(request)
        duration = time.perf_counter() - started
        response[REQUEST_ID_HEADER] = request.request_id
        endpoint = _endpoint(request)
        status = response.status_code
        metrics.REQUEST_DURATION.labels(endpoint, metrics.method_label(request.method), str(status)).observe(duration)
        if is_api_write(request):
            metrics.WRITES.labels(endpoint, str(status)).inc()
        if metrics_settings().json_logs:
            line = {
                "request_id": request.request_id,
                "key": _key_name(request),
                "scope": getattr(request, "powercontext_scope", None),
                "endpoint": endpoint,
                "method": request.method,
                "path": request.path,
                "status": status,
                "duration_ms": round(duration * 1000, 3),
            }
            request_logger.info(json.dumps(line, ensure_ascii=True))
        return response
