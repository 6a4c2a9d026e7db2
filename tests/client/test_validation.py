"""The strict four-field response validator, on golden responses and on broken ones."""

import json

import httpx
import pytest
from powercontext_client import (
    InvalidPreparedContext,
    InvalidPreparedContextResponse,
    PowerContextClient,
    validate_prepared_context,
)

from tests.conftest import GOLDEN, golden_json

SCHEMA = "powercontext.prepared-context.v1"
CASES = [
    "guide-en",
    "guide-zh",
    "defaults-en",
    "defaults-zh",
    "memory-only-en",
    "memory-only-zh",
    "legacy-en",
    "legacy-zh",
]


def ready(text: str, **changes) -> dict:
    return {"schema": SCHEMA, "status": "ready", "content": text, "content_bytes": len(text.encode())} | changes


EMPTY = {"schema": SCHEMA, "status": "empty", "content": None, "content_bytes": 0}


@pytest.mark.parametrize("case", CASES)
def test_golden_ready_responses_pass_and_return_the_content_unchanged(case):
    raw = (GOLDEN / f"{case}.response.json").read_bytes()
    content = validate_prepared_context(raw, max_bytes=8000)
    assert content == json.loads(raw)["content"]
    plain = next(GOLDEN.glob(f"{case}.content.*")).read_text(encoding="utf-8")
    assert content == plain


@pytest.mark.parametrize("case", ["sections-empty-en", "sections-empty-zh"])
def test_golden_empty_responses_pass_as_none(case):
    assert validate_prepared_context(golden_json(f"{case}.response.json"), max_bytes=512) is None


def test_accepts_text_bytes_and_mappings_alike():
    payload = ready("héllo")
    assert validate_prepared_context(payload) == "héllo"
    assert validate_prepared_context(json.dumps(payload)) == "héllo"
    assert validate_prepared_context(json.dumps(payload).encode()) == "héllo"


def test_multibyte_length_is_counted_in_utf8_bytes():
    content = "历史上下文 🙂"
    assert validate_prepared_context(ready(content)) == content
    with pytest.raises(InvalidPreparedContext, match="UTF-8 bytes"):
        validate_prepared_context(ready(content, content_bytes=len(content)))


BROKEN = {
    "wrong length": ready("abc", content_bytes=4),
    "wrong length zero": ready("abc", content_bytes=0),
    "extra field": ready("abc") | {"items": []},
    "missing field": {k: v for k, v in ready("abc").items() if k != "content_bytes"},
    "missing schema": {k: v for k, v in ready("abc").items() if k != "schema"},
    "ready with null content": ready("abc", content=None),
    "ready with empty content": ready("", content_bytes=0),
    "ready with non-string content": ready("abc", content=["abc"]),
    "empty with content": EMPTY | {"content": "abc"},
    "empty with bytes": EMPTY | {"content_bytes": 3},
    "empty with empty string": EMPTY | {"content": ""},
    "unknown schema": ready("abc", schema="powercontext.prepared-context.v2"),
    "unknown status": ready("abc", status="partial"),
    "boolean length": ready("a", content_bytes=True),
    "float length": ready("abc", content_bytes=3.0),
    "string length": ready("abc", content_bytes="3"),
    "negative length": EMPTY | {"content_bytes": -1},
    "lone surrogate": ready("a", content="\ud800", content_bytes=3),
    "not an object": ["schema", "status", "content", "content_bytes"],
}


@pytest.mark.parametrize("payload", list(BROKEN.values()), ids=list(BROKEN))
def test_broken_responses_are_refused(payload):
    with pytest.raises(InvalidPreparedContext):
        validate_prepared_context(payload if isinstance(payload, dict) else json.dumps(payload))


def test_duplicate_json_keys_are_refused():
    raw = f'{{"schema":"{SCHEMA}","status":"ready","content":"b","content":"a","content_bytes":1}}'
    with pytest.raises(InvalidPreparedContext, match="duplicate"):
        validate_prepared_context(raw)


@pytest.mark.parametrize("raw", [b"not json", b"\xff\xfe", b""])
def test_unparsable_bodies_are_refused(raw):
    with pytest.raises(InvalidPreparedContext):
        validate_prepared_context(raw)


def test_host_budget_is_enforced():
    content = "x" * 600
    assert validate_prepared_context(ready(content), max_bytes=600) == content
    with pytest.raises(InvalidPreparedContext, match="host budget of 599"):
        validate_prepared_context(ready(content), max_bytes=599)


def test_golden_response_over_a_smaller_host_budget_is_refused():
    response = golden_json("guide-en.response.json")
    with pytest.raises(InvalidPreparedContext, match="host budget"):
        validate_prepared_context(response, max_bytes=response["content_bytes"] - 1)


def _client_answering(payload: dict | bytes) -> PowerContextClient:
    def handler(request):
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return httpx.Response(200, content=body, headers={"Content-Type": "application/json"})

    return PowerContextClient("http://powercontext.test", "k" * 32, transport=httpx.MockTransport(handler))


def test_client_returns_validated_content_unchanged():
    raw = (GOLDEN / "guide-zh.response.json").read_bytes()
    result = _client_answering(raw).prepare_context("project:demo", "q", assembly={})
    assert result.content == json.loads(raw)["content"]
    assert result.status == "ready"
    assert result.schema_ == SCHEMA


@pytest.mark.parametrize("payload", [BROKEN["wrong length"], BROKEN["extra field"], BROKEN["unknown schema"]])
def test_client_refuses_broken_responses(payload):
    with pytest.raises(InvalidPreparedContextResponse):
        _client_answering(payload).prepare_context("project:demo", "q")


def test_client_checks_the_budget_it_asked_for():
    with pytest.raises(InvalidPreparedContextResponse, match="host budget of 512"):
        _client_answering(ready("x" * 513)).prepare_context("project:demo", "q", max_bytes=512)
    with pytest.raises(InvalidPreparedContextResponse, match="host budget of 100"):
        _client_answering(ready("x" * 101)).prepare_context("project:demo", "q", host_max_bytes=100)
