"""Shared OpenAPI declarations: the one error shape on every error status."""

from collections.abc import Mapping

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

from infrastructure.request_context import is_api_write_operation
from vocabulary.errors import ERROR_CODES
from vocabulary.headers import CONSISTENCY_TOKEN_HEADER

_ERROR_DESCRIPTIONS = {
    401: "Missing, unknown or revoked API key (`unauthenticated`).",
    403: "The key may not do this to a scope it may see (`forbidden`).",
    404: "Unknown scope or a scope the key may not read, identical bodies (`not_found`).",
    409: "The request conflicts with what is stored (`conflict`).",
    410: "The content was erased (`content_erased`): `fields` holds the erasure record (`erasure.sequence`, "
    "`erasure.kind`, `erasure.erased_at`, `erasure.reason`, `erasure.erased_sha256`, `erasure.chain_sha256`).",
    422: "Any request problem: unparsable JSON, wrong types, unknown fields, out-of-range values (`invalid_request`).",
    503: "The database or a configured recall source failed; `Retry-After` is set (`service_unavailable`).",
}

ErrorSerializer = inline_serializer(
    name="Error",
    fields={
        "error": inline_serializer(
            name="ErrorDetail",
            fields={
                "code": serializers.ChoiceField(choices=list(ERROR_CODES)),
                "message": serializers.CharField(),
                "fields": inline_serializer(
                    name="ErrorField",
                    fields={"path": serializers.CharField(allow_blank=True), "message": serializers.CharField()},
                    many=True,
                ),
            },
        )
    },
)


def error_responses(*statuses: int, described: Mapping[int, str] | None = None) -> dict[int, OpenApiResponse]:
    """`responses=` entries declaring the shared error shape for the given statuses; ``described`` says what a
    status means for this endpoint where the shared sentence is too general."""
    described = described or {}
    return {
        status: OpenApiResponse(
            response=ErrorSerializer, description=described.get(status, _ERROR_DESCRIPTIONS[status])
        )
        for status in statuses
    }


def close_request_objects(result, generator, request, public):
    """drf-spectacular hook: every request body object is closed (``additionalProperties: false``).

    The server refuses unknown fields in every request body (DRF alone would ignore them); the
    published schema says so, so generated clients and fuzzers know it too.
    """
    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False
    return result


def write_consistency_tokens(result, generator, request, public):
    """drf-spectacular hook: every API write's success answers may carry its consistency token (docs/scaling.md
    §11), a header the middleware adds (infrastructure.replicas.ConsistencyTokenMiddleware), not the views."""
    header = {
        "schema": {"type": "string"},
        "description": "The write's consistency token, to send with the next prepare (only from a server with"
        " POWERCONTEXT_PREPARE_ON_REPLICAS on PostgreSQL).",
    }
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if not is_api_write_operation(method.upper(), path):
                continue
            for status, response in operation.get("responses", {}).items():
                if str(status).startswith("2"):
                    response.setdefault("headers", {})[CONSISTENCY_TOKEN_HEADER] = header
    return result


class StrictCharFieldSchema(OpenApiSerializerFieldExtension):
    """A strict string publishes the pattern the server enforces (no U+0000), in bodies and query parameters
    alike, so a fuzzer's valid data is data the server accepts."""

    target_class = "infrastructure.serializer_fields.StrictCharField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        return {**schema, "pattern": self.target.schema_pattern}
