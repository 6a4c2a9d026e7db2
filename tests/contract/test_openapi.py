"""The committed OpenAPI file is exactly what drf-spectacular generates, and golden responses conform."""

import json

import jsonschema
import pytest
import yaml
from django.core.management import call_command

from tests.conftest import GOLDEN, PROJECT_ROOT

COMMITTED = PROJECT_ROOT / "openapi" / "powercontext.yaml"


def _json_schema(node):
    """OpenAPI 3.0 → JSON Schema: ``nullable: true`` becomes a union with null."""
    if isinstance(node, dict):
        converted = {k: _json_schema(v) for k, v in node.items() if k != "nullable"}
        if node.get("nullable") and "type" in node:
            converted["type"] = [node["type"], "null"]
            if "enum" in converted:
                converted["enum"] = [*converted["enum"], None]
        return converted
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    return node


def _validator(component: str) -> jsonschema.Draft7Validator:
    document = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))
    root = {"$ref": f"#/components/schemas/{component}", "components": _json_schema(document["components"])}
    return jsonschema.Draft7Validator(root)


def test_committed_schema_matches_generation_without_warnings(tmp_path):
    generated = tmp_path / "powercontext.yaml"
    call_command("spectacular", file=str(generated), validate=True, fail_on_warn=True)
    assert generated.read_text(encoding="utf-8") == COMMITTED.read_text(encoding="utf-8"), (
        "openapi/powercontext.yaml is stale: run `make api-generate` and commit it"
    )


@pytest.mark.parametrize("response_file", sorted(p.name for p in GOLDEN.glob("*.response.json")))
def test_golden_response_conforms_to_the_schema(response_file):
    body = json.loads((GOLDEN / response_file).read_text(encoding="utf-8"))
    _validator("PreparedContext").validate(body)


@pytest.mark.parametrize("request_file", sorted(p.name for p in GOLDEN.glob("*.request.json")))
def test_golden_request_conforms_to_the_schema(request_file):
    body = json.loads((GOLDEN / request_file).read_text(encoding="utf-8"))
    _validator("PrepareContextRequest").validate(body)


def test_schema_refuses_unknown_request_fields():
    validator = _validator("PrepareContextRequest")
    assert not validator.is_valid({"scope_id": "s", "query": "q", "sort_by": "score"})
    assert not validator.is_valid({"scope_id": "s", "query": "q", "assembly": None})
    assert not validator.is_valid(
        {"scope_id": "s", "query": "q", "assembly": {"sections": [{"family": "memory", "limit": 17}]}}
    )
