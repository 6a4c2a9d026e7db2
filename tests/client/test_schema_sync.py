"""The client's pydantic models agree with the committed OpenAPI contract, so client and server cannot drift.

Both sides are reduced to one canonical shape: property names, required fields, closed objects, enums
(``const`` counts as a one-value enum), nullability, string/number/array bounds and scalar defaults.
"""

import json

import pytest
import yaml
from powercontext_client import models
from pydantic import BaseModel

from tests.conftest import PROJECT_ROOT
from vocabulary.families import POOL_CAP

OPENAPI = yaml.safe_load((PROJECT_ROOT / "openapi" / "powercontext.yaml").read_text(encoding="utf-8"))

_BOUNDS = ("minLength", "maxLength", "pattern", "minimum", "maximum", "minItems", "maxItems", "uniqueItems")


def _resolve(node: dict, root: dict) -> dict:
    while "$ref" in node:
        *_, section, name = node["$ref"].split("/")
        node = root["$defs"][name] if section == "$defs" else root["components"]["schemas"][name]
    return node


def canonical(node: dict, root: dict) -> dict:
    node = _resolve(node, root)
    variants = node.get("anyOf") or node.get("oneOf")
    if variants:
        non_null = [variant for variant in variants if variant.get("type") != "null"]
        if len(non_null) < len(variants) and len(non_null) == 1:
            return canonical(non_null[0], root) | {"nullable": True}
        shapes = sorted((canonical(variant, root) for variant in non_null), key=lambda s: json.dumps(s, sort_keys=True))
        return {"oneOf": shapes, **({"nullable": True} if len(non_null) < len(variants) else {})}
    if "allOf" in node and len(node["allOf"]) == 1:
        return canonical(node["allOf"][0], root) | ({"nullable": True} if node.get("nullable") else {})
    shape: dict = {}
    if node.get("nullable"):
        shape["nullable"] = True
    if "const" in node:
        shape["enum"] = [node["const"]]
    elif "enum" in node:
        shape["enum"] = sorted(node["enum"])
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        shape["type"] = "object"
        shape["properties"] = {name: canonical(value, root) for name, value in node.get("properties", {}).items()}
        shape["required"] = sorted(node.get("required", []))
        shape["closed"] = node.get("additionalProperties") is False
        return shape
    if kind:
        shape["type"] = kind
    for bound in _BOUNDS:
        if bound in node:
            shape[bound] = node[bound]
    if kind == "array":
        shape["items"] = canonical(node["items"], root)
    if "default" in node and kind in ("string", "integer"):
        shape["default"] = node["default"]
    return shape


def openapi_shape(component: str) -> dict:
    return canonical({"$ref": f"#/components/schemas/{component}"}, OPENAPI)


def model_shape(model: type[BaseModel], mode: str) -> dict:
    schema = model.model_json_schema(by_alias=True, mode=mode)
    return canonical(schema, schema)


REQUESTS = {
    "PrepareContextRequest": models.PrepareContextRequest,
    "MemorySearchRequestRequest": models.MemorySearchRequest,
    "MemoryEntryWriteRequest": models.MemoryEntryWriteRequest,
    "MemoryEntryRemoveRequest": models.MemoryEntryRemoveRequest,
    "ExperienceWriteRequest": models.ExperienceWriteRequest,
    "TopicMemoryWriteRequest": models.TopicMemoryWriteRequest,
    "ProfileCandidateProposeRequest": models.ProfileCandidateProposeRequest,
    "ProfileCandidateDecisionRequest": models.ProfileCandidateDecisionRequest,
}
RESPONSES = {
    "PreparedContext": models.PreparedContext,
    "Error": models.Error,
    "ErrorDetail": models.ErrorDetail,
    "ErrorField": models.ErrorField,
    "ExactRevision": models.ExactRevision,
    "ExactEntryVersion": models.ExactEntryVersion,
    "EntryVersion": models.EntryVersion,
    "WriteResult": models.WriteResult,
    "Citation": models.Citation,
    "HistoryPage": models.HistoryPage,
    "HistoryEntry": models.HistoryEntry,
    "ScopeListPage": models.ScopeListPage,
    "ReadableScope": models.ReadableScope,
    "ProfileCandidate": models.ProfileCandidate,
    "SearchHit": models.SearchHit,
    "SearchScores": models.SearchScores,
}


@pytest.mark.parametrize("component", list(REQUESTS))
def test_request_models_match_openapi(component):
    model, contract = model_shape(REQUESTS[component], "validation"), openapi_shape(component)
    assert model == contract


def _names_and_required(shape: dict) -> dict:
    """Response models may admit more (optional lists, ignored extras); names and required must agree."""
    if shape.get("type") != "object":
        return {"enum": shape["enum"]} if "enum" in shape else {}
    return {
        "properties": {name: _names_and_required(value) for name, value in shape["properties"].items()},
        "required": shape["required"],
    }


@pytest.mark.parametrize("component", list(RESPONSES))
def test_response_models_match_openapi_names_required_and_enums(component):
    model = model_shape(RESPONSES[component], "serialization")
    assert _names_and_required(model) == _names_and_required(openapi_shape(component))


def test_prepared_context_matches_openapi_exactly():
    # The four-field response is strict: closed, every field required, content nullable, exact enums.
    model = model_shape(models.PreparedContext, "serialization")
    expected = openapi_shape("PreparedContext")
    expected["closed"] = True  # the OpenAPI object does not say so; the RFC and the validator do
    assert model == expected


def test_the_search_result_matches_openapi_and_types_what_the_contract_leaves_open():
    # The contract publishes `recall` as an open object and describes its fields in words; the client types them.
    model = _names_and_required(model_shape(models.MemorySearchResult, "serialization"))
    contract = _names_and_required(openapi_shape("MemorySearchResult"))
    recall = model["properties"].pop("recall")
    assert contract["properties"].pop("recall") == {"properties": {}, "required": []}
    assert model == contract
    assert recall["required"] == ["abstained", "mode", "ranker"]
    description = OPENAPI["components"]["schemas"]["MemorySearchResult"]["properties"]["recall"]["description"]
    assert all(f"`{name}`" in description for name in recall["required"])


def test_the_search_limits_are_the_contracts():
    request = OPENAPI["components"]["schemas"]["MemorySearchRequestRequest"]["properties"]
    assert request["limit"]["maximum"] == models.SEARCH_LIMIT_MAX
    assert request["limit"]["default"] == models.SEARCH_LIMIT_DEFAULT
    assert request["families"]["default"] == list(models.SEARCHED_FAMILIES)
    assert "memory 16, experience 8" in request["limit"]["description"]
    assert {family: POOL_CAP[family] for family in models.SEARCHED_FAMILIES} == models.SEARCH_POOL


def test_error_codes_match_openapi():
    assert model_shape(models.ErrorDetail, "serialization")["properties"]["code"]["enum"] == sorted(
        OPENAPI["components"]["schemas"]["CodeEnum"]["enum"]
    )


def test_assembly_schema_is_compared_in_depth():
    # Guard against a comparison that passes vacuously: the canonical assembly shape carries the details.
    assembly = openapi_shape("PrepareContextRequest")["properties"]["assembly"]
    assert assembly["closed"] is True
    assert set(assembly["properties"]) == {"format", "sections", "show"}
    assert assembly["properties"]["format"] == {"enum": ["markdown"], "type": "string", "default": "markdown"}
    limits = {
        variant["properties"]["family"]["enum"][0]: variant["properties"]["limit"]["maximum"]
        for variant in assembly["properties"]["sections"]["items"]["oneOf"]
    }
    assert limits == models.FAMILY_LIMIT_MAX
    assert assembly["properties"]["show"]["items"]["enum"] == ["confidence", "recall_rank"]


def test_every_operation_of_the_contract_is_covered_by_the_client():
    from powercontext_client import PowerContextClient

    operations = {
        operation["operationId"]
        for path in OPENAPI["paths"].values()
        for method, operation in path.items()
        if method in ("get", "post")
    }
    client_methods = {
        "prepare_context": "prepare_context",
        "search_memories": "search_memories",
        "read_exact_revision": "read_exact_revision",
        "artifact_history": "artifact_history",
        "scope_list": "list_scopes",
        "memory_entry_create": "create_memory_entry",
        "memory_entry_update": "update_memory_entry",
        "memory_entry_remove": "remove_memory_entry",
        "experience_revision_create": "record_experience_revision",
        "topic_memory_revision_create": "record_topic_memory_revision",
        "profile_candidate_propose": "propose_profile_candidate",
        "profile_candidate_commit": "commit_profile_candidate",
        "profile_candidate_reject": "reject_profile_candidate",
    }
    assert operations == set(client_methods)
    assert all(callable(getattr(PowerContextClient, name)) for name in client_methods.values())


def test_the_client_reads_whole_memory_revisions_in_the_largest_pages_the_contract_allows():
    from powercontext_client.client import ENTRIES_PAGE_MAX

    parameters = OPENAPI["paths"]["/v1/artifacts/revision"]["get"]["parameters"]
    (limit,) = [parameter for parameter in parameters if parameter["name"] == "entries_limit"]
    assert limit["schema"]["maximum"] == ENTRIES_PAGE_MAX
