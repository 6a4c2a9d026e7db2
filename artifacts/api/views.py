"""Exact reads, history and writes over HTTP.

Each view validates with its own serializer, calls one selector or service and serializes what it
returns. The seven writes share one view (``WriteView``); each endpoint is a row of its table.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from artifacts import selectors, services
from artifacts.api.serializers import (
    ExactEntryVersionSerializer,
    ExactRevisionQuerySerializer,
    ExactRevisionSerializer,
    ExperienceWriteSerializer,
    HistoryPageSerializer,
    HistoryQuerySerializer,
    MemoryEntryRemoveSerializer,
    MemoryEntryWriteSerializer,
    ProfileCandidateDecisionSerializer,
    ProfileCandidateProposeSerializer,
    ProfileCandidateRejectSerializer,
    ProfileCandidateSerializer,
    ScopeListPageSerializer,
    ScopeListQuerySerializer,
    TopicMemoryWriteSerializer,
    WriteResultSerializer,
    revision_result,
)
from artifacts.recall.index import revision_text
from artifacts.recall.vectors.write import vectors_embedded_ahead
from artifacts.services.idempotency import (
    IDEMPOTENCY_HEADER,
    IDEMPOTENCY_KEY_CHARACTER,
    IDEMPOTENCY_KEY_MAX_CHARACTERS,
    idempotency_key_problem,
)
from infrastructure.openapi import error_responses
from infrastructure.query_params import query_parameters
from infrastructure.request_context import request_annotate
from infrastructure.serializing import represented, validated
from vocabulary.errors import InvalidInput
from vocabulary.limits import MAX_IDENTIFIER_CHARACTERS
from vocabulary.text import canonical_json, sha256_text


def _annotate_scope(request, scope_id: object) -> None:
    """Name the scope the request is about in the request log (the value as sent, when it is a string)."""
    request_annotate(request, scope=scope_id if isinstance(scope_id, str) else None)


# --- reads --------------------------------------------------------------------------------------


class ExactRevisionView(APIView):
    """Read exactly what a citation names; never the head instead."""

    @extend_schema(
        operation_id="read_exact_revision",
        parameters=[ExactRevisionQuerySerializer],
        responses={
            200: PolymorphicProxySerializer(
                component_name="ExactRead",
                serializers=[ExactRevisionSerializer, ExactEntryVersionSerializer],
                resource_type_field_name=None,
            ),
            **error_responses(401, 404, 410, 422, 503),
        },
        summary="Read an exact revision or memory entry version",
        description=(
            "With entry_id and entry_version (memory only) the response is an ExactEntryVersion. A memory revision "
            "lists its live entry versions a page at a time, in entry-id order (entries_limit, and a bound on the "
            "page's body bytes): pass next_entries_after as entries_after for the next page, until it is null."
        ),
    )
    def get(self, request):
        parameters = query_parameters(request)
        _annotate_scope(request, parameters.get("scope_id"))
        query = validated(ExactRevisionQuerySerializer, parameters)
        found = selectors.artifact_revision_read(principal=request.user, **query)
        if isinstance(found, selectors.EntryVersionAt):
            return Response(represented(ExactEntryVersionSerializer, found))
        return Response(represented(ExactRevisionSerializer, found))


class ArtifactHistoryView(APIView):
    """An artifact's revisions, newest first, paginated by revision number."""

    @extend_schema(
        operation_id="artifact_history",
        parameters=[HistoryQuerySerializer],
        responses={200: HistoryPageSerializer, **error_responses(401, 404, 422, 503)},
        summary="List an artifact's revisions, newest first",
    )
    def get(self, request):
        parameters = query_parameters(request)
        _annotate_scope(request, parameters.get("scope_id"))
        query = validated(HistoryQuerySerializer, parameters)
        page = selectors.artifact_history_read(principal=request.user, **query)
        return Response(represented(HistoryPageSerializer, page))


class ScopeListView(APIView):
    """The scopes the calling key may read, in scope-id order, paginated by scope id."""

    @extend_schema(
        operation_id="scope_list",
        parameters=[ScopeListQuerySerializer],
        responses={200: ScopeListPageSerializer, **error_responses(401, 422, 503)},
        summary="List the scopes the API key may read",
    )
    def get(self, request):
        query = validated(ScopeListQuerySerializer, query_parameters(request))
        page = selectors.scope_list_readable(principal=request.user, **query)
        return Response(represented(ScopeListPageSerializer, page))


# --- writes -------------------------------------------------------------------------------------

_WRITE_ERRORS = error_responses(
    401,
    403,
    404,
    409,
    422,
    503,
    described={
        403: "The key may read the scope but not write to it (`forbidden`).",
        409: "The expected head revision is no longer the head, or the entry already exists (`conflict`).",
    },
)
_IDEMPOTENCY_PARAMETER = OpenApiParameter(
    IDEMPOTENCY_HEADER,
    {  # exactly idempotency_key_problem's rule
        "type": "string",
        "minLength": 1,
        "maxLength": IDEMPOTENCY_KEY_MAX_CHARACTERS,
        # (?!\n): Python's `$` (jsonschema's) also matches before a final newline, ECMA's does not.
        "pattern": f"^{IDEMPOTENCY_KEY_CHARACTER}*$(?!\\n)",
    },
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "Makes a retry safe: the same key with the same request returns the original 201 (same citation, no new "
        "revision, header Idempotent-Replayed: true); with a different request it is refused (422). Keys are "
        "kept per API key for POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS (24 h). 1-200 printable ASCII characters."
    ),
)

Write = Callable[[dict, object, str], object]
"""``write(data, target, author)``: the one service call; returns what the response serializer reads."""


@dataclass(frozen=True)
class WriteEndpoint:
    """One row of the write table: its published operation and the one service call it makes."""

    operation_id: str
    summary: str
    request: type[serializers.Serializer]
    write: Write
    response: type[serializers.Serializer] = WriteResultSerializer
    status: int = 201
    publish_request: bool = True  # False: the body must be empty or {}, and none is published
    indexed_texts: Callable[[dict], list[str]] = lambda data: []
    """The texts the write will index for recall, known from its request (their vectors: ``vectors_embedded_ahead``)."""


class WriteView(APIView):
    # No docstring: drf-spectacular would publish it as every write's description.
    endpoint: ClassVar[WriteEndpoint]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        endpoint = cls.endpoint

        @extend_schema(
            operation_id=endpoint.operation_id,
            request=endpoint.request if endpoint.publish_request else None,
            responses={endpoint.status: endpoint.response, **_WRITE_ERRORS},
            summary=endpoint.summary,
            parameters=[_IDEMPOTENCY_PARAMETER],
        )
        def post(self, request, **url_kwargs):
            return self.write(request, **url_kwargs)

        cls.post = post

    def write(self, request, candidate_id: int | None = None) -> Response:
        """Validate; authorize (404: may neither read nor write the scope, 403: may only read it); write."""
        endpoint = self.endpoint
        idempotency_key = request.headers.get(IDEMPOTENCY_HEADER)
        if idempotency_key is not None and (problem := idempotency_key_problem(idempotency_key)):
            raise InvalidInput(problem, path=IDEMPOTENCY_HEADER)
        if isinstance(request.data, dict):
            _annotate_scope(request, request.data.get("scope_id"))
        data = validated(endpoint.request, request.data)
        target: object  # a Scope, or the ProfileCandidate a review writes to
        if candidate_id is None:
            target = selectors.scope_get_writable(principal=request.user, scope_id=data["scope_id"])
        else:
            candidate = selectors.profile_candidate_get_writable(principal=request.user, candidate_id=candidate_id)
            _annotate_scope(request, candidate.artifact.scope.scope_id)
            target = candidate
        # Key names may be 200 characters; the author column holds 200 (PostgreSQL enforces it).
        author = f"api-key:{request.user.name}"[:MAX_IDENTIFIER_CHARACTERS]

        def run() -> tuple[int, dict]:
            return endpoint.status, represented(endpoint.response, endpoint.write(data, target, author))

        if idempotency_key is None:
            status, body = run()
            return Response(body, status=status)
        # Embedded before the idempotency record's transaction opens: never an endpoint call inside it.
        with vectors_embedded_ahead(endpoint.indexed_texts(data)):
            status, body, replayed = services.idempotent_write_run(
                api_key_id=request.user.api_key_id,
                key=idempotency_key,
                request_sha256=sha256_text(canonical_json({"path": request.path, "body": request.data})),
                write=run,
            )
        return Response(body, status=status, headers={"Idempotent-Replayed": "true"} if replayed else None)


def _body_texts(data: dict) -> list[str]:
    return [data["body"]]


def _revision_target(data: dict, scope, author: str) -> dict:
    """What every revision write names: where, by whom, and (optionally) on which head."""
    return {
        "scope": scope,
        "artifact_id": data["artifact_id"],
        "author": author,
        "expected_head_revision": data.get("expected_head_revision"),
    }


def _memory_entry_write(data, scope, author, **entry_rule) -> dict:
    """One entry version as a new revision; ``entry_rule`` says whether the entry must (not) exist."""
    write = services.EntryVersionWrite(
        data["entry_id"], data.get("version_id"), data["body"], conflict_key=data.get("conflict_key")
    )
    result = services.memory_revision_create(**_revision_target(data, scope, author), writes=[write], **entry_rule)
    return revision_result(result.revision, entry=result.added[0])


def _memory_entry_remove(data, scope, author) -> dict:
    result = services.memory_revision_create(**_revision_target(data, scope, author), removals=[data["entry_id"]])
    return revision_result(result.revision)


def _experience_write(data, scope, author) -> dict:
    target = _revision_target(data, scope, author)
    return revision_result(services.experience_revision_create(**target, body=data["body"]))


def _topic_memory_write(data, scope, author) -> dict:
    text = {"title": data["title"], "summary": data["summary"], "body": data.get("body")}
    return revision_result(services.topic_memory_revision_create(**_revision_target(data, scope, author), **text))


def _profile_candidate_propose(data, scope, author):
    return services.profile_candidate_propose(
        scope=scope, artifact_id=data["artifact_id"], body=data["body"], proposed_by=author
    )


def _profile_candidate_commit(data, candidate, author) -> dict:
    revision = services.profile_candidate_commit(
        candidate=candidate, committed_by=author, expected_head_revision=data.get("expected_head_revision")
    )
    return revision_result(revision)


def _profile_candidate_reject(data, candidate, author):
    return services.profile_candidate_reject(candidate=candidate)


class MemoryEntryCreateView(WriteView):
    endpoint = WriteEndpoint(
        "memory_entry_create",
        "Create a memory entry",
        MemoryEntryWriteSerializer,
        partial(_memory_entry_write, require_new_entries=True),
        indexed_texts=_body_texts,
    )


class MemoryEntryUpdateView(WriteView):
    endpoint = WriteEndpoint(
        "memory_entry_update",
        "Update a memory entry (a new version)",
        MemoryEntryWriteSerializer,
        partial(_memory_entry_write, require_existing_entries=True),
        indexed_texts=_body_texts,
    )


class MemoryEntryRemoveView(WriteView):
    endpoint = WriteEndpoint(
        "memory_entry_remove", "Remove a memory entry", MemoryEntryRemoveSerializer, _memory_entry_remove
    )


class ExperienceRevisionCreateView(WriteView):
    endpoint = WriteEndpoint(
        "experience_revision_create",
        "Record an experience revision",
        ExperienceWriteSerializer,
        _experience_write,
        indexed_texts=_body_texts,
    )


class TopicMemoryRevisionCreateView(WriteView):
    endpoint = WriteEndpoint(
        "topic_memory_revision_create",
        "Record a topic-memory revision",
        TopicMemoryWriteSerializer,
        _topic_memory_write,
        indexed_texts=lambda data: [revision_text(data["title"], data["summary"], data.get("body"))],
    )


class ProfileCandidateProposeView(WriteView):
    endpoint = WriteEndpoint(
        "profile_candidate_propose",
        "Propose a profile snapshot",
        ProfileCandidateProposeSerializer,
        _profile_candidate_propose,
        response=ProfileCandidateSerializer,
    )


class ProfileCandidateCommitView(WriteView):
    endpoint = WriteEndpoint(
        "profile_candidate_commit",
        "Commit a pending profile candidate (creates the next profile revision)",
        ProfileCandidateDecisionSerializer,
        _profile_candidate_commit,
    )


class ProfileCandidateRejectView(WriteView):
    endpoint = WriteEndpoint(
        "profile_candidate_reject",
        "Reject a pending profile candidate",
        ProfileCandidateRejectSerializer,
        _profile_candidate_reject,
        response=ProfileCandidateSerializer,
        status=200,
        publish_request=False,
    )
