"""The JSON bodies and headers the client sends, built and checked before anything is sent.

Requests are serialized with ``TypeAdapter(Model).dump_python(request, mode="json", by_alias=True,
exclude_unset=True)``: a field the caller did not supply is not sent. Anything the server would refuse with 422
raises :class:`InvalidRequest` here, with the server's field paths, and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from .errors import FieldProblem, InvalidRequest
from .models import AssemblyOptions, MemorySearchRequest, PrepareContextRequest, SelectionOptions
from .prefetch import OMITTED, _Omitted

M = TypeVar("M", bound=BaseModel)


def dump_request(model_type: type[M], request: M) -> dict[str, Any]:
    body: dict[str, Any] = TypeAdapter(model_type).dump_python(request, mode="json", by_alias=True, exclude_unset=True)
    return body


def field_path(location: tuple[int | str, ...]) -> str:
    """A pydantic error location as the server's field path: ``assembly.sections[0].family``."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in {"memory", "experience", "topic_memory", "profile"} and path.endswith("]"):
            continue  # the tag of a discriminated section union, not a field
        else:
            path += f".{part}" if path else str(part)
    return path


def validated_request(model_type: type[M], fields: Mapping[str, Any]) -> M:
    """``fields`` as ``model_type``, or :class:`InvalidRequest` (what the server answers with 422), unsent."""
    try:
        return model_type.model_validate(fields)
    except ValidationError as exc:
        problems = tuple(
            FieldProblem(
                field_path(error["loc"]) + (".family" if error["type"] == "union_tag_invalid" else ""),
                error["msg"].removeprefix("Value error, "),  # a validator's own words, as the server words them
            )
            for error in exc.errors(include_url=False)
        )
        raise InvalidRequest(422, "invalid_request", "the request is invalid (not sent)", problems) from exc


IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY_MAX_CHARACTERS = 200


def idempotency_headers(key: str | None) -> dict[str, str]:
    """The ``Idempotency-Key`` header for ``key`` (none for ``None``), or :class:`InvalidRequest`, unsent.

    The server's rule: 1 to 200 printable ASCII characters. Checked here so that a bad key fails before
    anything is written, exactly like an invalid write field.
    """
    if key is None:
        return {}
    if (
        not isinstance(key, str)
        or not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX_CHARACTERS
        or not all(" " <= char <= "~" for char in key)
    ):
        problem = FieldProblem(
            IDEMPOTENCY_HEADER, f"must be 1 to {IDEMPOTENCY_KEY_MAX_CHARACTERS} printable ASCII characters"
        )
        raise InvalidRequest(422, "invalid_request", "the request is invalid (not sent)", (problem,))
    return {IDEMPOTENCY_HEADER: key}


def given_fields(**fields: Any) -> dict[str, Any]:
    """The keyword arguments the caller supplied (``None`` and :data:`OMITTED` mean "not supplied")."""
    return {name: value for name, value in fields.items() if value is not None and value is not OMITTED}


def build_prepare_request(
    scope_id: str,
    query: str,
    *,
    max_bytes: int | _Omitted = OMITTED,
    assembly: AssemblyOptions | Mapping[str, Any] | _Omitted = OMITTED,
    selection: SelectionOptions | Mapping[str, Any] | _Omitted = OMITTED,
) -> dict[str, Any]:
    """The exact JSON object :meth:`PowerContextClient.prepare_context` sends.

    Raises ``TypeError`` for ``assembly=None``, ``max_bytes=None`` or ``selection=None`` (omit them instead)
    and :class:`InvalidRequest` (with the offending field paths) for anything the server would refuse with
    422, including ``selection`` without ``assembly``.
    """
    if selection is None:
        raise TypeError("selection=None is not a valid prepare request: omit selection for no server-side selection")
    if selection is not OMITTED and assembly is OMITTED:
        problem = FieldProblem("selection", "selection is only allowed together with assembly")
        raise InvalidRequest(422, "invalid_request", "the request is invalid (not sent)", (problem,))
    if assembly is None:
        raise TypeError(
            "assembly=None is not a valid prepare request: omit assembly for the legacy output, "
            "or pass {} for the Markdown defaults"
        )
    if max_bytes is None:
        raise TypeError("max_bytes=None is not a valid prepare request: omit max_bytes for the default 8000")
    fields: dict[str, Any] = {"scope_id": scope_id, "query": query}
    if max_bytes is not OMITTED:
        fields["max_bytes"] = max_bytes
    if assembly is not OMITTED:
        if not isinstance(assembly, AssemblyOptions | Mapping):
            raise TypeError(f"assembly must be a mapping or AssemblyOptions, not {type(assembly).__name__}")
        fields["assembly"] = assembly if isinstance(assembly, AssemblyOptions) else dict(assembly)
    if selection is not OMITTED:
        if not isinstance(selection, SelectionOptions | Mapping):
            raise TypeError(f"selection must be a mapping or SelectionOptions, not {type(selection).__name__}")
        fields["selection"] = selection if isinstance(selection, SelectionOptions) else dict(selection)
    request = validated_request(PrepareContextRequest, fields)
    body = dump_request(PrepareContextRequest, request)
    if "assembly" not in request.model_fields_set:
        body.pop("assembly", None)
    return body


def build_search_request(
    scope_id: str, query: str, *, families: Iterable[str] | None = None, limit: int | None = None
) -> dict[str, Any]:
    """The exact JSON object :meth:`PowerContextClient.search_memories` sends.

    ``families`` and ``limit`` are sent only when given (``None``: the server's defaults, memory then experience,
    8 hits). Raises :class:`InvalidRequest` (with the server's field paths: ``families[0]``, ``limit``, …) for
    anything the server would refuse with 422: an unknown or repeated family, a limit outside 1..16 or above the
    pool of a family searched (experience: 8, so also when ``families`` is left to its default).
    """
    if isinstance(families, str):
        raise TypeError(f"families must be a list of family names, not the string {families!r}")
    fields: dict[str, Any] = {"scope_id": scope_id, "query": query} | given_fields(limit=limit)
    if families is not None:
        fields["families"] = list(families)
    request = validated_request(MemorySearchRequest, fields)
    return dump_request(MemorySearchRequest, request)
