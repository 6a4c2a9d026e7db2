"""Exceptions of the PowerContext client.

Every failure of a call raises a :class:`PowerContextError`: an HTTP error response of the API
(:class:`APIError` and one subclass per status), a transport failure (:class:`TransportError`,
:class:`Timeout`) or a response that breaks the contract (:class:`InvalidResponse`). Hosts that must
fail open catch :class:`PowerContextError` alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from .validation import InvalidPreparedContext


class PowerContextError(Exception):
    """Base class of every error the client raises for a call."""


class TransportError(PowerContextError):
    """The server could not be reached, or the connection failed mid-request."""


class Timeout(TransportError):
    """The request did not complete within the client's timeout."""


class InvalidResponse(PowerContextError):
    """The server answered something that is not the documented response."""


class TooManyEntries(PowerContextError):
    """A memory revision lists more live entries than the caller's ``max_entries`` bound (nothing is returned)."""


class InvalidPreparedContextResponse(InvalidResponse, InvalidPreparedContext):
    """A prepare response that fails the strict four-field validation (or the host's byte budget)."""


@dataclass(frozen=True)
class FieldProblem:
    path: str
    message: str


class APIError(PowerContextError):
    """An error response of the API: ``{"error": {"code", "message", "fields"}}``."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        fields: tuple[FieldProblem, ...] = (),
        retry_after: str | None = None,
    ) -> None:
        super().__init__(f"HTTP {status_code} {code}: {message}")
        self.status_code = status_code
        self.code = code
        self.message = message
        self.fields = fields
        self.retry_after = retry_after


class InvalidRequest(APIError):
    """422: the request body or query was refused; never retry it with a relaxed request."""


class Unauthenticated(APIError):
    """401: missing, unknown or revoked API key."""


class Forbidden(APIError):
    """403: the key may not read a referenced scope, or may not write this scope."""


class NotFound(APIError):
    """404: unknown scope (or not readable), or nothing at that exact revision."""


class Conflict(APIError):
    """409: the expected head revision is no longer the head, or the entry already exists."""


class ContentErased(APIError):
    """410: the cited text was erased by an operator (its hashes and history stay); ``fields`` hold the erasure
    record. Retrying never brings it back."""


class ServiceUnavailable(APIError):
    """503: the database or a configured recall source failed; ``retry_after`` is set."""


class ServerError(APIError):
    """Any other 5xx response."""


_BY_STATUS: dict[int, type[APIError]] = {
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: ContentErased,
    422: InvalidRequest,
    503: ServiceUnavailable,
}


def api_error_class(status_code: int) -> type[APIError]:
    if status_code in _BY_STATUS:
        return _BY_STATUS[status_code]
    return ServerError if status_code >= 500 else APIError
