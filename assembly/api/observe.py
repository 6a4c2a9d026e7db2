"""What each prepare leaves behind besides its answer: a prepare-log row and the prepare metrics.

Called once per request by ``PrepareContextView.finalize_response``, for answers and refusals alike.
Nothing here can change, delay or fail the response: the log row is queued for the background writer (or
written, with ``POWERCONTEXT_PREPARE_LOG_WRITER=inline``) when the response is closed, and that never raises.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from artifacts import services
from artifacts.conf import prepare_log_settings
from assembly.replay import MODE_LEGACY, MODE_MARKDOWN, content_sha256, options_record
from assembly.runtime import PrepareOutcome
from infrastructure import metrics
from infrastructure.request_context import request_annotate


def _sent_scope(request: Request) -> str:
    # Only a body that was parsed (a 401 is refused before the body is read).
    data = request.__dict__.get("_full_data")
    scope_id = data.get("scope_id") if isinstance(data, dict) else None
    return scope_id if isinstance(scope_id, str) else ""


def _observe_result(outcome: PrepareOutcome, max_bytes: int) -> None:
    result = outcome.result
    metrics.PREPARE_CONTENT_BYTES.observe(result.content_bytes)
    metrics.PREPARE_BUDGET_FILL.observe(result.content_bytes / max_bytes if max_bytes else 0.0)
    # Counted first: one labelled increment per kind of decision, not one per candidate.
    counts = Counter((d.citation.family, d.outcome, d.reason or "") for d in result.decisions)
    for labels, count in counts.items():
        metrics.PREPARE_CANDIDATES.labels(*labels).inc(count)


def prepare_observed(
    *, request: Request, response: Response, prepared: tuple[dict[str, Any], PrepareOutcome] | None, started: float
) -> None:
    """Record one prepare request (log row, metrics, the request log's scope)."""
    principal = request.__dict__.get("_user")
    api_key_id = getattr(principal, "api_key_id", None)
    scope_sent = _sent_scope(request)
    request_annotate(request, scope=scope_sent or None)
    if prepared is not None:
        _observe_result(prepared[1], prepared[0]["max_bytes"])
    if not prepare_log_settings().enabled:
        return  # nothing else to record: the log's fields (its evidence for one) are not even built
    fields: dict[str, Any] = {}
    if prepared is not None:
        validated, outcome = prepared
        result = outcome.result
        fields = {
            "mode": MODE_LEGACY if validated["options"] is None else MODE_MARKDOWN,
            "query": validated["query"],
            "max_bytes": validated["max_bytes"],
            "options": options_record(validated["options"], outcome.selection, outcome.recalled, outcome.recall),
            "scopes": outcome.scopes,
            "recalled": outcome.recalled,
            "result_status": result.status,
            "content_bytes": result.content_bytes,
            "content_sha256": content_sha256(result.content),
        }
    elif response.status_code >= 400 and isinstance(response.data, dict):
        fields = {"error_code": str(response.data.get("error", {}).get("code", ""))}
    entry = services.PrepareLogWrite(
        http_status=response.status_code,
        duration_ms=(time.perf_counter() - started) * 1000,
        api_key_id=api_key_id,
        scope_sent=scope_sent,
        **fields,
    )
    # Recorded when the server closes the response, after the client has the whole answer, so it never delays
    # it (Django runs a response's closers from ``close()``, which the WSGI server calls last): queued for the
    # background writer (no statement in the worker at all), or inserted there and then ("inline").
    # django-stubs leave out HttpResponseBase's private _resource_closers, which close() runs.
    closers = response._resource_closers  # type: ignore[attr-defined]
    if prepare_log_settings().writer == "inline":
        closers.append(lambda: services.prepare_log_write(entry=entry))
    else:
        closers.append(lambda: services.prepare_log_enqueue(entry=entry))
