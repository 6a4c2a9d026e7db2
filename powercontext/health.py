"""Probes for load balancers and orchestrators: no authentication, no data, only Django.

``GET /healthz``: the process answers (liveness); touches nothing, not even the database.
``GET /readyz``: the database is reachable and every migration is applied (readiness); otherwise 503 in
the API's one error shape, with ``Retry-After``.
"""

import json
import logging

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

logger = logging.getLogger("powercontext.health")

RETRY_AFTER_SECONDS = "5"
READ_METHODS = ("GET", "HEAD")
"""The methods the probes and /metrics answer; any other is a 405 in the error shape (``method_not_allowed``)."""


def _error(status: int, code: str, message: str, headers: dict | None = None) -> JsonResponse:
    body = {"error": {"code": code, "message": message, "fields": []}}
    return JsonResponse(body, status=status, headers=headers)


def method_not_allowed() -> JsonResponse:
    """405 in the API's error shape, naming ``READ_METHODS``."""
    return _error(405, "method_not_allowed", "use GET", headers={"Allow": ", ".join(READ_METHODS)})


_OK_BODY = json.dumps({"status": "ok"}).encode()


def _ok() -> HttpResponse:
    # The body encoded once: /healthz is the framework's floor of the benchmarks (docs/benchmarks.md, part 3).
    return HttpResponse(_OK_BODY, content_type="application/json", headers={"Cache-Control": "no-store"})


# CSRF-exempt: they change nothing, and a POST must get their own 405 in the error shape, not the CSRF
# middleware's HTML 403 (which also told anyone that /metrics exists).
@csrf_exempt
def healthz(request):
    """Liveness: 200 ``{"status": "ok"}`` whenever the process can answer."""
    if request.method not in READ_METHODS:
        return method_not_allowed()
    return _ok()


@csrf_exempt
def readyz(request):
    """Readiness: 200 when the database answers and has every migration applied, else 503."""
    if request.method not in READ_METHODS:
        return method_not_allowed()
    try:
        connection = connections[DEFAULT_DB_ALIAS]
        executor = MigrationExecutor(connection)  # reads the applied migrations from the database
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:  # noqa: BLE001 - whatever the driver raises, the answer is "not ready"
        logger.warning("readiness probe: the database is unreachable: %s", exc)
        return _unavailable("the database is unreachable")
    if pending:
        names = ", ".join(f"{migration.app_label}.{migration.name}" for migration, _ in pending)
        return _unavailable(f"{len(pending)} migration(s) not applied: {names}")
    return _ok()


def _unavailable(message: str) -> JsonResponse:
    return _error(
        503,
        "service_unavailable",
        message,
        headers={"Retry-After": RETRY_AFTER_SECONDS, "Cache-Control": "no-store"},
    )
