"""The strict four-field response validator that any host can use before injecting prepared context.

It needs nothing but the standard library. A host calls :func:`validate_prepared_context` on the HTTP body
of POST /v1/context/prepare (raw bytes, text or an already parsed mapping) and gets back the exact string
to inject unchanged, or ``None`` for an empty result. Anything else raises :class:`InvalidPreparedContext`:

- exactly the four fields ``schema``, ``status``, ``content``, ``content_bytes``, nothing more or less;
- ``schema`` is ``powercontext.prepared-context.v1``;
- ``status`` is ``ready`` with a non-empty string ``content``, or ``empty`` with ``content: null`` and
  ``content_bytes: 0``;
- ``content_bytes`` is an integer equal to ``len(content.encode("utf-8"))``;
- ``content_bytes`` is within the host's own byte budget.

The content is never parsed, trimmed or re-encoded: the Markdown or legacy envelope inside is opaque.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

PREPARED_CONTEXT_SCHEMA = "powercontext.prepared-context.v1"
PREPARED_CONTEXT_FIELDS = frozenset({"schema", "status", "content", "content_bytes"})


class InvalidPreparedContext(ValueError):
    """The response is not a valid, injectable prepared context for this host."""


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidPreparedContext(f"duplicate field {key!r}")
        result[key] = value
    return result


def _parse(body: bytes | bytearray | str) -> Any:
    if isinstance(body, bytes | bytearray):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidPreparedContext("the response body is not UTF-8") from exc
    try:
        return json.loads(body, object_pairs_hook=_reject_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise InvalidPreparedContext(f"the response body is not JSON: {exc}") from exc


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_prepared_context(
    response: bytes | bytearray | str | Mapping[str, Any], *, max_bytes: int | None = None
) -> str | None:
    """Validate a prepare response; return the content to inject unchanged (``None`` when empty).

    ``max_bytes`` is the host's own byte budget for the injected content (usually the ``max_bytes`` it
    asked for); ``None`` skips that check.
    """
    payload = response if isinstance(response, Mapping) else _parse(response)
    if not isinstance(payload, Mapping):
        raise InvalidPreparedContext("the response is not a JSON object")
    keys = set(payload)
    if keys != PREPARED_CONTEXT_FIELDS:
        missing = sorted(PREPARED_CONTEXT_FIELDS - keys)
        extra = sorted(str(key) for key in keys - PREPARED_CONTEXT_FIELDS)
        raise InvalidPreparedContext(f"expected exactly four fields; missing {missing}, unexpected {extra}")
    if payload["schema"] != PREPARED_CONTEXT_SCHEMA:
        raise InvalidPreparedContext(f"unknown schema {payload['schema']!r}")
    status, content, content_bytes = payload["status"], payload["content"], payload["content_bytes"]
    if not _is_int(content_bytes) or content_bytes < 0:
        raise InvalidPreparedContext("content_bytes must be a non-negative integer")
    if status == "empty":
        if content is not None or content_bytes != 0:
            raise InvalidPreparedContext("an empty result has content null and content_bytes 0")
        return None
    if status != "ready":
        raise InvalidPreparedContext(f"unknown status {status!r}")
    if not isinstance(content, str) or not content:
        raise InvalidPreparedContext("a ready result has a non-empty string content")
    try:
        actual = len(content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidPreparedContext("content is not encodable as UTF-8") from exc
    if content_bytes != actual:
        raise InvalidPreparedContext(f"content_bytes is {content_bytes} but the content has {actual} UTF-8 bytes")
    if max_bytes is not None and actual > max_bytes:
        raise InvalidPreparedContext(f"content has {actual} UTF-8 bytes, over the host budget of {max_bytes}")
    return content
