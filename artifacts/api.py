"""Exact reads over HTTP: a cited revision (or memory entry version) exactly as stored."""

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from artifacts import selectors, services
from artifacts.models import Family
from powercontext.openapi import error_responses
from powercontext.serializer_fields import (
    ClosedSerializer,
    QueryIntegerField,
    StrictCharField,
    StrictIntegerField,
)
from vocabulary.errors import NotFound
from vocabulary.limits import (
    HISTORY_PAGE_DEFAULT,
    HISTORY_PAGE_MAX,
    MAX_BODY_CHARACTERS,
    MAX_IDENTIFIER_CHARACTERS,
    MAX_REVISION,
    MAX_TOPIC_TITLE_CHARACTERS,
)


class ExactRevisionQuerySerializer(ClosedSerializer):
    """Query parameters of GET /v1/artifacts/revision."""

    scope_id = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS)
    family = serializers.ChoiceField(choices=Family.choices)
    artifact_id = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS)
    revision = QueryIntegerField(min_value=1, max_value=MAX_REVISION)
    entry_id = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS, required=False)
    entry_version = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS, required=False)

    def cross_field_errors(self, data, validated):
        errors = []
        has_entry, has_version = "entry_id" in data, "entry_version" in data
        if has_entry != has_version:
            errors.append({"path": "entry_version" if has_entry else "entry_id", "message": "give both or neither"})
        if has_entry and data.get("family") != Family.MEMORY:
            errors.append({"path": "entry_id", "message": "only memory revisions have entries"})
        return errors


class EntryVersionSerializer(serializers.Serializer):
    id = serializers.CharField(source="entry_id")
    version = serializers.CharField(source="version_id")
    body = serializers.CharField()
    content_sha256 = serializers.CharField()


class ExactRevisionSerializer(serializers.Serializer):
    """One exact revision as stored; memory lists the entry versions live in it."""

    scope_id = serializers.CharField(source="artifact.scope.scope_id")
    family = serializers.CharField(source="artifact.family")
    artifact_id = serializers.CharField(source="artifact.artifact_id")
    revision = serializers.IntegerField()
    content_sha256 = serializers.CharField()
    created_at = serializers.DateTimeField()
    author = serializers.CharField()
    body = serializers.CharField(allow_null=True)
    title = serializers.CharField(allow_null=True)
    summary = serializers.CharField(allow_null=True)
    entries = EntryVersionSerializer(many=True, required=False)

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if instance.artifact.family != Family.MEMORY:
            data.pop("entries", None)
        return data


class ExactEntryVersionSerializer(serializers.Serializer):
    """One memory entry version that was live in the cited revision."""

    scope_id = serializers.CharField()
    family = serializers.CharField()
    artifact_id = serializers.CharField()
    revision = serializers.IntegerField()
    entry = EntryVersionSerializer()


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
            **error_responses(401, 404, 422, 503),
        },
        summary="Read an exact revision or memory entry version",
        description="With entry_id and entry_version (memory only) the response is an ExactEntryVersion.",
    )
    def get(self, request):
        query = ExactRevisionQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params = query.validated_data
        scope = selectors.scope_get_readable(principal=request.user, scope_id=params["scope_id"])
        artifact = selectors.artifact_get(scope=scope, family=params["family"], artifact_id=params["artifact_id"])
        revision = selectors.artifact_revision_get(artifact=artifact, revision=params["revision"])
        if "entry_id" in params:
            version = selectors.memory_entry_version_get_at(
                artifact=artifact,
                revision=revision.revision,
                entry_id=params["entry_id"],
                version_id=params["entry_version"],
            )
            payload = {
                "scope_id": scope.scope_id,
                "family": artifact.family,
                "artifact_id": artifact.artifact_id,
                "revision": revision.revision,
                "entry": version,
            }
            return Response(ExactEntryVersionSerializer(payload).data)
        if artifact.family == Family.MEMORY:
            revision.entries = selectors.memory_entries_live_at(artifact=artifact, revision=revision.revision)
        return Response(ExactRevisionSerializer(revision).data)


# --- writes -----------------------------------------------------------------------------------


def scope_for_write(principal, scope_id: str):
    return selectors.scope_get_writable(principal=principal, scope_id=scope_id)


_BODY = {"max_length": MAX_BODY_CHARACTERS}
_ID = {"max_length": MAX_IDENTIFIER_CHARACTERS}


class WriteTargetSerializer(ClosedSerializer):
    scope_id = StrictCharField(**_ID)
    artifact_id = StrictCharField(**_ID)
    expected_head_revision = StrictIntegerField(required=False, min_value=0, max_value=MAX_REVISION)


class MemoryEntryWriteSerializer(WriteTargetSerializer):
    """Create or update one memory entry (a new immutable version)."""

    artifact_id = StrictCharField(default="memory", **_ID)
    entry_id = StrictCharField(**_ID)
    version_id = StrictCharField(required=False, **_ID)
    body = StrictCharField(**_BODY)


class MemoryEntryRemoveSerializer(WriteTargetSerializer):
    """Remove one memory entry: its live version is retired in a new revision."""

    artifact_id = StrictCharField(default="memory", **_ID)
    entry_id = StrictCharField(**_ID)


class ExperienceWriteSerializer(WriteTargetSerializer):
    """The next revision of an experience."""

    body = StrictCharField(**_BODY)


class TopicMemoryWriteSerializer(WriteTargetSerializer):
    """The next revision of a topic memory."""

    title = StrictCharField(max_length=MAX_TOPIC_TITLE_CHARACTERS)
    summary = StrictCharField(**_BODY)
    body = StrictCharField(required=False, **_BODY)


class ProfileCandidateProposeSerializer(ClosedSerializer):
    """A proposed profile snapshot; it reaches prepare only once committed."""

    scope_id = StrictCharField(**_ID)
    artifact_id = StrictCharField(default="profile", **_ID)
    body = StrictCharField(**_BODY)


class ProfileCandidateDecisionSerializer(ClosedSerializer):
    expected_head_revision = StrictIntegerField(required=False, min_value=0, max_value=MAX_REVISION)


class CitationSerializer(serializers.Serializer):
    """The exact citation of what a write created."""

    scope_id = serializers.CharField()
    family = serializers.CharField()
    artifact_id = serializers.CharField()
    revision = serializers.IntegerField()
    entry_id = serializers.CharField(required=False)
    entry_version = serializers.CharField(required=False)


class WriteResultSerializer(serializers.Serializer):
    citation = CitationSerializer()
    content_sha256 = serializers.CharField()


class ProfileCandidateSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    scope_id = serializers.CharField(source="artifact.scope.scope_id")
    artifact_id = serializers.CharField(source="artifact.artifact_id")
    status = serializers.ChoiceField(choices=["pending", "rejected", "committed"])
    committed_revision = serializers.IntegerField(allow_null=True)
    content_sha256 = serializers.CharField()


def _revision_result(revision, *, entry=None) -> dict:
    citation = {
        "scope_id": revision.artifact.scope.scope_id,
        "family": revision.artifact.family,
        "artifact_id": revision.artifact.artifact_id,
        "revision": revision.revision,
    }
    if entry is not None:
        citation |= {"entry_id": entry.entry_id, "entry_version": entry.version_id}
    return {"citation": citation, "content_sha256": revision.content_sha256}


_WRITE_ERRORS = error_responses(401, 403, 404, 409, 422, 503)


def _validated(serializer_class, request):
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _author(request) -> str:
    # Key names may be 200 characters; the author column holds 200 (PostgreSQL enforces it).
    return f"api-key:{request.user.name}"[:MAX_IDENTIFIER_CHARACTERS]


def _memory_entry_write(request, **entry_rule) -> Response:
    """Write one entry version as a new revision; ``entry_rule`` says whether the entry must (not) exist."""
    data = _validated(MemoryEntryWriteSerializer, request)
    result = services.memory_revision_create(
        scope=scope_for_write(request.user, data["scope_id"]),
        artifact_id=data["artifact_id"],
        writes=[services.EntryVersionWrite(data["entry_id"], data.get("version_id"), data["body"])],
        author=_author(request),
        expected_head_revision=data.get("expected_head_revision"),
        **entry_rule,
    )
    return Response(WriteResultSerializer(_revision_result(result.revision, entry=result.added[0])).data, status=201)


class MemoryEntryCreateView(APIView):
    @extend_schema(
        operation_id="memory_entry_create",
        request=MemoryEntryWriteSerializer,
        responses={201: WriteResultSerializer, **_WRITE_ERRORS},
        summary="Create a memory entry",
    )
    def post(self, request):
        return _memory_entry_write(request, require_new_entries=True)


class MemoryEntryUpdateView(APIView):
    @extend_schema(
        operation_id="memory_entry_update",
        request=MemoryEntryWriteSerializer,
        responses={201: WriteResultSerializer, **_WRITE_ERRORS},
        summary="Update a memory entry (a new version)",
    )
    def post(self, request):
        return _memory_entry_write(request, require_existing_entries=True)


class MemoryEntryRemoveView(APIView):
    @extend_schema(
        operation_id="memory_entry_remove",
        request=MemoryEntryRemoveSerializer,
        responses={201: WriteResultSerializer, **_WRITE_ERRORS},
        summary="Remove a memory entry",
    )
    def post(self, request):
        data = _validated(MemoryEntryRemoveSerializer, request)
        result = services.memory_revision_create(
            scope=scope_for_write(request.user, data["scope_id"]),
            artifact_id=data["artifact_id"],
            removals=[data["entry_id"]],
            author=_author(request),
            expected_head_revision=data.get("expected_head_revision"),
        )
        return Response(WriteResultSerializer(_revision_result(result.revision)).data, status=201)


class ExperienceRevisionCreateView(APIView):
    @extend_schema(
        operation_id="experience_revision_create",
        request=ExperienceWriteSerializer,
        responses={201: WriteResultSerializer, **_WRITE_ERRORS},
        summary="Record an experience revision",
    )
    def post(self, request):
        data = _validated(ExperienceWriteSerializer, request)
        revision = services.experience_revision_create(
            scope=scope_for_write(request.user, data["scope_id"]),
            artifact_id=data["artifact_id"],
            body=data["body"],
            author=_author(request),
            expected_head_revision=data.get("expected_head_revision"),
        )
        return Response(WriteResultSerializer(_revision_result(revision)).data, status=201)


class TopicMemoryRevisionCreateView(APIView):
    @extend_schema(
        operation_id="topic_memory_revision_create",
        request=TopicMemoryWriteSerializer,
        responses={201: WriteResultSerializer, **_WRITE_ERRORS},
        summary="Record a topic-memory revision",
    )
    def post(self, request):
        data = _validated(TopicMemoryWriteSerializer, request)
        revision = services.topic_memory_revision_create(
            scope=scope_for_write(request.user, data["scope_id"]),
            artifact_id=data["artifact_id"],
            title=data["title"],
            summary=data["summary"],
            body=data.get("body"),
            author=_author(request),
            expected_head_revision=data.get("expected_head_revision"),
        )
        return Response(WriteResultSerializer(_revision_result(revision)).data, status=201)


class ProfileCandidateProposeView(APIView):
    @extend_schema(
        operation_id="profile_candidate_propose",
        request=ProfileCandidateProposeSerializer,
        responses={201: ProfileCandidateSerializer, **_WRITE_ERRORS},
        summary="Propose a profile snapshot",
    )
    def post(self, request):
        data = _validated(ProfileCandidateProposeSerializer, request)
        candidate = services.profile_candidate_propose(
            scope=scope_for_write(request.user, data["scope_id"]),
            artifact_id=data["artifact_id"],
            body=data["body"],
            proposed_by=_author(request),
        )
        return Response(ProfileCandidateSerializer(candidate).data, status=201)


def _candidate_for_write(request, candidate_id: int):
    candidate = selectors.profile_candidate_get(candidate_id=candidate_id)
    try:
        scope_for_write(request.user, candidate.artifact.scope.scope_id)
    except NotFound:
        # A candidate in a scope the key may not read answers exactly like a missing one.
        raise NotFound("candidate not found") from None
    return candidate


class ProfileCandidateCommitView(APIView):
    @extend_schema(
        operation_id="profile_candidate_commit",
        request=ProfileCandidateDecisionSerializer,
        responses={201: WriteResultSerializer, **_WRITE_ERRORS},
        summary="Commit a pending profile candidate (creates the next profile revision)",
    )
    def post(self, request, candidate_id: int):
        data = _validated(ProfileCandidateDecisionSerializer, request)
        candidate = _candidate_for_write(request, candidate_id)
        revision = services.profile_candidate_commit(
            candidate=candidate,
            committed_by=_author(request),
            expected_head_revision=data.get("expected_head_revision"),
        )
        return Response(WriteResultSerializer(_revision_result(revision)).data, status=201)


class ProfileCandidateRejectView(APIView):
    @extend_schema(
        operation_id="profile_candidate_reject",
        request=None,
        responses={200: ProfileCandidateSerializer, **_WRITE_ERRORS},
        summary="Reject a pending profile candidate",
    )
    def post(self, request, candidate_id: int):
        _validated(ClosedSerializer, request)  # no fields: an empty body or {}, anything else is refused
        candidate = _candidate_for_write(request, candidate_id)
        return Response(ProfileCandidateSerializer(services.profile_candidate_reject(candidate=candidate)).data)


# --- history ----------------------------------------------------------------------------------


class HistoryQuerySerializer(ClosedSerializer):
    scope_id = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS)
    family = serializers.ChoiceField(choices=Family.choices)
    artifact_id = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS)
    before = QueryIntegerField(required=False, min_value=1, max_value=MAX_REVISION)
    limit = QueryIntegerField(required=False, min_value=1, max_value=HISTORY_PAGE_MAX, default=HISTORY_PAGE_DEFAULT)


class HistoryEntrySerializer(serializers.Serializer):
    citation = CitationSerializer()
    content_sha256 = serializers.CharField()
    author = serializers.CharField()
    created_at = serializers.DateTimeField()
    added = EntryVersionSerializer(many=True, required=False)
    retired = EntryVersionSerializer(many=True, required=False)


class HistoryPageSerializer(serializers.Serializer):
    revisions = HistoryEntrySerializer(many=True)
    next_before = serializers.IntegerField(allow_null=True, help_text="Pass as `before` for the next (older) page.")


class ArtifactHistoryView(APIView):
    """An artifact's revisions, newest first, paginated by revision number."""

    @extend_schema(
        operation_id="artifact_history",
        parameters=[HistoryQuerySerializer],
        responses={200: HistoryPageSerializer, **error_responses(401, 404, 422, 503)},
        summary="List an artifact's revisions, newest first",
    )
    def get(self, request):
        query = HistoryQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params = query.validated_data
        scope = selectors.scope_get_readable(principal=request.user, scope_id=params["scope_id"])
        artifact = selectors.artifact_get(scope=scope, family=params["family"], artifact_id=params["artifact_id"])
        revisions, next_before = selectors.artifact_history_page(
            artifact=artifact, before=params.get("before"), limit=params["limit"]
        )
        changes = (
            selectors.memory_entry_versions_changed_in(artifact=artifact, revisions=[r.revision for r in revisions])
            if artifact.family == Family.MEMORY
            else {}
        )
        items = []
        for revision in revisions:
            item = _revision_result(revision) | {"author": revision.author, "created_at": revision.created_at}
            if revision.revision in changes:
                item["added"], item["retired"] = changes[revision.revision]
            items.append(item)
        return Response(HistoryPageSerializer({"revisions": items, "next_before": next_before}).data)
