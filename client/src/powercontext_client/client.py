"""The synchronous PowerContext HTTP client.

Requests are serialized with ``TypeAdapter(Model).dump_python(request, mode="json", by_alias=True,
exclude_unset=True)``: a field the caller did not supply is not sent. For :meth:`prepare_context` this means
that ``assembly`` is left out unless given (the legacy output), ``{}`` and ``{"sections": []}`` are sent
exactly as given, and ``assembly=None`` is refused before anything is sent. ``selection`` (server-side memory
selection) is sent only when given, and only together with ``assembly``. The client never retries; every
write takes an ``idempotency_key`` (sent as the ``Idempotency-Key`` header) so that a caller's own retry of a
write whose answer was lost returns the original result instead of writing twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from .errors import (
    APIError,
    FieldProblem,
    InvalidPreparedContextResponse,
    InvalidResponse,
    Timeout,
    TooManyEntries,
    TransportError,
    api_error_class,
)
from .models import (
    AssemblyOptions,
    EntryVersion,
    Error,
    ExactEntryVersion,
    ExactRevision,
    ExperienceWriteRequest,
    HistoryPage,
    MemoryEntryRemoveRequest,
    MemoryEntryWriteRequest,
    MemorySearchResult,
    PreparedContext,
    ProfileCandidate,
    ProfileCandidateDecisionRequest,
    ProfileCandidateProposeRequest,
    ScopeListPage,
    SelectionOptions,
    TopicMemoryWriteRequest,
    WriteResult,
)
from .prefetch import OMITTED, _Omitted
from .request_bodies import (
    build_prepare_request,
    build_search_request,
    dump_request,
    given_fields,
    idempotency_headers,
    validated_request,
)
from .validation import InvalidPreparedContext, validate_prepared_context

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)

DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_ENTRIES = 10_000
ENTRIES_PAGE_MAX = 100
"""The server's largest ``entries_limit`` (the contract's maximum): reading a whole memory revision asks for pages
this large, so 10,000 entries cost 100 requests rather than 200 at the default page."""
"""Live entries :meth:`PowerContextClient.read_exact_memory_revision` collects at most, unless told otherwise."""
USER_AGENT = "powercontext-client/0.1"


CONSISTENCY_TOKEN_HEADER = "PowerContext-Consistency-Token"


class PowerContextClient:
    """A client of one PowerContext server with one API key.

    Reads its own writes: the consistency token of the last write answered (a server serving prepares on read
    replicas sends one) goes with the next prepare, which the server then answers from a replica that has
    replayed the write, or from the primary (``last_consistency_token``).

    ``transport`` lets tests (or hosts) plug in an ``httpx`` transport such as ``httpx.MockTransport``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not api_key:
            raise ValueError("api_key is required")
        all_headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json", "User-Agent": USER_AGENT}
        all_headers.update(headers or {})
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=all_headers,
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
            trust_env=False,
        )
        self.last_consistency_token: str | None = None
        """The token of the last write this client got one for; sent with every prepare after it."""

    # --- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PowerContextClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        content = None
        headers = dict(headers or {})
        if body is not None:
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        try:
            response = self._http.request(method, path, content=content, params=params, headers=headers)
        except httpx.TimeoutException as exc:
            raise Timeout(f"{method} {path} timed out: {exc}") from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"{method} {path} failed: {exc}") from exc
        if response.status_code >= 300:
            raise self._error(response)
        token = response.headers.get(CONSISTENCY_TOKEN_HEADER)
        if token:
            self.last_consistency_token = token
        return response

    @staticmethod
    def _error(response: httpx.Response) -> APIError | InvalidResponse:
        error_class = api_error_class(response.status_code)
        retry_after = response.headers.get("Retry-After")
        try:
            error = Error.model_validate_json(response.content)
        except ValidationError:
            if response.status_code < 400:
                return InvalidResponse(f"unexpected HTTP {response.status_code}")
            return error_class(response.status_code, "unknown", response.text[:200], retry_after=retry_after)
        detail = error.error
        fields = tuple(FieldProblem(field.path, field.message) for field in detail.fields)
        return error_class(response.status_code, detail.code, detail.message, fields, retry_after)

    @staticmethod
    def _parse(model_type: type[M], response: httpx.Response) -> M:
        try:
            return model_type.model_validate_json(response.content)
        except ValidationError as exc:
            raise InvalidResponse(f"the response is not a {model_type.__name__}: {exc}") from exc

    # --- prepare ----------------------------------------------------------------------------

    def prepare_context(
        self,
        scope_id: str,
        query: str,
        *,
        max_bytes: int | _Omitted = OMITTED,
        assembly: AssemblyOptions | Mapping[str, Any] | _Omitted = OMITTED,
        selection: SelectionOptions | Mapping[str, Any] | _Omitted = OMITTED,
        host_max_bytes: int | None = None,
    ) -> PreparedContext:
        """POST /v1/context/prepare. Omit ``assembly`` for the legacy envelope; never pass ``None``.

        ``selection`` (e.g. ``{"policy": "authority-v1", "min_score": 0.2, "max_tokens": 600}``) asks the
        server to select memory under its policy; it is sent only when given and needs ``assembly``.
        The response is checked by :func:`validate_prepared_context` against ``host_max_bytes`` (default:
        the ``max_bytes`` asked for, or 8000) before it is returned.
        """
        body = build_prepare_request(scope_id, query, max_bytes=max_bytes, assembly=assembly, selection=selection)
        token = self.last_consistency_token
        headers = {CONSISTENCY_TOKEN_HEADER: token} if token else None
        response = self._send("POST", "/v1/context/prepare", body=body, headers=headers)
        budget = host_max_bytes if host_max_bytes is not None else body.get("max_bytes", 8000)
        try:
            validate_prepared_context(response.content, max_bytes=budget)
        except InvalidPreparedContext as exc:
            raise InvalidPreparedContextResponse(str(exc)) from exc
        return PreparedContext.model_validate_json(response.content)

    # --- search -----------------------------------------------------------------------------

    def search_memories(
        self, scope_id: str, query: str, *, families: Iterable[str] | None = None, limit: int | None = None
    ) -> MemorySearchResult:
        """POST /v1/memory/search: prepare's recall as ranked hits, each with its exact citation, body and scores.

        ``families`` (``["memory", "experience"]`` by default, in the order their hits are listed) and ``limit``
        (hits per family and scope: 8 by default, 1 to 16, at most 8 when experience is searched) are sent only
        when given; anything the server would refuse raises :class:`InvalidRequest` before anything is sent.
        ``status`` is ``empty`` when there is no hit (recall abstained: ``recall.abstained`` names the scopes).
        """
        body = build_search_request(scope_id, query, families=families, limit=limit)
        return self._parse(MemorySearchResult, self._send("POST", "/v1/memory/search", body=body))

    # --- exact reads ------------------------------------------------------------------------

    def read_exact_revision(
        self,
        scope_id: str,
        family: str,
        artifact_id: str,
        revision: int,
        *,
        entries_after: str | None = None,
        entries_limit: int | None = None,
    ) -> ExactRevision:
        """GET /v1/artifacts/revision: that exact revision, never the head instead.

        A memory revision lists one page of its live entries (in entry-id order): pass ``next_entries_after`` as
        ``entries_after`` for the next one (``entries_after`` and ``entries_limit`` are for memory only), or read
        them all with :meth:`read_exact_memory_revision`.
        """
        params = {"scope_id": scope_id, "family": family, "artifact_id": artifact_id, "revision": revision}
        params |= given_fields(entries_after=entries_after, entries_limit=entries_limit)
        return self._parse(ExactRevision, self._send("GET", "/v1/artifacts/revision", params=params))

    def read_exact_memory_revision(
        self, scope_id: str, artifact_id: str, revision: int, *, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> ExactRevision:
        """A memory revision with every entry version live in it, read page by page (one request a page).

        Raises :class:`TooManyEntries` as soon as the revision turns out to hold more than ``max_entries`` live
        entries, so what one call reads stays bounded whatever a writer stored.
        """
        first = page = self.read_exact_revision(
            scope_id, "memory", artifact_id, revision, entries_limit=ENTRIES_PAGE_MAX
        )
        entries: list[EntryVersion] = []
        while True:
            if page.entries is None or page.content_sha256 != first.content_sha256:
                raise InvalidResponse("a page of a memory revision's entries is not of that revision")
            if page.next_entries_after is not None and not page.entries:
                raise InvalidResponse("an empty page of entries names a next page")  # never an endless loop
            entries += page.entries
            if page.next_entries_after is None or len(entries) > max_entries:
                break
            page = self.read_exact_revision(
                scope_id,
                "memory",
                artifact_id,
                revision,
                entries_after=page.next_entries_after,
                entries_limit=ENTRIES_PAGE_MAX,
            )
        if len(entries) > max_entries:
            raise TooManyEntries(f"memory revision {revision} of {artifact_id!r} lists more than {max_entries} entries")
        return first.model_copy(update={"entries": entries, "next_entries_after": None})

    def read_exact_entry_version(
        self, scope_id: str, artifact_id: str, revision: int, entry_id: str, entry_version: str
    ) -> ExactEntryVersion:
        """GET /v1/artifacts/revision for one memory entry version live at that revision."""
        params = {
            "scope_id": scope_id,
            "family": "memory",
            "artifact_id": artifact_id,
            "revision": revision,
            "entry_id": entry_id,
            "entry_version": entry_version,
        }
        return self._parse(ExactEntryVersion, self._send("GET", "/v1/artifacts/revision", params=params))

    def artifact_history(
        self, scope_id: str, family: str, artifact_id: str, *, before: int | None = None, limit: int | None = None
    ) -> HistoryPage:
        """GET /v1/artifacts/history: revisions newest first; pass ``next_before`` as ``before``."""
        params = {"scope_id": scope_id, "family": family, "artifact_id": artifact_id} | given_fields(
            before=before, limit=limit
        )
        return self._parse(HistoryPage, self._send("GET", "/v1/artifacts/history", params=params))

    def list_scopes(
        self, *, scope_id: str | None = None, after: str | None = None, limit: int | None = None
    ) -> ScopeListPage:
        """GET /v1/scopes: the scopes this key may read, by scope id; pass ``next_after`` as ``after``.

        With ``scope_id``, only that scope: whether the key may read it, in one request (an empty page when it
        may not, as when the scope does not exist).
        """
        params = given_fields(scope_id=scope_id, after=after, limit=limit)
        return self._parse(ScopeListPage, self._send("GET", "/v1/scopes", params=params))

    # --- writes -----------------------------------------------------------------------------

    def _write(
        self,
        path: str,
        model_type: type[M],
        fields: dict[str, Any],
        result_type: type[R],
        idempotency_key: str | None = None,
    ) -> R:
        request = validated_request(model_type, fields)
        headers = idempotency_headers(idempotency_key)
        body = dump_request(model_type, request)
        return self._parse(result_type, self._send("POST", path, body=body, headers=headers))

    def create_memory_entry(
        self,
        scope_id: str,
        entry_id: str,
        body: str,
        *,
        artifact_id: str | None = None,
        version_id: str | None = None,
        expected_head_revision: int | None = None,
        idempotency_key: str | None = None,
        conflict_key: str | None = None,
    ) -> WriteResult:
        fields = {"scope_id": scope_id, "entry_id": entry_id, "body": body} | given_fields(
            artifact_id=artifact_id,
            version_id=version_id,
            expected_head_revision=expected_head_revision,
            conflict_key=conflict_key,
        )
        return self._write("/v1/memory/entries", MemoryEntryWriteRequest, fields, WriteResult, idempotency_key)

    def update_memory_entry(
        self,
        scope_id: str,
        entry_id: str,
        body: str,
        *,
        artifact_id: str | None = None,
        version_id: str | None = None,
        expected_head_revision: int | None = None,
        idempotency_key: str | None = None,
        conflict_key: str | None = None,
    ) -> WriteResult:
        fields = {"scope_id": scope_id, "entry_id": entry_id, "body": body} | given_fields(
            artifact_id=artifact_id,
            version_id=version_id,
            expected_head_revision=expected_head_revision,
            conflict_key=conflict_key,
        )
        return self._write("/v1/memory/entries/update", MemoryEntryWriteRequest, fields, WriteResult, idempotency_key)

    def remove_memory_entry(
        self,
        scope_id: str,
        entry_id: str,
        *,
        artifact_id: str | None = None,
        expected_head_revision: int | None = None,
        idempotency_key: str | None = None,
    ) -> WriteResult:
        fields = {"scope_id": scope_id, "entry_id": entry_id} | given_fields(
            artifact_id=artifact_id, expected_head_revision=expected_head_revision
        )
        return self._write("/v1/memory/entries/remove", MemoryEntryRemoveRequest, fields, WriteResult, idempotency_key)

    def record_experience_revision(
        self,
        scope_id: str,
        artifact_id: str,
        body: str,
        *,
        expected_head_revision: int | None = None,
        idempotency_key: str | None = None,
    ) -> WriteResult:
        fields = {"scope_id": scope_id, "artifact_id": artifact_id, "body": body} | given_fields(
            expected_head_revision=expected_head_revision
        )
        return self._write("/v1/experiences/revisions", ExperienceWriteRequest, fields, WriteResult, idempotency_key)

    def record_topic_memory_revision(
        self,
        scope_id: str,
        artifact_id: str,
        title: str,
        summary: str,
        *,
        body: str | None = None,
        expected_head_revision: int | None = None,
        idempotency_key: str | None = None,
    ) -> WriteResult:
        fields = {"scope_id": scope_id, "artifact_id": artifact_id, "title": title, "summary": summary} | given_fields(
            body=body, expected_head_revision=expected_head_revision
        )
        return self._write(
            "/v1/topic-memories/revisions", TopicMemoryWriteRequest, fields, WriteResult, idempotency_key
        )

    def propose_profile_candidate(
        self, scope_id: str, body: str, *, artifact_id: str | None = None, idempotency_key: str | None = None
    ) -> ProfileCandidate:
        fields = {"scope_id": scope_id, "body": body} | given_fields(artifact_id=artifact_id)
        return self._write(
            "/v1/profile/candidates", ProfileCandidateProposeRequest, fields, ProfileCandidate, idempotency_key
        )

    def commit_profile_candidate(
        self, candidate_id: int, *, expected_head_revision: int | None = None, idempotency_key: str | None = None
    ) -> WriteResult:
        fields = given_fields(expected_head_revision=expected_head_revision)
        path = f"/v1/profile/candidates/{int(candidate_id)}/commit"
        return self._write(path, ProfileCandidateDecisionRequest, fields, WriteResult, idempotency_key)

    def reject_profile_candidate(self, candidate_id: int, *, idempotency_key: str | None = None) -> ProfileCandidate:
        path = f"/v1/profile/candidates/{int(candidate_id)}/reject"
        headers = idempotency_headers(idempotency_key)
        return self._parse(ProfileCandidate, self._send("POST", path, body={}, headers=headers))
