"""An API request's query parameters, as the contract reads them: UTF-8, each given once, not too many.

Django decodes a query string leniently: bytes that are not UTF-8 (``%FF``, or ``%ED%A0%80``, a lone surrogate)
become U+FFFD, so a client's malformed id would be looked up as another one instead of being refused. Here the
query string is checked as the client sent it, before Django's own parsing, whose field limit
(``DATA_UPLOAD_MAX_NUMBER_FIELDS``) is checked first too: each problem is a 422 in the one error shape.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from django.conf import settings
from django.core.handlers.wsgi import get_bytes_from_wsgi

from vocabulary.errors import InvalidInput
from vocabulary.limits import MAX_ERROR_FIELDS

NOT_UTF8 = "is not valid UTF-8 (a lone surrogate included)"


def _raw_pairs(request) -> list[tuple[str, str]]:
    """The query string's pairs, percent-decoded, one character per byte (latin-1): bytes, not yet text."""
    raw = get_bytes_from_wsgi(request.META, "QUERY_STRING", "").decode("latin-1")
    most = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    try:
        return parse_qsl(raw, keep_blank_values=True, encoding="latin-1", max_num_fields=most)
    except ValueError:  # more fields than that: refused before anything else reads them
        raise InvalidInput(f"the request has more than {most} query parameters") from None


def _text(raw: str) -> str | None:
    try:
        return raw.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        return None


def query_parameters(request) -> dict[str, str]:
    """The query parameters, each given once (a repeated one is refused: which value counts would be a guess), every
    name and value valid UTF-8; else InvalidInput listing the parameters at fault."""
    undecodable = [
        raw_name.encode("latin-1").decode("utf-8", "replace")  # the name as Django reads it: the path of the error
        for raw_name, raw_value in _raw_pairs(request)
        if _text(raw_name) is None or _text(raw_value) is None
    ]
    if undecodable:
        fields = [{"path": name, "message": NOT_UTF8} for name in undecodable[:MAX_ERROR_FIELDS]]
        raise InvalidInput("a query parameter is not valid UTF-8", fields=fields)
    repeated = [name for name, values in request.query_params.lists() if len(values) > 1]
    if repeated:
        fields = [{"path": name, "message": "is given more than once"} for name in repeated[:MAX_ERROR_FIELDS]]
        raise InvalidInput("a query parameter is given more than once", fields=fields)
    return request.query_params.dict()
