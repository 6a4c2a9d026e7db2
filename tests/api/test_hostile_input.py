"""Bad input always gets the one error shape (422), never a 500: deep nesting and lone surrogates in keys,
on every endpoint that takes a body."""

import json

import pytest

from tests.api.factories import auth, make_key, make_scope
from vocabulary.json_input import MAX_JSON_DEPTH, json_depth
from vocabulary.limits import MAX_ERROR_FIELDS, MAX_UNKNOWN_FIELDS_NAMED

POST_ENDPOINTS = [
    "/v1/context/prepare",
    "/v1/memory/entries",
    "/v1/memory/entries/update",
    "/v1/memory/entries/remove",
    "/v1/experiences/revisions",
    "/v1/topic-memories/revisions",
    "/v1/profile/candidates",
    "/v1/profile/candidates/1/commit",
    "/v1/profile/candidates/1/reject",
]


@pytest.fixture
def key(db):
    scope = make_scope("project:demo")
    return make_key(read=[scope], write=[scope])


def post_raw(client, key, path, text: str, *, charset: str | None = None):
    """POST ``text`` as UTF-8 bytes, whatever ``charset`` the Content-Type names (``client.post`` would re-encode
    them by it)."""
    content_type = "application/json" if charset is None else f"application/json; charset={charset}"
    return client.generic("POST", path, text.encode("utf-8"), content_type=content_type, **auth(key))


def assert_invalid_request(response) -> dict:
    assert response.status_code == 422, response.content[:200]
    body = json.loads(response.content.decode("utf-8"))
    assert body["error"]["code"] == "invalid_request"
    return body


@pytest.mark.parametrize("path", POST_ENDPOINTS)
@pytest.mark.parametrize("field", ["query", "assembly", "body", "unknown"])
def test_json_nested_950_levels_deep_in_any_field_is_refused_with_422(client, key, path, field):
    deep = "[" * 950 + "]" * 950
    text = f'{{"scope_id": "project:demo", "{field}": {deep}}}'
    body = assert_invalid_request(post_raw(client, key, path, text))
    assert f"deeper than {MAX_JSON_DEPTH} levels" in body["error"]["message"]


def test_nesting_up_to_the_documented_depth_is_read_and_validated_normally(client, key):
    nested = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    text = f'{{"scope_id": "project:demo", "query": "q", "assembly": {nested}}}'
    body = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))
    assert [f["path"] for f in body["error"]["fields"]] == ["assembly"]


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_a_lone_surrogate_in_an_object_key_is_refused_with_an_encodable_path(client, key, path):
    text = '{"scope_id": "project:demo", "query": "x", "\\ud800": 1}'
    body = assert_invalid_request(post_raw(client, key, path, text))
    paths = [f["path"] for f in body["error"]["fields"]]
    assert "\\ud800" in paths


def test_a_lone_surrogate_in_a_nested_key_is_refused_with_an_encodable_path(client, key):
    text = '{"scope_id": "project:demo", "query": "x", "assembly": {"\\udfff": 1}}'
    body = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))
    assert "assembly.\\udfff" in [f["path"] for f in body["error"]["fields"]]


def test_brackets_inside_strings_do_not_count_as_nesting():
    assert json_depth('{"a": "[[[[[[[[[[{{{{{{{{", "b": ["\\"]]]]"]}') == 2


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_a_megabyte_unterminated_string_of_escaped_quotes_is_refused_with_422(client, key, path):
    # The shape that cost the old depth check quadratic time (80 KB took 16 s): now one pass, then the decoder.
    text = '{"scope_id": "project:demo", "query": "' + '\\"' * 500_000
    body = assert_invalid_request(post_raw(client, key, path, text))
    assert "Unterminated string" in body["error"]["message"]


def test_deep_brackets_before_a_megabyte_unterminated_string_are_refused_as_too_deep(client, key):
    text = "[" * 950 + '"' + '\\"' * 500_000
    body = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))
    assert f"deeper than {MAX_JSON_DEPTH} levels" in body["error"]["message"]


def test_a_body_beyond_the_size_cap_is_refused_before_any_parsing(client, key, settings):
    text = '{"scope_id": "project:demo", "query": "' + '\\"' * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 2 + 1)
    body = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))
    assert body["error"]["message"] == "the request body is too large"


@pytest.mark.parametrize("path", ["/v1/context/prepare", "/v1/memory/entries"])
def test_a_hundred_thousand_unknown_keys_are_answered_with_the_first_ones_named_and_the_rest_counted(client, key, path):
    body = {"scope_id": "project:demo", **{f"k{i}": 1 for i in range(100_000)}}
    response = post_raw(client, key, path, json.dumps(body))
    fields = assert_invalid_request(response)["error"]["fields"]
    unknown = [f for f in fields if f["message"] == "unknown field"]
    assert [f["path"] for f in unknown] == [f"k{i}" for i in range(MAX_UNKNOWN_FIELDS_NAMED)]
    assert {"path": "", "message": f"{100_000 - MAX_UNKNOWN_FIELDS_NAMED} more unknown fields not named"} in fields
    assert len(response.content) < 5_000


def test_unknown_keys_of_the_assembly_object_are_counted_at_its_path(client, key):
    assembly = {f"k{i}": 1 for i in range(100_000)}
    text = json.dumps({"scope_id": "project:demo", "query": "q", "assembly": assembly})
    fields = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))["error"]["fields"]
    assert [f["path"] for f in fields[:MAX_UNKNOWN_FIELDS_NAMED]] == [
        f"assembly.k{i}" for i in range(MAX_UNKNOWN_FIELDS_NAMED)
    ]
    assert fields[MAX_UNKNOWN_FIELDS_NAMED:] == [
        {"path": "assembly", "message": f"{100_000 - MAX_UNKNOWN_FIELDS_NAMED} more unknown fields not named"}
    ]


def test_exactly_the_named_number_of_unknown_keys_are_all_named_without_a_count(client, key):
    unknown = {f"k{i}": 1 for i in range(MAX_UNKNOWN_FIELDS_NAMED)}
    text = json.dumps({"scope_id": "project:demo", "query": "q", **unknown})
    fields = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))["error"]["fields"]
    assert fields == [{"path": name, "message": "unknown field"} for name in unknown]


def test_a_hundred_thousand_sections_are_refused_as_one_error_before_any_item_is_read(client, key):
    text = json.dumps({"scope_id": "project:demo", "query": "q", "assembly": {"sections": [1] * 100_000}})
    fields = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))["error"]["fields"]
    assert fields == [
        {"path": "assembly.sections", "message": "must have at most 4 sections (one per family), got 100000"}
    ]


def test_a_hundred_thousand_show_values_are_refused_as_one_error(client, key):
    text = json.dumps({"scope_id": "project:demo", "query": "q", "assembly": {"show": ["confidence"] * 100_000}})
    fields = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))["error"]["fields"]
    assert fields == [{"path": "assembly.show", "message": "must have at most 2 values, got 100000"}]


def test_an_error_lists_at_most_the_documented_number_of_fields_and_counts_the_rest(client, key):
    unknown = {f"k{i}": 1 for i in range(30)}  # 20 named and one count, at each of six objects
    assembly = {**unknown, "sections": [dict(unknown)] * 4}  # each section also lacks family and limit
    text = json.dumps({"scope_id": "project:demo", "query": "q", **unknown, "assembly": assembly})
    fields = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))["error"]["fields"]
    problems = 21 + 21 + 4 * (21 + 2)
    assert len(fields) == MAX_ERROR_FIELDS
    assert fields[-1] == {"path": "", "message": f"{problems - (MAX_ERROR_FIELDS - 1)} more problems not listed"}


@pytest.mark.parametrize("path", POST_ENDPOINTS)
@pytest.mark.parametrize("charset", ["unicode_escape", "raw_unicode_escape", "utf-7", "UTF-16"])
def test_a_charset_that_would_decode_to_deeper_nesting_is_read_as_utf8_and_refused_with_422(client, key, path, charset):
    # Each ``\u005b`` (or UTF-7's ``+AFs-``) would become ``[`` if the body were decoded by the named codec.
    opening, closing = ("+AFs-", "+AF0-") if charset == "utf-7" else ("\\u005b", "\\u005d")
    text = '{"scope_id": "project:demo", "query": ' + opening * 50_000 + "1" + closing * 50_000 + "}"
    assert_invalid_request(post_raw(client, key, path, text, charset=charset))


def test_a_body_sent_with_another_charset_is_read_as_the_utf8_it_is(client, key):
    text = '{"scope_id": "project:demo", "entry_id": "e", "body": "caf\u00e9 \\u005b"}'
    written = post_raw(client, key, "/v1/memory/entries", text, charset="unicode_escape")
    assert written.status_code == 201, written.content[:300]
    citation = written.json()["citation"]
    query = {k: citation[k] for k in ("scope_id", "family", "artifact_id", "revision")}
    read = client.get("/v1/artifacts/revision", query, **auth(key))
    assert [entry["body"] for entry in read.json()["entries"]] == ["caf\u00e9 ["]


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_a_key_given_twice_is_refused_not_read_as_its_last_value(client, key, path):
    other = make_scope("project:other")
    text = f'{{"scope_id": "project:demo", "query": "q", "scope_id": "{other.scope_id}"}}'
    body = assert_invalid_request(post_raw(client, key, path, text))
    assert body["error"]["message"].endswith('the key "scope_id" is given more than once in one object')


def test_a_key_given_twice_inside_the_assembly_object_is_refused(client, key):
    text = (
        '{"scope_id": "project:demo", "query": "q", "assembly": {"sections": [], "sections": [{"family": "memory"}]}}'
    )
    body = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", text))
    assert 'the key "sections" is given more than once' in body["error"]["message"]


def test_a_megabyte_key_given_twice_is_quoted_short_and_a_lone_surrogate_as_its_escape(client, key):
    long_key = "k" * 1_000_000
    body = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", f'{{"{long_key}": 1, "{long_key}": 2}}'))
    assert len(body["error"]["message"]) < 200
    body = assert_invalid_request(post_raw(client, key, "/v1/context/prepare", '{"\\ud800": 1, "\\ud800": 2}'))
    assert '"\\\\ud800"' in body["error"]["message"]
