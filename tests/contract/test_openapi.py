"""The committed OpenAPI file is exactly what drf-spectacular generates, and golden responses conform."""

import json
import re

import jsonschema
import pytest
import yaml
from django.core.management import call_command
from hypothesis import given
from hypothesis import strategies as st

from artifacts.services.idempotency import idempotency_key_problem
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


DOCUMENT = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))


def _operations():
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            yield f"{method.upper()} {path}", operation


def _idempotency_key_schemas() -> dict[str, dict]:
    return {
        name: parameter["schema"]
        for name, operation in _operations()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "header" and parameter["name"] == "Idempotency-Key"
    }


def _free_strings(node, where=""):
    """(where, schema) of every string without an enum in a schema (request bodies, parameters)."""
    if isinstance(node, dict):
        if node.get("type") == "string" and "enum" not in node:
            yield where, node
        for key, value in node.items():
            yield from _free_strings(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _free_strings(value, f"{where}[{index}]")


def test_every_write_declares_the_idempotency_key_rule():
    schemas = _idempotency_key_schemas()
    reads = {"POST /v1/context/prepare", "POST /v1/memory/search"}  # POSTed for their bodies, they write nothing
    writes = {name for name, _ in _operations() if name.startswith("POST ") and name not in reads}
    assert set(schemas) == writes
    for schema in schemas.values():
        assert schema == {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[ -~]*$(?!\\n)"}


@given(st.text(max_size=210) | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x80), max_size=210))
def test_the_declared_idempotency_key_rule_accepts_exactly_what_the_server_accepts(key):
    schema = next(iter(_idempotency_key_schemas().values()))
    assert jsonschema.Draft7Validator(schema).is_valid(key) == (idempotency_key_problem(key) is None)


def test_every_free_string_of_a_query_parameter_or_request_body_declares_that_nul_is_refused():
    parameters = [
        (f"{name} {parameter['name']}", parameter["schema"])
        for name, operation in _operations()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "query"
    ]
    requests = {name: schema for name, schema in DOCUMENT["components"]["schemas"].items() if name.endswith("Request")}
    strings = [(where, schema) for where, schema in parameters if schema["type"] == "string" and "enum" not in schema]
    strings += list(_free_strings(requests))
    assert len(strings) > 20
    for where, schema in strings:
        assert "pattern" in schema, where
        assert re.search(schema["pattern"], "a") and not re.search(schema["pattern"], "a\x00b"), where


def test_the_query_pattern_also_requires_a_character_that_is_not_whitespace():
    pattern = DOCUMENT["components"]["schemas"]["PrepareContextRequest"]["properties"]["query"]["pattern"]
    assert [bool(re.search(pattern, text)) for text in [" q ", "\n\tq", " \t\n", "q\x00", "\x00"]] == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_assembly_arrays_declare_unique_items():
    assembly = DOCUMENT["components"]["schemas"]["PrepareContextRequest"]["properties"]["assembly"]["properties"]
    assert assembly["sections"]["uniqueItems"] is True
    assert assembly["show"]["uniqueItems"] is True
    validator = _validator("PrepareContextRequest")
    section = {"family": "memory", "limit": 2}
    assert not validator.is_valid({"scope_id": "s", "query": "q", "assembly": {"sections": [section, section]}})
