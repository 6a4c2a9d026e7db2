"""Exact reads over HTTP: a cited revision (or memory entry version) exactly as stored."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from artifacts import selectors
from artifacts.exceptions import NotFound
from artifacts.models import Family
from powercontext.errors import RequestInvalid, flatten_errors
from powercontext.openapi import error_responses
from powercontext.serializer_fields import StrictCharField, unknown_field_errors


class ExactRevisionQuerySerializer(serializers.Serializer):
    """Query parameters of GET /v1/artifacts/revision."""

    scope_id = StrictCharField(max_length=200)
    family = serializers.ChoiceField(choices=Family.choices)
    artifact_id = StrictCharField(max_length=200)
    revision = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    entry_id = StrictCharField(max_length=200, required=False)
    entry_version = StrictCharField(max_length=200, required=False)

    def to_internal_value(self, data):
        errors = unknown_field_errors(data, self.fields)
        validated = {}
        try:
            validated = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            errors += flatten_errors(exc.detail)
        has_entry, has_version = "entry_id" in data, "entry_version" in data
        if has_entry != has_version:
            errors.append({"path": "entry_version" if has_entry else "entry_id", "message": "give both or neither"})
        if has_entry and data.get("family") != Family.MEMORY:
            errors.append({"path": "entry_id", "message": "only memory revisions have entries"})
        if errors:
            raise RequestInvalid("the request is invalid", fields=errors)
        return validated


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
        responses={200: ExactRevisionSerializer, **error_responses(401, 404, 422, 503)},
        summary="Read an exact revision or memory entry version",
        description="With entry_id and entry_version (memory only) the response is an ExactEntryVersion.",
    )
    def get(self, request):
        query = ExactRevisionQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        params = query.validated_data
        scope = selectors.scope_get(scope_id=params["scope_id"])
        if not request.user.can_read(scope):
            raise NotFound("scope not found")
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
