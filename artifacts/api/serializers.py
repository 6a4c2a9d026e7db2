"""Request and response serializers of the artifact reads and writes.

Each request has its own serializer (unknown fields refused); component names in the published
OpenAPI document come from these class names.
"""

from typing import Any

from rest_framework import serializers

from artifacts.models import Family
from infrastructure.serializer_fields import (
    ClosedSerializer,
    QueryIntegerField,
    StrictCharField,
    StrictIntegerField,
)
from vocabulary.authority import AUTHORITY_TIERS
from vocabulary.limits import (
    HISTORY_PAGE_DEFAULT,
    HISTORY_PAGE_MAX,
    HISTORY_PAGE_MAX_BYTES,
    MAX_BODY_CHARACTERS,
    MAX_CONFLICT_KEY_CHARACTERS,
    MAX_IDENTIFIER_CHARACTERS,
    MAX_REVISION,
    MAX_TOPIC_TITLE_CHARACTERS,
    REVISION_ENTRIES_PAGE_DEFAULT,
    REVISION_ENTRIES_PAGE_MAX,
    REVISION_ENTRIES_PAGE_MAX_BYTES,
    SCOPES_PAGE_DEFAULT,
    SCOPES_PAGE_MAX,
)
from vocabulary.slots import CONFLICT_KEY_PATTERN, conflict_key_problem

_BODY: dict[str, Any] = {"max_length": MAX_BODY_CHARACTERS}
_ID: dict[str, Any] = {"max_length": MAX_IDENTIFIER_CHARACTERS}


# --- exact reads --------------------------------------------------------------------------------


class ExactRevisionQuerySerializer(ClosedSerializer):
    """Query parameters of GET /v1/artifacts/revision."""

    scope_id = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS)
    family = serializers.ChoiceField(choices=Family.choices)
    artifact_id = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS)
    revision = QueryIntegerField(min_value=1, max_value=MAX_REVISION)
    entry_id = StrictCharField(
        max_length=MAX_IDENTIFIER_CHARACTERS,
        required=False,
        help_text="Memory only, and only together with entry_version.",
    )
    entry_version = StrictCharField(
        max_length=MAX_IDENTIFIER_CHARACTERS,
        required=False,
        help_text="Memory only, and only together with entry_id.",
    )
    entries_after = StrictCharField(
        max_length=MAX_IDENTIFIER_CHARACTERS,
        required=False,
        help_text=(
            "Memory revisions only (not with entry_id): the previous page's `next_entries_after`; list the entries "
            "after this entry id."
        ),
    )
    entries_limit = QueryIntegerField(
        required=False,
        min_value=1,
        max_value=REVISION_ENTRIES_PAGE_MAX,
        default=REVISION_ENTRIES_PAGE_DEFAULT,
        help_text=(
            "Memory revisions only (not with entry_id): entries one page lists at most. A page also ends after the "
            f"entry whose body takes its bodies past {REVISION_ENTRIES_PAGE_MAX_BYTES} UTF-8 bytes."
        ),
    )

    def cross_field_errors(self, data, validated):
        errors = []
        has_entry, has_version = "entry_id" in data, "entry_version" in data
        if has_entry != has_version:
            errors.append({"path": "entry_version" if has_entry else "entry_id", "message": "give both or neither"})
        if has_entry and data.get("family") != Family.MEMORY:
            errors.append({"path": "entry_id", "message": "only memory revisions have entries"})
        for name in ("entries_after", "entries_limit"):
            if name not in data:
                continue
            if data.get("family") != Family.MEMORY:
                errors.append({"path": name, "message": "only memory revisions have entries"})
            elif has_entry or has_version:
                errors.append({"path": name, "message": "pages a revision's entries: not with entry_id"})
        return errors


class EntryVersionSerializer(serializers.Serializer):
    id = serializers.CharField(source="entry_id")
    version = serializers.CharField(source="version_id")
    body = serializers.CharField()
    content_sha256 = serializers.CharField()
    conflict_key = serializers.CharField(
        allow_null=True, help_text="The fact slot its writer declared, exactly as written; null when none."
    )


class ExactRevisionSerializer(serializers.Serializer):
    """One exact revision as stored; memory lists a page of the entry versions live in it."""

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
    entries = EntryVersionSerializer(
        many=True,
        required=False,
        help_text="Memory only: one page of the entry versions live in the revision, in entry-id order.",
    )
    next_entries_after = serializers.CharField(
        allow_null=True,
        required=False,
        help_text="Memory only: pass as `entries_after` for the next page of entries; null on the last page.",
    )

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if instance.artifact.family != Family.MEMORY:
            data.pop("entries", None)
            data.pop("next_entries_after", None)
        return data


class ExactEntryVersionSerializer(serializers.Serializer):
    """One memory entry version that was live in the cited revision."""

    scope_id = serializers.CharField(source="revision.artifact.scope.scope_id")
    family = serializers.CharField(source="revision.artifact.family")
    artifact_id = serializers.CharField(source="revision.artifact.artifact_id")
    revision = serializers.IntegerField(source="revision.revision")
    entry = EntryVersionSerializer()


# --- writes -------------------------------------------------------------------------------------


class WriteTargetSerializer(ClosedSerializer):
    scope_id = StrictCharField(**_ID)
    artifact_id = StrictCharField(**_ID)
    expected_head_revision = StrictIntegerField(required=False, min_value=0, max_value=MAX_REVISION)


def _conflict_key_valid(value: str) -> None:
    # The field reports a wrong length itself (once, in DRF's words).
    if 0 < len(value) <= MAX_CONFLICT_KEY_CHARACTERS and (problem := conflict_key_problem(value)) is not None:
        raise serializers.ValidationError(problem)


class MemoryEntryWriteSerializer(WriteTargetSerializer):
    """Create or update one memory entry (a new immutable version)."""

    artifact_id = StrictCharField(default="memory", **_ID)
    entry_id = StrictCharField(**_ID)
    version_id = StrictCharField(required=False, **_ID)
    body = StrictCharField(**_BODY)
    conflict_key = StrictCharField(
        required=False,
        min_length=1,
        max_length=MAX_CONFLICT_KEY_CHARACTERS,
        validators=[_conflict_key_valid],
        schema_pattern=CONFLICT_KEY_PATTERN,
        help_text=(
            "The fact slot this version states (e.g. `preference:automation-language`): the selection policy "
            "keeps one winner per slot. Stored exactly as given and immutable with the version; omit it for none. "
            "No control characters, not only whitespace."
        ),
    )


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


class ProfileCandidateRejectSerializer(ClosedSerializer):
    """No fields: an empty body or ``{}``, anything else is refused (not published: no request body)."""


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


def revision_result(revision, *, entry=None) -> dict:
    """A revision's exact citation (naming ``entry`` when given) and hash: a WriteResult."""
    citation = {
        "scope_id": revision.artifact.scope.scope_id,
        "family": revision.artifact.family,
        "artifact_id": revision.artifact.artifact_id,
        "revision": revision.revision,
    }
    if entry is not None:
        citation |= {"entry_id": entry.entry_id, "entry_version": entry.version_id}
    return {"citation": citation, "content_sha256": revision.content_sha256}


# --- history ------------------------------------------------------------------------------------


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

    def to_representation(self, revision):
        item = revision_result(revision) | {"author": revision.author, "created_at": revision.created_at}
        if hasattr(revision, "added"):  # a memory revision: what it changed
            item |= {"added": revision.added, "retired": revision.retired}
        return super().to_representation(item)


class HistoryPageSerializer(serializers.Serializer):
    revisions = HistoryEntrySerializer(many=True)
    next_before = serializers.IntegerField(
        allow_null=True,
        help_text="Pass as `before` for the next (older) page. A page holds at most `limit` revisions, and none after "
        f"the one whose added and retired entry bodies take the page past {HISTORY_PAGE_MAX_BYTES} UTF-8 bytes (the "
        "first always).",
    )


# --- scopes -------------------------------------------------------------------------------------


class ScopeListQuerySerializer(ClosedSerializer):
    """Query parameters of GET /v1/scopes."""

    scope_id = StrictCharField(
        required=False,
        max_length=MAX_IDENTIFIER_CHARACTERS,
        help_text=(
            "List only this scope: one scope when the key may read it; none when it may not or the scope does not "
            "exist (the two look the same)."
        ),
    )
    after = StrictCharField(
        required=False,
        max_length=MAX_IDENTIFIER_CHARACTERS,
        help_text="The previous page's `next_after`: list the scopes after this scope id.",
    )
    limit = QueryIntegerField(required=False, min_value=1, max_value=SCOPES_PAGE_MAX, default=SCOPES_PAGE_DEFAULT)


class ReadableScopeSerializer(serializers.Serializer):
    scope_id = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    authority = serializers.ChoiceField(
        choices=AUTHORITY_TIERS,
        help_text=(
            "The scope's authority tier in the selection policy, set by the server's operators only (the default, "
            "`user_default`, when none is set): `current_turn` marks a turn scope, `workspace_override` a "
            "workspace's conventions."
        ),
    )
    can_write = serializers.BooleanField(help_text="Whether the key may also write to this scope.")
    references = serializers.ListField(
        child=serializers.CharField(),
        help_text="The scope's direct references the key may read, in the order prepare reads them.",
    )
    all_references_readable = serializers.BooleanField(
        help_text=(
            "False when a reference is to a scope the key may not read (its id is not given): a prepare of "
            "this scope that reads referenced scopes is then refused (403 `forbidden`, naming no scope)."
        )
    )


class ScopeListPageSerializer(serializers.Serializer):
    scopes = ReadableScopeSerializer(many=True)
    next_after = serializers.CharField(allow_null=True, help_text="Pass as `after` for the next page; null at the end.")
