"""RFC acceptance 4: every invalid prepare request is a 422 ``invalid_request`` naming the exact field.

One parametrized case per rule. Each valid neighbour (the boundary just inside) is checked too, so a
rule that rejects too much fails here as well as one that rejects too little.
"""

import json

import pytest

from artifacts.models import Scope
from tests.api.factories import (
    add_memory,
    error_of,
    field_paths,
    make_key,
    make_scope,
    ok_json,
    prepare,
    prepare_raw,
)


@pytest.fixture
def key(db):
    scope = make_scope("project:demo")
    add_memory(scope, {"entry-1": "alpha memory"})
    return make_key(read=[scope])


def body_with(assembly=..., **top):
    body = {"scope_id": "project:demo", "query": "alpha"}
    if assembly is not ...:
        body["assembly"] = assembly
    body.update(top)
    return body


def sections(*items):
    return {"sections": list(items)}


def memory(limit):
    return {"family": "memory", "limit": limit}


INVALID = {
    # assembly object
    "assembly null": (body_with(None), ["assembly"]),
    "assembly a list": (body_with([]), ["assembly"]),
    "assembly a string": (body_with("markdown"), ["assembly"]),
    "sort_by inside assembly": (body_with({"sort_by": "score"}), ["assembly.sort_by"]),
    "min_confidence inside assembly": (body_with({"min_confidence": 0.5}), ["assembly.min_confidence"]),
    "unknown format": (body_with({"format": "html"}), ["assembly.format"]),
    "null format": (body_with({"format": None}), ["assembly.format"]),
    # sections
    "sections not a list": (body_with({"sections": {"family": "memory", "limit": 1}}), ["assembly.sections"]),
    "sections null": (body_with({"sections": None}), ["assembly.sections"]),
    "show null": (body_with({"show": None}), ["assembly.show"]),
    "scope_id 201 characters": (body_with(scope_id="s" * 201), ["scope_id"]),
    "section not an object": (body_with(sections("memory")), ["assembly.sections[0]"]),
    "unknown family": (body_with(sections({"family": "skill", "limit": 1})), ["assembly.sections[0].family"]),
    "family in other case": (body_with(sections({"family": "Memory", "limit": 1})), ["assembly.sections[0].family"]),
    "duplicate family": (body_with(sections(memory(2), memory(3))), ["assembly.sections[1].family"]),
    "missing family": (body_with(sections({"limit": 1})), ["assembly.sections[0].family"]),
    "missing limit": (body_with(sections({"family": "memory"})), ["assembly.sections[0].limit"]),
    "unknown key in a section": (
        body_with(sections({"family": "memory", "limit": 1, "weight": 2})),
        ["assembly.sections[0].weight"],
    ),
    "sort_by in a section": (
        body_with(sections({"family": "memory", "limit": 1, "sort_by": "score"})),
        ["assembly.sections[0].sort_by"],
    ),
    "limit 0": (body_with(sections(memory(0))), ["assembly.sections[0].limit"]),
    "negative limit": (body_with(sections(memory(-1))), ["assembly.sections[0].limit"]),
    "memory limit 17": (body_with(sections(memory(17))), ["assembly.sections[0].limit"]),
    "experience limit 9": (
        body_with(sections(memory(1), {"family": "experience", "limit": 9})),
        ["assembly.sections[1].limit"],
    ),
    "topic_memory limit 9": (
        body_with(sections({"family": "topic_memory", "limit": 9})),
        ["assembly.sections[0].limit"],
    ),
    "profile limit 9": (body_with(sections({"family": "profile", "limit": 9})), ["assembly.sections[0].limit"]),
    "boolean limit": (body_with(sections(memory(True))), ["assembly.sections[0].limit"]),
    "string limit": (body_with(sections(memory("3"))), ["assembly.sections[0].limit"]),
    "float limit": (body_with(sections(memory(2.0))), ["assembly.sections[0].limit"]),
    "null limit": (body_with(sections(memory(None))), ["assembly.sections[0].limit"]),
    # show
    "show not a list": (body_with({"show": "confidence"}), ["assembly.show"]),
    "unknown show": (body_with({"show": ["score"]}), ["assembly.show[0]"]),
    "duplicate show": (body_with({"show": ["recall_rank", "recall_rank"]}), ["assembly.show[1]"]),
    # top level
    "sort_by at top level": (body_with(sort_by="score"), ["sort_by"]),
    "min_confidence at top level": (body_with(min_confidence=0.5), ["min_confidence"]),
    "unknown top-level field": (body_with(format="markdown"), ["format"]),
    "scope_id missing": ({"query": "alpha"}, ["scope_id"]),
    "scope_id null": (body_with(scope_id=None), ["scope_id"]),
    "scope_id a number": (body_with(scope_id=7), ["scope_id"]),
    "query missing": ({"scope_id": "project:demo"}, ["query"]),
    "query empty": (body_with(query=""), ["query"]),
    "query whitespace only": (body_with(query=" \t\n\u3000 "), ["query"]),
    "query 8193 characters": (body_with(query="a" * 8193), ["query"]),
    "query a list": (body_with(query=["alpha"]), ["query"]),
    "NUL in query": (body_with(query="alpha\x00beta"), ["query"]),
    "max_bytes 511": (body_with(max_bytes=511), ["max_bytes"]),
    "max_bytes 32769": (body_with(max_bytes=32769), ["max_bytes"]),
    "max_bytes true": (body_with(max_bytes=True), ["max_bytes"]),
    "max_bytes 1.5": (body_with(max_bytes=1.5), ["max_bytes"]),
    "max_bytes 800.0": (body_with(max_bytes=800.0), ["max_bytes"]),
    "max_bytes a string": (body_with(max_bytes="800"), ["max_bytes"]),
    "max_bytes null": (body_with(max_bytes=None), ["max_bytes"]),
}


@pytest.mark.django_db
@pytest.mark.parametrize("body, paths", INVALID.values(), ids=INVALID.keys())
def test_invalid_request_is_rejected_with_the_exact_field_path(client, key, body, paths):
    response = prepare_raw(client, key, json.dumps(body))

    error = error_of(response, 422, "invalid_request")
    assert [field["path"] for field in error["fields"]] == paths


@pytest.mark.django_db
def test_every_problem_of_a_request_is_reported(client, key):
    body = {
        "query": "",
        "max_bytes": True,
        "extra": 1,
        "assembly": {
            "format": "text",
            "sections": [memory(0), {"family": "nope", "limit": 1}, memory(1)],
            "show": ["x"],
            "sort_by": "score",
        },
    }

    paths = field_paths(prepare_raw(client, key, json.dumps(body)))

    assert sorted(paths) == sorted(
        [
            "extra",
            "scope_id",
            "query",
            "max_bytes",
            "assembly.sort_by",
            "assembly.format",
            "assembly.sections[0].limit",
            "assembly.sections[1].family",
            "assembly.sections[2].family",
            "assembly.show[0]",
        ]
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "assembly, path",
    [
        ({"sections": [memory(4), {"family": "experience", "limit": 2}]}, "assembly.sections"),
        ({}, "assembly.sections"),  # the defaults (6 + 2) count too
        ({"sections": [memory(6)]}, "assembly.sections"),
    ],
)
def test_total_limits_above_the_policy_are_rejected(client, key, settings, assembly, path):
    settings.POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES = 5

    response = prepare_raw(client, key, json.dumps(body_with(assembly)))

    error = error_of(response, 422, "invalid_request")
    assert [field["path"] for field in error["fields"]] == [path]
    assert "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES" in error["fields"][0]["message"]


def raising_source(*, scopes, query):
    raise RuntimeError("recall backend is down")


@pytest.mark.django_db
def test_total_limits_are_checked_before_any_recall(client, key, settings):
    settings.POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES = 5
    settings.POWERCONTEXT_RECALL_SOURCES = {
        family: "tests.api.test_prepare_validation.raising_source"
        for family in ("memory", "experience", "topic_memory", "profile")
    }

    over = prepare(client, key, body_with({"sections": [memory(6)]}))
    within = prepare(client, key, body_with({"sections": [memory(5)]}))

    assert field_paths(over) == ["assembly.sections"]
    error_of(within, 503, "service_unavailable")


@pytest.mark.django_db
def test_total_limits_at_the_policy_are_accepted(client, key, settings):
    settings.POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES = 5

    response = prepare(client, key, body_with({"sections": [memory(3), {"family": "experience", "limit": 2}]}))

    assert ok_json(response)["status"] == "ready"


@pytest.mark.django_db
def test_default_total_policy_allows_every_family_at_its_maximum(client, key):
    assembly = {
        "sections": [
            memory(16),
            {"family": "experience", "limit": 8},
            {"family": "topic_memory", "limit": 8},
        ]
    }
    assert ok_json(prepare(client, key, body_with(assembly)))["status"] == "ready"
    assembly["sections"].append({"family": "profile", "limit": 1})
    error = error_of(prepare(client, key, body_with(assembly)), 422, "invalid_request")
    assert [field["path"] for field in error["fields"]] == ["assembly.sections"]


VALID_BOUNDARIES = {
    "memory limit 16": body_with(sections(memory(16))),
    "experience limit 8": body_with(sections({"family": "experience", "limit": 8})),
    "topic_memory limit 8": body_with(sections({"family": "topic_memory", "limit": 8})),
    "profile limit 8": body_with(sections({"family": "profile", "limit": 8})),
    "limit 1": body_with(sections(memory(1))),
    "every family once": body_with(
        sections(
            {"family": "profile", "limit": 1},
            {"family": "topic_memory", "limit": 1},
            {"family": "experience", "limit": 1},
            memory(1),
        )
    ),
    "both show values": body_with({"show": ["recall_rank", "confidence"]}),
    "empty show": body_with({"show": []}),
    "format markdown": body_with({"format": "markdown"}),
    "query 8192 characters": body_with(query="alpha " + "a" * 8186),
    "query with surrounding whitespace": body_with(query="  alpha  "),
    "query of astral characters": body_with(query="😀" * 8192),
    "max_bytes 512": body_with(max_bytes=512),
    "max_bytes 32768": body_with(max_bytes=32768),
}


@pytest.mark.django_db
@pytest.mark.parametrize("body", VALID_BOUNDARIES.values(), ids=VALID_BOUNDARIES.keys())
def test_boundary_values_just_inside_the_rules_are_accepted(client, key, body):
    assert ok_json(prepare_raw(client, key, json.dumps(body)))["status"] in ("ready", "empty")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "raw",
    [
        b'{"scope_id": "project:demo", "query": ',
        b"{'scope_id': 'project:demo'}",
        b"\xff\xfe{}",
        b'{"scope_id": "project:demo", "query": "alpha", "max_bytes": NaN}',
        b'{"scope_id": "project:demo", "query": "alpha"} trailing',
    ],
    ids=["truncated JSON", "single quotes", "not UTF-8", "NaN", "trailing garbage"],
)
def test_unparsable_json_body_is_rejected(client, key, raw):
    error = error_of(prepare_raw(client, key, raw), 422, "invalid_request")
    assert error["fields"] == []


@pytest.mark.django_db
def test_empty_body_is_rejected_as_missing_fields(client, key):
    assert field_paths(prepare_raw(client, key, b"")) == ["scope_id", "query"]


@pytest.mark.django_db
@pytest.mark.parametrize("raw", [b"[]", b'[{"scope_id": "project:demo", "query": "alpha"}]', b'"alpha"', b"7", b"null"])
def test_body_that_is_not_a_json_object_is_rejected(client, key, raw):
    error = error_of(prepare_raw(client, key, raw), 422, "invalid_request")
    # A body-level problem names no request field (``null`` is reported with the empty path).
    assert all(field["path"] == "" for field in error["fields"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    "raw, path",
    [
        (b'{"scope_id":"project:demo","query":"\\ud800"}', "query"),
        (b'{"scope_id":"project:demo","query":"alpha \\udfff beta"}', "query"),
        (b'{"scope_id":"project:\\ud83d","query":"alpha"}', "scope_id"),
        (b'{"scope_id":"project:demo","query":"alpha\\u0000"}', "query"),
        (b'{"scope_id":"project:demo\\u0000","query":"alpha"}', "scope_id"),
    ],
    ids=["lone high surrogate", "lone low surrogate", "surrogate in scope_id", "NUL in query", "NUL in scope_id"],
)
def test_unstorable_characters_are_rejected_with_the_field_path(client, key, raw, path):
    error = error_of(prepare_raw(client, key, raw), 422, "invalid_request")
    assert [field["path"] for field in error["fields"]] == [path]


@pytest.mark.django_db
def test_escaped_surrogate_pair_is_a_valid_query(client, key):
    response = prepare_raw(client, key, b'{"scope_id":"project:demo","query":"alpha \\ud83d\\ude00"}')

    assert ok_json(response)["status"] == "ready"


@pytest.mark.django_db
def test_validation_error_body_has_the_single_error_shape(client, key):
    response = prepare(client, key, body_with(sections({"family": "memory", "limit": 0})))

    assert response.status_code == 422
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body == {
        "error": {
            "code": "invalid_request",
            "message": body["error"]["message"],
            "fields": [{"path": "assembly.sections[0].limit", "message": body["error"]["fields"][0]["message"]}],
        }
    }


@pytest.mark.django_db
def test_invalid_request_is_rejected_before_the_scope_is_looked_up(client, key):
    response = prepare(client, key, {"scope_id": "project:unknown", "query": "alpha", "assembly": None})

    error = error_of(response, 422, "invalid_request")
    assert [field["path"] for field in error["fields"]] == ["assembly"]


@pytest.mark.django_db
def test_invalid_request_does_not_echo_the_submitted_values(client, key):
    response = prepare(client, key, body_with({"format": "secret-format-value"}, query="secret-query-" + "x" * 9000))

    assert b"secret-format-value" not in response.content
    assert b"secret-query-" not in response.content


@pytest.mark.django_db
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_body_that_is_not_json_media_is_rejected(client, key, content_type):
    response = client.post(
        "/v1/context/prepare",
        data=json.dumps(body_with({})),
        content_type=content_type,
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )

    error_of(response, 422, "invalid_request")


@pytest.mark.django_db
def test_oversized_body_is_rejected_not_crashed(client, key):
    response = prepare(client, key, body_with(query="a" * 3_000_000))

    error_of(response, 422, "invalid_request")


@pytest.mark.django_db
def test_prepare_accepts_only_post(client, key):
    response = client.get("/v1/context/prepare", HTTP_AUTHORIZATION=f"Bearer {key}")

    error_of(response, 405, "method_not_allowed")


@pytest.mark.django_db
def test_long_cjk_query_at_the_length_limit_is_answered(client, key):
    scope = Scope.objects.get(scope_id="project:demo")
    characters = [chr(0x4E00 + (i * 7919) % 20000) for i in range(8192)]
    add_memory(scope, {f"zh-{i}": "".join(characters[i * 200 : i * 200 + 200]) for i in range(40)})

    response = prepare(client, key, body_with({}, query="".join(characters)))

    assert ok_json(response)["status"] == "ready"
