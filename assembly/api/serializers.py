"""Request and response serializers of POST /v1/context/prepare and POST /v1/memory/search."""

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from artifacts.api.serializers import CitationSerializer
from assembly.options import FORMAT_MARKDOWN, FORMATS, SHOW_VALUES
from assembly.policy import NEEDS_ASSEMBLY, POLICIES, parse_selection_policy
from assembly.runtime import assembly_options_parse
from assembly.search import SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX, SEARCHED_FAMILIES
from assembly.types import RESULT_STATUSES, STATUS_EMPTY, STATUS_READY, AssemblyValidationError
from infrastructure.serializer_fields import ClosedSerializer, StrictCharField, StrictIntegerField
from vocabulary.envelope import PREPARED_CONTEXT_SCHEMA
from vocabulary.families import ASSEMBLED_FAMILIES, FAMILY_LIMIT_MAX, POOL_CAP
from vocabulary.limits import (
    MAX_BYTES_DEFAULT,
    MAX_BYTES_MAX,
    MAX_BYTES_MIN,
    MAX_IDENTIFIER_CHARACTERS,
    QUERY_MAX_CHARACTERS,
    SELECTION_MAX_TOKENS_MAX,
)

_SECTION_VARIANTS = [
    {
        "type": "object",
        "title": f"{family} section",
        "additionalProperties": False,
        "required": ["family", "limit"],
        "properties": {
            "family": {"type": "string", "enum": [family]},
            "limit": {"type": "integer", "minimum": 1, "maximum": FAMILY_LIMIT_MAX[family]},
        },
    }
    for family in ASSEMBLED_FAMILIES
]

ASSEMBLY_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "Opt in to Markdown V1 text. Omit for the legacy JSON envelope; never null. `{}` means "
        "memory 6 then experience 2. Families must be unique; the sum of limits must not exceed "
        "the server's POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES (default 32)."
    ),
    "properties": {
        "format": {"type": "string", "enum": list(FORMATS), "default": FORMAT_MARKDOWN},
        "sections": {
            "type": "array",
            "maxItems": len(ASSEMBLED_FAMILIES),
            "description": (
                "Families to recall, in output (and budget priority) order; each family at most once (identical "
                "sections are refused by uniqueItems; OpenAPI 3.0 cannot say that two with different limits are too)."
            ),
            "uniqueItems": True,
            "items": {"oneOf": _SECTION_VARIANTS},
        },
        "show": {
            "type": "array",
            "uniqueItems": True,
            "maxItems": len(SHOW_VALUES),
            "items": {"type": "string", "enum": list(SHOW_VALUES)},
        },
    },
}


SELECTION_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["policy"],
    "description": (
        "Opt in to the selection policy (Markdown V1 only: refused without `assembly`; never null). Each family's "
        "candidates pass, in order, a scope gate, a confidence gate (`min_score`), authority tiers (current_turn > "
        "workspace_override > user_default, set per scope by the server's operators, never by the request), exact "
        "dedupe and conflict slots, then the section limit, the byte budget and the token budget (`max_tokens`, "
        "offline teaching units). Omitted: today's selection, byte for byte."
    ),
    "properties": {
        "policy": {"type": "string", "enum": list(POLICIES)},
        "min_score": {
            "type": "number",
            "minimum": 0,
            "default": 0,
            "description": (
                "Candidates scoring below it are left out (`low_confidence`); 0 turns the gate off. A profile has no "
                "recall score (it is requested by its section): the gate does not apply to it."
            ),
        },
        "max_tokens": {
            "type": "integer",
            "minimum": 1,
            "maximum": SELECTION_MAX_TOKENS_MAX,
            "description": "At most this many estimated units in the whole content (one per Latin word, CJK "
            "character, punctuation mark or symbol); none when omitted.",
        },
    },
}


class _RawObjectField(serializers.Field):
    """A raw JSON object validated as a whole by the runtime's own parser (one rule set for HTTP and direct calls)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, **kwargs)

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        # null is refused by the runtime's parser with the object's other errors, not here.
        if data is None:
            return True, None
        return super().validate_empty_values(data)

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(SELECTION_SCHEMA)
class SelectionPolicyField(_RawObjectField):
    """The raw ``selection`` object."""


@extend_schema_field(ASSEMBLY_SCHEMA)
class AssemblyOptionsField(_RawObjectField):
    """Raw assembly options."""


def query_field() -> StrictCharField:
    """A request's query (prepare's and search's): a string of at most QUERY_MAX_CHARACTERS with a non-whitespace
    character."""
    return StrictCharField(
        max_length=QUERY_MAX_CHARACTERS,
        validators=[RegexValidator(r"\S", message="must contain a non-whitespace character")],
        # Both rules as one pattern: leading whitespace, then a character that is neither (unambiguous, linear).
        schema_pattern="^\\s*[^\\s\\u0000][^\\u0000]*$",
    )


@extend_schema_serializer(component_name="PrepareContext")  # published as PrepareContextRequest
class PrepareContextRequestSerializer(ClosedSerializer):
    """The body of POST /v1/context/prepare; unknown fields are refused at every level."""

    scope_id = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS)
    query = query_field()
    max_bytes = StrictIntegerField(min_value=MAX_BYTES_MIN, max_value=MAX_BYTES_MAX, default=MAX_BYTES_DEFAULT)
    assembly = AssemblyOptionsField()
    selection = SelectionPolicyField()

    def cross_field_errors(self, data: dict[str, Any], validated: dict[str, Any]) -> list[dict[str, Any]]:
        # The runtime's own parsers validate assembly and selection (one rule set for HTTP and direct calls); the
        # parsed values replace the raw ones.
        validated.pop("assembly", None)
        validated.pop("selection", None)
        validated["options"] = None
        errors: list[dict[str, Any]] = []
        if "assembly" in data:
            try:
                validated["options"] = assembly_options_parse(data["assembly"])
            except AssemblyValidationError as exc:
                errors += [{"path": e.path, "message": e.message} for e in exc.errors]
        if "selection" in data:
            validated["selection"] = None
            try:
                validated["selection"] = parse_selection_policy(data["selection"])
            except AssemblyValidationError as exc:
                errors += [{"path": e.path, "message": e.message} for e in exc.errors]
            if "assembly" not in data:
                errors.append({"path": "selection", "message": NEEDS_ASSEMBLY})
        return errors


class PreparedContextSerializer(serializers.Serializer):
    """The four-field response; ``content`` is injected by the host unchanged."""

    schema = serializers.ChoiceField(choices=[PREPARED_CONTEXT_SCHEMA])
    status = serializers.ChoiceField(choices=list(RESULT_STATUSES))
    content = serializers.CharField(allow_null=True)
    content_bytes = serializers.IntegerField(min_value=0)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return {
            "schema": PREPARED_CONTEXT_SCHEMA,
            "status": instance.status,
            "content": instance.content,
            "content_bytes": instance.content_bytes,
        }


# --- POST /v1/memory/search ---------------------------------------------------------------------------------


class MemorySearchRequestSerializer(ClosedSerializer):
    """The body of POST /v1/memory/search; unknown fields are refused."""

    scope_id = StrictCharField(max_length=MAX_IDENTIFIER_CHARACTERS)
    query = query_field()
    families = serializers.ListField(
        child=serializers.ChoiceField(choices=list(SEARCHED_FAMILIES)),
        min_length=1,
        max_length=len(SEARCHED_FAMILIES),
        default=list(SEARCHED_FAMILIES),
        help_text="The families to search, in the order their hits are listed (default: memory, then experience).",
    )
    limit = StrictIntegerField(
        min_value=1,
        max_value=SEARCH_LIMIT_MAX,
        default=SEARCH_LIMIT_DEFAULT,
        help_text=(
            "Hits per family and scope, at most the family's pool (memory 16, experience 8: a larger limit is "
            f"refused; at most {SEARCH_LIMIT_MAX})."
        ),
    )

    def cross_field_errors(self, data: dict[str, Any], validated: dict[str, Any]) -> list[dict[str, Any]]:
        families = validated.get("families") or []
        errors: list[dict[str, Any]] = []
        if len(set(families)) != len(families):
            errors.append({"path": "families", "message": "each family at most once"})
        limit = validated.get("limit", SEARCH_LIMIT_DEFAULT)
        for family in families:
            if limit > POOL_CAP[family]:
                errors.append({"path": "limit", "message": f"at most {POOL_CAP[family]} for {family} (its pool)"})
        return errors


class SearchScoresSerializer(serializers.Serializer):
    """The scores recall ranked a hit by (null where a ranking did not return it)."""

    lexical = serializers.FloatField(allow_null=True, help_text="BM25 score; null: found by meaning alone")
    lexical_rank = serializers.IntegerField(allow_null=True, help_text="hybrid recall only: rank in BM25's ranking")
    dense_rank = serializers.IntegerField(allow_null=True, help_text="hybrid recall only: rank by cosine")
    cosine = serializers.FloatField(allow_null=True, help_text="hybrid recall only: cosine to the query")
    score = serializers.FloatField(
        allow_null=True, help_text="hybrid recall only: the learned ranker's estimate of relevance, or the fused score"
    )
    ranked_by = serializers.ChoiceField(choices=["bm25", "fused", "learned"])


class SearchHitSerializer(serializers.Serializer):
    family = serializers.ChoiceField(choices=list(SEARCHED_FAMILIES))
    rank = serializers.IntegerField(min_value=1, help_text="1-based, within its family and scope")
    citation = CitationSerializer()
    body = serializers.CharField(help_text="The exact text the citation resolves to (untrusted content).")
    scores = SearchScoresSerializer()

    def to_representation(self, hit: Any) -> dict[str, Any]:
        citation = hit.candidate.citation
        cited = {
            "scope_id": citation.scope_id,
            "family": citation.family,
            "artifact_id": citation.artifact_id,
            "revision": citation.revision,
        }
        if citation.has_entry:
            cited |= {"entry_id": citation.entry_id, "entry_version": citation.entry_version}
        fused = hit.fused
        return {
            "family": hit.family,
            "rank": hit.rank,
            "citation": cited,
            "body": hit.candidate.body,
            "scores": {
                "lexical": hit.lexical_score,
                "lexical_rank": fused.lexical_rank if fused else None,
                "dense_rank": fused.dense_rank if fused else None,
                "cosine": fused.cosine if fused else None,
                "score": fused.score if fused else None,
                "ranked_by": ("learned" if fused.learned else "fused") if fused else "bm25",
            },
        }


class MemorySearchResultSerializer(serializers.Serializer):
    """Ranked hits; ``status`` is ``empty`` when there is none (abstention included)."""

    status = serializers.ChoiceField(choices=list(RESULT_STATUSES))
    recall = serializers.DictField(
        help_text=(
            "What ranked the hits: `mode` (hybrid or lexical), `ranker` (learned or hand, hybrid only) and "
            "`abstained` ({family: [scope id]}: the scopes left without a hit because nothing in them was near enough)."
        )
    )
    hits = SearchHitSerializer(many=True)

    def to_representation(self, result: Any) -> dict[str, Any]:
        recall = {"mode": result.mode, "ranker": result.ranker, "abstained": result.abstained}
        return {
            "status": STATUS_READY if result.hits else STATUS_EMPTY,
            "recall": recall,
            "hits": [SearchHitSerializer().to_representation(hit) for hit in result.hits],
        }
