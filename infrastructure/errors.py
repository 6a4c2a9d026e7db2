"""The one error shape of every API response (DESIGN §4), produced by one exception handler.

{"error": {"code": "invalid_request", "message": "…", "fields": [{"path": "…", "message": "…"}]}}

Domain errors (``vocabulary.errors``) carry their own code, status and message, so this module maps
them without knowing which app raised them; it maps DRF's and Django's own exceptions likewise.
"""

import logging

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import JsonResponse
from rest_framework import exceptions, serializers
from rest_framework.response import Response

from infrastructure import metrics
from infrastructure.failover import (
    DATABASE_UNAVAILABLE_ATTRIBUTE,
    database_error_is_failover,
    database_error_is_transient,
    database_retry_pending,
)
from vocabulary.errors import DomainError, ServiceUnavailable
from vocabulary.escaping import encodable
from vocabulary.limits import MAX_ERROR_FIELDS

logger = logging.getLogger("powercontext")

NOT_FOUND_MESSAGE = "not found"
INTERNAL_ERROR_MESSAGE = "an unexpected error occurred"
BAD_REQUEST_MESSAGE = "the request is malformed"


def error_body(code: str, message: str, fields: list[dict] | None = None) -> dict:
    """The JSON body of an error response; every path and message encodable as UTF-8.

    At most MAX_ERROR_FIELDS entries: past that, the last one counts those left out (path ``""``, the body).
    """
    fields = list(fields or [])
    if len(fields) > MAX_ERROR_FIELDS:
        left_out = len(fields) - (MAX_ERROR_FIELDS - 1)
        fields = [*fields[: MAX_ERROR_FIELDS - 1], {"path": "", "message": f"{left_out} more problems not listed"}]
    return {
        "error": {
            "code": code,
            "message": encodable(message),
            "fields": [{"path": encodable(f["path"]), "message": encodable(f["message"])} for f in fields],
        }
    }


def _join(prefix: str, key) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    if key == "non_field_errors":
        return prefix
    return f"{prefix}.{key}" if prefix else str(key)


def flatten_errors(detail, prefix: str = "") -> list[dict]:
    """DRF's nested error detail as ``[{"path", "message"}]`` with JSON-style paths."""
    if isinstance(detail, dict):
        return [f for key, value in detail.items() for f in flatten_errors(value, _join(prefix, key))]
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return [{"path": prefix, "message": str(item)} for item in detail]
        return [f for i, item in enumerate(detail) if item for f in flatten_errors(item, _join(prefix, i))]
    return [{"path": prefix, "message": str(detail)}]


def _log_outage(what: str, exc: BaseException, *, level: int = logging.WARNING) -> None:
    # One line per failure, with its cause: an outage must not flood the log with tracebacks (they are at
    # debug level, for whoever needs them).
    cause = exc.__cause__ or exc
    logger.log(level, "%s: %s: %s", what, type(cause).__name__, str(cause).splitlines()[0] if str(cause) else "")
    logger.debug("%s", what, exc_info=exc)


def _domain_response(exc: DomainError, *, cause: str | None = None) -> Response:
    if exc.http_status == 503:
        # Which backing service failed: a domain error may name it (``unavailable_cause``).
        metrics.UNAVAILABLE.labels(cause or getattr(exc, "unavailable_cause", "other")).inc()
    if exc.log_with_traceback:
        _log_outage(str(exc), exc)
    return Response(error_body(exc.code, exc.public_message, exc.fields), status=exc.http_status, headers=exc.headers)


def _framework_error(exc: Exception) -> tuple[int, dict, dict | None] | None:
    """DRF's and Django's own exceptions as (status, body, headers), or None."""
    if isinstance(exc, serializers.ValidationError):
        return 422, error_body("invalid_request", "the request is invalid", flatten_errors(exc.detail)), None
    if isinstance(exc, RequestDataTooBig):
        return 422, error_body("invalid_request", "the request body is too large"), None
    if isinstance(exc, (exceptions.ParseError, exceptions.UnsupportedMediaType)):
        return 422, error_body("invalid_request", f"the body must be a JSON object: {exc.detail}"), None
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        return 401, error_body("unauthenticated", str(exc.detail)), {"WWW-Authenticate": "Bearer"}
    if isinstance(exc, exceptions.NotFound):
        return 404, error_body("not_found", NOT_FOUND_MESSAGE), None
    if isinstance(exc, exceptions.PermissionDenied):
        return 403, error_body("forbidden", str(exc.detail)), None
    if isinstance(exc, exceptions.MethodNotAllowed):
        return 405, error_body("method_not_allowed", str(exc.detail)), None
    if isinstance(exc, exceptions.APIException):
        return exc.status_code, error_body(exc.default_code, str(exc.detail)), None
    return None


def exception_handler(exc, context):
    """Map every exception of an API view to the single error shape."""
    if isinstance(exc, DomainError):
        return _domain_response(exc)
    if database_error_is_transient(exc):
        # The database is down, unreachable, failing over or busy past its timeout: a retry can succeed.
        # A request about to run once more (infrastructure.failover) logs only the outcome of its last attempt.
        failover = database_error_is_failover(exc)
        retrying = failover and database_retry_pending(context.get("request"))
        _log_outage("database unavailable", exc, level=logging.DEBUG if retrying else logging.WARNING)
        response = _domain_response(ServiceUnavailable(), cause="database")
        if failover:
            setattr(response, DATABASE_UNAVAILABLE_ATTRIBUTE, True)
        return response
    if isinstance(exc, DatabaseError):
        # An integrity or programming error is permanent: retrying would fail forever, so it is no 503.
        logger.error("database error", exc_info=exc)
        return Response(error_body("internal_error", INTERNAL_ERROR_MESSAGE), status=500)
    mapped = _framework_error(exc)
    if mapped is None:
        return None
    status, body, headers = mapped
    return Response(body, status=status, headers=headers)


def json_not_found(request, exception=None):
    """Django's 404 for unrouted API paths, in the same error shape."""
    return JsonResponse(error_body("not_found", NOT_FOUND_MESSAGE), status=404)


def json_bad_request(request, exception=None):
    """Django's 400 (a Host header not in ALLOWED_HOSTS, a request it finds suspicious before any view), in the same
    error shape; what Django found goes to its security log, not to the client."""
    return JsonResponse(error_body("invalid_request", BAD_REQUEST_MESSAGE), status=400)


def json_server_error(request):
    """Django's 500, in the same error shape (details go to the log, never to the client)."""
    return JsonResponse(error_body("internal_error", INTERNAL_ERROR_MESSAGE), status=500)
