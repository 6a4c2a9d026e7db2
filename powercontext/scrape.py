"""``GET /metrics``: the Prometheus exposition (``metrics.scrape_text``), to its bearer or loopback alone."""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import CONTENT_TYPE_LATEST

from infrastructure.errors import json_not_found
from infrastructure.metrics import metrics_allowed, scrape_text
from powercontext.health import READ_METHODS, method_not_allowed


@csrf_exempt  # as the probes (``health``): whoever may not read it gets a 404 whatever the method
def metrics_view(request):
    """``GET /metrics`` in the Prometheus text format; 404 for anyone the settings do not allow."""
    if not metrics_allowed(request):
        return json_not_found(request)
    if request.method not in READ_METHODS:
        return method_not_allowed()
    return HttpResponse(scrape_text(), content_type=CONTENT_TYPE_LATEST)
