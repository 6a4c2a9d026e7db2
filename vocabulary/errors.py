"""Domain errors: each carries its own error code, HTTP status and client-facing message.

Raised by storage, recall, the runtime and the HTTP layer; one generic exception handler
(``infrastructure.errors``) turns any of them into the one error shape of DESIGN §4 without knowing
the app that raised it (Zulip's JsonableError).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence

from .limits import MAX_UNKNOWN_FIELDS_NAMED

ERROR_CODES = (
    "invalid_request",
    "unauthenticated",
    "forbidden",
    "not_found",
    "conflict",
    "content_erased",
    "method_not_allowed",
    "service_unavailable",
    "internal_error",
)
"""Every ``error.code`` the API answers with."""

RETRY_AFTER_SECONDS = 5
UNKNOWN_FIELD_MESSAGE = "unknown field"


def unknown_field_problems(keys: Iterable[object], allowed: Container[str], path: str) -> list[tuple[str, str]]:
    """``(path, message)`` for the unknown keys of the object at ``path``: the first MAX_UNKNOWN_FIELDS_NAMED
    by name, then one entry at the object's own path counting the others (so the answer stays small)."""
    unknown = [key for key in keys if key not in allowed]
    named = [
        (f"{path}.{key}" if path else str(key), UNKNOWN_FIELD_MESSAGE) for key in unknown[:MAX_UNKNOWN_FIELDS_NAMED]
    ]
    if len(unknown) > MAX_UNKNOWN_FIELDS_NAMED:
        named.append((path, f"{len(unknown) - MAX_UNKNOWN_FIELDS_NAMED} more unknown fields not named"))
    return named


class DomainError(Exception):
    """An expected failure with its place in the error shape.

    ``str(exc)`` is the detailed message for logs and operator pages; ``public_message`` is what a
    client reads (the detailed message unless a subclass fixes a public one, e.g. to leak nothing).
    """

    code = "invalid_request"
    http_status = 422
    default_message = "the request is invalid"
    fixed_public_message: str | None = None
    log_with_traceback = False

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.default_message)

    @property
    def public_message(self) -> str:
        return self.fixed_public_message or str(self)

    @property
    def fields(self) -> list[dict[str, str]]:
        """Offending field paths with their messages (``[{"path", "message"}]``)."""
        return []

    @property
    def headers(self) -> dict[str, str]:
        return {}


class InvalidInput(DomainError):
    """A value cannot be accepted; ``fields`` names every offending path (422 invalid_request)."""

    def __init__(self, message: str, *, path: str = "", fields: Sequence[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self._fields = list(fields) if fields is not None else [{"path": path, "message": message}]

    @property
    def fields(self) -> list[dict[str, str]]:
        return self._fields


class NotFound(DomainError):
    """The thing does not exist, or may not be seen: both answer the same (404 not_found)."""

    code = "not_found"
    http_status = 404
    default_message = "not found"


class Forbidden(DomainError):
    """The key may see the scope but not do this (403 forbidden)."""

    code = "forbidden"
    http_status = 403
    default_message = "the API key may not do this"


class Conflict(DomainError):
    """A write contradicts the current state: the head moved, or an entry exists / is gone (409)."""

    code = "conflict"
    http_status = 409
    default_message = "the request conflicts with the current state"


class ContentErased(DomainError):
    """The text a citation names was erased (``manage.py erase``); its hashes and history stay (410 content_erased).

    ``erasure`` is the record that erased it, as clients may see it; ``fields`` carries it in the one error shape,
    one ``erasure.<name>`` path per value.
    """

    code = "content_erased"
    http_status = 410
    default_message = "the content was erased"

    def __init__(self, erasure: dict[str, object]) -> None:
        super().__init__(f"the content was erased (erasure #{erasure.get('sequence')})")
        self.erasure = dict(erasure)

    @property
    def fields(self) -> list[dict[str, str]]:
        return [{"path": f"erasure.{name}", "message": str(value)} for name, value in self.erasure.items()]


class ServiceUnavailable(DomainError):
    """A database or a configured recall source failed: retry later, never an empty result (503)."""

    code = "service_unavailable"
    http_status = 503
    default_message = "a backing service is unavailable; retry later"
    fixed_public_message = default_message

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(RETRY_AFTER_SECONDS)}
