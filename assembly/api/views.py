"""POST /v1/context/prepare: validate, call the runtime once, serialize four fields; then log it."""

import time

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from assembly.api.observe import prepare_observed
from assembly.api.serializers import PrepareContextRequestSerializer, PreparedContextSerializer
from assembly.runtime import context_prepare
from powercontext.openapi import error_responses
from powercontext.serializing import represented, validated

_ERRORS = {
    403: "The key may read the current scope but not a referenced scope this request must read (`forbidden`).",
    409: "The scope has more references than one prepare reads, stored around the services (`conflict`).",
}


class PrepareContextView(APIView):
    """Prepare one cited, budgeted string for the host to inject unchanged."""

    def dispatch(self, request, *args, **kwargs):
        self.started = time.perf_counter()
        self.prepared = None
        return super().dispatch(request, *args, **kwargs)

    @extend_schema(
        operation_id="prepare_context",
        request=PrepareContextRequestSerializer,
        responses={200: PreparedContextSerializer, **error_responses(401, 403, 404, 409, 422, 503, described=_ERRORS)},
        summary="Prepare context text",
    )
    def post(self, request):
        request_data = validated(PrepareContextRequestSerializer, request.data)
        outcome = context_prepare(principal=request.user, **request_data)
        self.prepared = (request_data, outcome)
        return Response(represented(PreparedContextSerializer, outcome.result))

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        # Every answer and refusal of this endpoint is logged (without bodies for refusals).
        if request.method == "POST":
            prepare_observed(request=request, response=response, prepared=self.prepared, started=self.started)
        return response
