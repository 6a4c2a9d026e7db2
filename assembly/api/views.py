"""POST /v1/context/prepare: validate, call the runtime once, serialize four fields; then log it. POST
/v1/memory/search: the same recall as ranked hits."""

import time
from typing import Any, cast

from django.http import HttpRequest, HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assembly.api.observe import prepare_observed
from assembly.api.serializers import (
    MemorySearchRequestSerializer,
    MemorySearchResultSerializer,
    PrepareContextRequestSerializer,
    PreparedContextSerializer,
)
from assembly.runtime import PrepareOutcome, ReadPrincipal, context_prepare
from assembly.search import memory_search
from infrastructure import replicas
from infrastructure.openapi import error_responses
from infrastructure.serializing import represented, validated

PREPARE_ERROR_STATUSES = (401, 403, 404, 409, 422, 503)
"""The error statuses the endpoint declares (its OpenAPI responses); the prepare log's status filter lists them."""
_ERRORS = {
    403: "The key may read the current scope but not a referenced scope this request must read (`forbidden`).",
    409: "The scope has more references than one prepare reads, stored around the services (`conflict`).",
}


_SERVED_BY = OpenApiParameter(
    replicas.SERVED_BY_HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    enum=["primary", "replica"],
    response=[200],
    description="Where the prepare's reads ran; sent only by a server with POWERCONTEXT_PREPARE_ON_REPLICAS.",
)


def _principal(request: Request) -> ReadPrincipal:
    """The authenticated caller. The stubs type ``request.user`` as Django's user; here it is the API key's
    principal (``artifacts.auth.ApiKeyAuthentication``, the API's one authentication, under ``IsAuthenticated``)."""
    return cast(ReadPrincipal, request.user)


def _token(request: Request) -> str | None:
    """The request's consistency token, validated (a malformed one is a 422, whatever the database)."""
    token = request.headers.get(replicas.CONSISTENCY_TOKEN_HEADER)
    if token is None:
        return None
    token = token.strip()
    if not replicas.consistency_token_valid(token):
        raise ValidationError(
            {replicas.CONSISTENCY_TOKEN_HEADER: ["must be a consistency token a write answered with"]}
        )
    return token


class PrepareContextView(APIView):
    """Prepare one cited, budgeted string for the host to inject unchanged."""

    started: float
    prepared: tuple[dict[str, Any], PrepareOutcome] | None

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        self.started = time.perf_counter()
        self.prepared = None
        return super().dispatch(request, *args, **kwargs)

    @extend_schema(
        operation_id="prepare_context",
        request=PrepareContextRequestSerializer,
        parameters=[
            OpenApiParameter(
                replicas.CONSISTENCY_TOKEN_HEADER,
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                description=(
                    "The consistency token of the caller's last write (that response's header of the same name). A"
                    " server with POWERCONTEXT_PREPARE_ON_REPLICAS serves the prepare from a read replica only when"
                    " the replica has replayed it, else from the primary: the write is in this prepare. Elsewhere"
                    " (SQLite, the setting off) it changes nothing, but a malformed one is refused (422) everywhere,"
                    " so a client's bug shows before it matters."
                ),
                pattern=r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$",
            ),
            _SERVED_BY,
        ],
        responses={
            200: PreparedContextSerializer,
            **error_responses(*PREPARE_ERROR_STATUSES, described=_ERRORS),
        },
        summary="Prepare context text",
    )
    def post(self, request: Request) -> Response:
        request_data = validated(PrepareContextRequestSerializer, request.data)
        token = _token(request)
        outcome, served_by = replicas.replica_serve(
            lambda: context_prepare(principal=_principal(request), **request_data), token=token
        )
        self.prepared = (request_data, outcome)
        response = Response(represented(PreparedContextSerializer, outcome.result))
        if replicas.prepare_on_replicas():
            response[replicas.SERVED_BY_HEADER] = served_by
        return response

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        # Every answer and refusal of this endpoint is logged (without bodies for refusals).
        if request.method == "POST":
            prepare_observed(request=request, response=response, prepared=self.prepared, started=self.started)
        return response


SEARCH_ERROR_STATUSES = (401, 403, 404, 409, 422, 503)
_SEARCH_ERRORS = {
    403: "The key may read the current scope but not a referenced scope this search must read (`forbidden`).",
    409: "The scope has more references than one search reads, stored around the services (`conflict`).",
}


class MemorySearchView(APIView):
    """Search memories and experiences: prepare's recall as ranked hits with citations and scores."""

    @extend_schema(
        operation_id="search_memories",
        request=MemorySearchRequestSerializer,
        responses={
            200: MemorySearchResultSerializer,
            **error_responses(*SEARCH_ERROR_STATUSES, described=_SEARCH_ERRORS),
        },
        summary="Search memories",
        description=(
            "The ranked candidates prepare would pool for this query (the same recall, lexical or hybrid, the same "
            "abstention, the same authorization of every scope read before anything is read), unrendered and with no "
            "byte budget: per family asked, each scope's first `limit` in recall's order, the current scope first."
        ),
    )
    def post(self, request: Request) -> Response:
        request_data = validated(MemorySearchRequestSerializer, request.data)
        result = memory_search(principal=_principal(request), **request_data)
        return Response(represented(MemorySearchResultSerializer, result))
