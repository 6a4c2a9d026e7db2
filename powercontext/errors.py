"""The one error shape of every API response (DESIGN §4), produced by one exception handler.

{"error": {"code": "invalid_request", "message": "…", "fields": [{"path": "…", "message": "…"}]}}
"""

import logging

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import JsonResponse
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from artifacts.exceptions import Conflict, InvalidInput, NotFound
from assembly.runtime import RecallSourceFailed, ReferencedScopeForbidden

logger = logging.getLogger("powercontext")

RETRY_AFTER_SECONDS = "5"
NOT_FOUND_MESSAGE = "not found"


class ServiceUnavailable(exceptions.APIException):
    """A database or a configured recall source failed: retry later, never an empty result."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "a backing service is unavailable; retry later"
    default_code = "service_unavailable"


class RequestInvalid(exceptions.APIException):
    """A request body problem with the offending field paths."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "invalid_request"

    def __init__(self, message: str, fields: list[dict] | None = None) -> None:
        super().__init__(message)
        self.fields = fields or []


def error_body(code: str, message: str, fields: list[dict] | None = None) -> dict:
    """The JSON body of an error response."""
    return {"error": {"code": code, "message": message, "fields": fields or []}}


def _join(prefix: str, key) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    if key == "non_field_errors":
        return prefix
    return f"{prefix}.{key}" if prefix else str(key)


def flatten_errors(detail, prefix: str = "") -> list[dict]:
    if isinstance(detail, dict):
        return [f for key, value in detail.items() for f in flatten_errors(value, _join(prefix, key))]
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return [{"path": prefix, "message": str(item)} for item in detail]
        return [f for i, item in enumerate(detail) if item for f in flatten_errors(item, _join(prefix, i))]
    return [{"path": prefix, "message": str(detail)}]


def _response(status_code: int, body: dict, headers: dict | None = None) -> Response:
    return Response(body, status=status_code, headers=headers)


def exception_handler(exc, context):
    """Map every exception of an API view to the single error shape."""
    if isinstance(exc, RequestInvalid):
        return _response(422, error_body("invalid_request", str(exc.detail), exc.fields))
    if isinstance(exc, serializers.ValidationError):
        fields = flatten_errors(exc.detail)
        return _response(422, error_body("invalid_request", "the request is invalid", fields))
    if isinstance(exc, InvalidInput):
        return _response(422, error_body("invalid_request", exc.message, [{"path": exc.path, "message": exc.message}]))
    if isinstance(exc, RequestDataTooBig):
        return _response(422, error_body("invalid_request", "the request body is too large"))
    if isinstance(exc, (exceptions.ParseError, exceptions.UnsupportedMediaType)):
        return _response(422, error_body("invalid_request", f"the body must be a JSON object: {exc.detail}"))
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        return _response(401, error_body("unauthenticated", str(exc.detail)), headers={"WWW-Authenticate": "Bearer"})
    if isinstance(exc, NotFound):
        # An unknown and an unreadable scope raise the same message: existence never leaks.
        return _response(404, error_body("not_found", str(exc) or NOT_FOUND_MESSAGE))
    if isinstance(exc, exceptions.NotFound):
        return _response(404, error_body("not_found", NOT_FOUND_MESSAGE))
    if isinstance(exc, ReferencedScopeForbidden):
        # Names no scope: which references exist is not the caller's to learn from an error.
        return _response(403, error_body("forbidden", "the API key may not read a scope this request must read"))
    if isinstance(exc, exceptions.PermissionDenied):
        return _response(403, error_body("forbidden", str(exc.detail)))
    if isinstance(exc, Conflict):
        return _response(409, error_body("conflict", str(exc)))
    if isinstance(exc, exceptions.MethodNotAllowed):
        return _response(405, error_body("method_not_allowed", str(exc.detail)))
    if isinstance(exc, RecallSourceFailed):
        logger.exception("recall source failed")
        exc = ServiceUnavailable()
    if isinstance(exc, ServiceUnavailable):
        return _response(
            503, error_body("service_unavailable", str(exc.detail)), headers={"Retry-After": RETRY_AFTER_SECONDS}
        )
    if isinstance(exc, DatabaseError):
        logger.exception("database failure")
        return _response(
            503,
            error_body("service_unavailable", ServiceUnavailable.default_detail),
            headers={"Retry-After": RETRY_AFTER_SECONDS},
        )
    if isinstance(exc, exceptions.APIException):
        return _response(exc.status_code, error_body(exc.default_code, str(exc.detail)))
    return None


def json_not_found(request, exception=None):
    """Django's 404 for unrouted API paths, in the same error shape."""
    return JsonResponse(error_body("not_found", NOT_FOUND_MESSAGE), status=404)


def json_server_error(request):
    """Django's 500, in the same error shape (details go to the log, never to the client)."""
    return JsonResponse(error_body("internal_error", "an unexpected error occurred"), status=500)
