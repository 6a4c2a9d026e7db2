"""Outbound JSON of the Python client: the exact bytes sent, captured with httpx.MockTransport.

RFC "Integration delivery contract": ``assembly`` is removed when the caller did not supply it, ``{}`` and
``{"sections": []}`` are sent exactly when given, and an explicit null never leaves the client.
"""

import json

import httpx
import pytest
from powercontext_client import (
    AssemblyOptions,
    InvalidRequest,
    MemorySection,
    PowerContextClient,
    PowerContextError,
    build_prepare_request,
)
from powercontext_client.models import ExperienceSection
from pydantic import ValidationError

from tests.conftest import golden_json

KEY = "pc_test_0123456789abcdef0123456789abcdef"
EMPTY = {"schema": "powercontext.prepared-context.v1", "status": "empty", "content": None, "content_bytes": 0}


class Recorder:
    """A MockTransport handler that keeps every request and answers an empty prepared context."""

    def __init__(self, response: dict | None = None, status: int = 200):
        self.requests: list[httpx.Request] = []
        self.response = EMPTY if response is None else response
        self.status = status

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.status, json=self.response)

    @property
    def bodies(self) -> list[bytes]:
        return [request.content for request in self.requests]


@pytest.fixture
def recorder():
    return Recorder()


@pytest.fixture
def client(recorder):
    with PowerContextClient("http://powercontext.test", KEY, transport=httpx.MockTransport(recorder)) as client:
        yield client


def sent(recorder: Recorder) -> bytes:
    assert len(recorder.requests) == 1
    return recorder.requests[0].content


def test_omitted_assembly_is_not_sent(client, recorder):
    client.prepare_context("project:demo", "How do we release?")
    assert sent(recorder) == b'{"scope_id":"project:demo","query":"How do we release?"}'
    request = recorder.requests[0]
    assert request.method == "POST"
    assert request.url.path == "/v1/context/prepare"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["Content-Type"] == "application/json"


def test_explicit_empty_assembly_is_sent_as_empty_object(client, recorder):
    client.prepare_context("project:demo", "q", assembly={})
    assert sent(recorder) == b'{"scope_id":"project:demo","query":"q","assembly":{}}'


def test_default_assembly_options_object_is_sent_as_empty_object(client, recorder):
    client.prepare_context("project:demo", "q", assembly=AssemblyOptions())
    assert sent(recorder) == b'{"scope_id":"project:demo","query":"q","assembly":{}}'


def test_empty_sections_are_sent_exactly(client, recorder):
    client.prepare_context("project:demo", "q", assembly={"sections": []})
    assert sent(recorder) == b'{"scope_id":"project:demo","query":"q","assembly":{"sections":[]}}'


def test_empty_sections_as_options_object(client, recorder):
    client.prepare_context("project:demo", "q", assembly=AssemblyOptions(sections=[]))
    assert sent(recorder) == b'{"scope_id":"project:demo","query":"q","assembly":{"sections":[]}}'


def test_full_configuration_is_sent_in_caller_order(client, recorder):
    assembly = {
        "format": "markdown",
        "sections": [{"family": "experience", "limit": 2}, {"family": "memory", "limit": 5}],
        "show": ["recall_rank", "confidence"],
    }
    client.prepare_context("project:demo", "q", max_bytes=4096, assembly=assembly)
    assert json.loads(sent(recorder)) == {
        "scope_id": "project:demo",
        "query": "q",
        "max_bytes": 4096,
        "assembly": assembly,
    }
    assert sent(recorder) == (
        b'{"scope_id":"project:demo","query":"q","max_bytes":4096,"assembly":{"format":"markdown","sections":'
        b'[{"family":"experience","limit":2},{"family":"memory","limit":5}],"show":["recall_rank","confidence"]}}'
    )


def test_full_configuration_as_typed_options(client, recorder):
    assembly = AssemblyOptions(
        sections=[ExperienceSection(family="experience", limit=2), MemorySection(family="memory", limit=5)],
        show=["confidence"],
    )
    client.prepare_context("project:demo", "q", assembly=assembly)
    assert sent(recorder) == (
        b'{"scope_id":"project:demo","query":"q","assembly":{"sections":'
        b'[{"family":"experience","limit":2},{"family":"memory","limit":5}],"show":["confidence"]}}'
    )


@pytest.mark.parametrize("case", ["guide-en", "defaults-en", "memory-only-en", "sections-empty-en", "legacy-en"])
def test_golden_requests_round_trip_unchanged(client, recorder, case):
    request = golden_json(f"{case}.request.json")
    kwargs = {key: request[key] for key in ("max_bytes", "assembly") if key in request}
    client.prepare_context(request["scope_id"], request["query"], **kwargs)
    assert json.loads(sent(recorder)) == request


def test_non_ascii_is_sent_as_utf8(client, recorder):
    client.prepare_context("project:演示", "API 变更后如何排查？", assembly={})
    assert sent(recorder) == '{"scope_id":"project:演示","query":"API 变更后如何排查？","assembly":{}}'.encode()


@pytest.mark.parametrize("field", ["assembly", "max_bytes"])
def test_explicit_none_is_refused_before_sending(client, recorder, field):
    with pytest.raises(TypeError, match=f"{field}=None"):
        client.prepare_context("project:demo", "q", **{field: None})
    assert recorder.requests == []


@pytest.mark.parametrize(
    "assembly",
    [
        {"sections": [{"family": "memory", "limit": 6}, {"family": "memory", "limit": 2}]},
        {"sections": [{"family": "skill", "limit": 1}]},
        {"sections": [{"family": "memory", "limit": 0}]},
        {"sections": [{"family": "experience", "limit": 9}]},
        {"sections": [{"family": "memory", "limit": True}]},
        {"sections": [{"family": "memory"}]},
        {"format": "html"},
        {"show": ["confidence", "confidence"]},
        {"show": ["score"]},
        {"sort_by": "score"},
        {"min_confidence": 0.5},
        {"sections": None},
    ],
)
def test_invalid_assembly_is_refused_before_sending(client, recorder, assembly):
    with pytest.raises(InvalidRequest):
        client.prepare_context("project:demo", "q", assembly=assembly)
    assert recorder.requests == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"query": "   "},
        {"query": ""},
        {"max_bytes": 511},
        {"max_bytes": 32769},
        {"max_bytes": 1000.0},
        {"max_bytes": True},
    ],
)
def test_invalid_fields_are_refused_before_sending(client, recorder, kwargs):
    arguments = {"scope_id": "project:demo", "query": "q"} | kwargs
    with pytest.raises(InvalidRequest):
        client.prepare_context(arguments.pop("scope_id"), arguments.pop("query"), **arguments)
    assert recorder.requests == []


def test_assembly_of_wrong_type_is_refused(client, recorder):
    with pytest.raises(TypeError):
        client.prepare_context("project:demo", "q", assembly=[])  # type: ignore[arg-type]
    assert recorder.requests == []


def test_build_prepare_request_matches_what_is_sent(client, recorder):
    expected = build_prepare_request("project:demo", "q", max_bytes=900, assembly={"sections": []})
    client.prepare_context("project:demo", "q", max_bytes=900, assembly={"sections": []})
    assert json.loads(sent(recorder)) == expected


def test_write_requests_send_only_given_fields(client, recorder):
    recorder.response = {
        "citation": {
            "scope_id": "project:demo",
            "family": "memory",
            "artifact_id": "memory",
            "revision": 4,
            "entry_id": "entry-9",
            "entry_version": "entry-9-v1",
        },
        "content_sha256": "0" * 64,
    }
    result = client.create_memory_entry("project:demo", "entry-9", "Body text")
    assert result.citation.revision == 4
    client.update_memory_entry("project:demo", "entry-9", "New", version_id="entry-9-v2", expected_head_revision=4)
    client.remove_memory_entry("project:demo", "entry-9")
    client.record_experience_revision("project:demo", "experience-2", "Situation: …")
    client.record_topic_memory_revision("project:demo", "topic-1", "Title", "Summary")
    client.commit_profile_candidate(7)
    bodies = [(request.url.path, json.loads(request.content)) for request in recorder.requests]
    assert bodies == [
        ("/v1/memory/entries", {"scope_id": "project:demo", "entry_id": "entry-9", "body": "Body text"}),
        (
            "/v1/memory/entries/update",
            {
                "scope_id": "project:demo",
                "entry_id": "entry-9",
                "body": "New",
                "version_id": "entry-9-v2",
                "expected_head_revision": 4,
            },
        ),
        ("/v1/memory/entries/remove", {"scope_id": "project:demo", "entry_id": "entry-9"}),
        (
            "/v1/experiences/revisions",
            {"scope_id": "project:demo", "artifact_id": "experience-2", "body": "Situation: …"},
        ),
        (
            "/v1/topic-memories/revisions",
            {"scope_id": "project:demo", "artifact_id": "topic-1", "title": "Title", "summary": "Summary"},
        ),
        ("/v1/profile/candidates/7/commit", {}),
    ]


def test_exact_read_sends_query_parameters(client, recorder):
    recorder.response = {
        "scope_id": "project:demo",
        "family": "memory",
        "artifact_id": "memory",
        "revision": 3,
        "entry": {
            "id": "entry-1",
            "version": "entry-1-v2",
            "body": "b",
            "content_sha256": "0" * 64,
            "conflict_key": "preference:automation-language",
        },
    }
    result = client.read_exact_entry_version("project:demo", "memory", 3, "entry-1", "entry-1-v2")
    assert result.entry.version == "entry-1-v2"
    assert result.entry.conflict_key == "preference:automation-language"
    url = recorder.requests[0].url
    assert url.path == "/v1/artifacts/revision"
    assert dict(url.params) == {
        "scope_id": "project:demo",
        "family": "memory",
        "artifact_id": "memory",
        "revision": "3",
        "entry_id": "entry-1",
        "entry_version": "entry-1-v2",
    }


def test_an_invalid_assembly_raises_the_packages_invalid_request_with_the_field_path(client, recorder):
    with pytest.raises(InvalidRequest) as raised:
        client.prepare_context("project:demo", "q", assembly={"sections": [{"family": "skill", "limit": 1}]})

    error = raised.value
    assert isinstance(error, PowerContextError)  # hosts that fail open catch this one class
    assert not isinstance(error, ValidationError)
    assert (error.status_code, error.code) == (422, "invalid_request")
    assert [field.path for field in error.fields] == ["assembly.sections[0].family"]
    assert isinstance(error.__cause__, ValidationError)
    assert recorder.requests == []


def test_a_memory_write_sends_its_conflict_slot_only_when_given(client, recorder):
    recorder.response = {
        "citation": {
            "scope_id": "project:demo",
            "family": "memory",
            "artifact_id": "memory",
            "revision": 1,
            "entry_id": "lang",
            "entry_version": "lang-v1",
        },
        "content_sha256": "0" * 64,
    }
    client.create_memory_entry("project:demo", "lang", "Use Python.", conflict_key="preference:automation-language")
    client.update_memory_entry("project:demo", "lang", "Use Go.", conflict_key=" Preference:X ")
    client.update_memory_entry("project:demo", "lang", "Any.")
    bodies = [json.loads(request.content).get("conflict_key", "<none>") for request in recorder.requests]
    assert bodies == ["preference:automation-language", " Preference:X ", "<none>"]


@pytest.mark.parametrize("slot", ["", "   ", "\u3000", "a\tb", "a\x85", "x" * 201])
def test_a_bad_conflict_slot_raises_invalid_request_before_sending(client, recorder, slot):
    with pytest.raises(InvalidRequest) as raised:
        client.create_memory_entry("project:demo", "lang", "body", conflict_key=slot)
    assert [field.path for field in raised.value.fields] == ["conflict_key"]
    assert recorder.requests == []


def test_an_invalid_write_raises_invalid_request_before_sending(client, recorder):
    with pytest.raises(InvalidRequest) as raised:
        client.create_memory_entry("project:demo", "", "body")

    assert [field.path for field in raised.value.fields] == ["entry_id"]
    assert recorder.requests == []


def test_a_write_sends_its_idempotency_key_as_the_header_and_only_when_given(client, recorder):
    recorder.response = {
        "citation": {"scope_id": "project:demo", "family": "experience", "artifact_id": "e", "revision": 1},
        "content_sha256": "0" * 64,
    }
    client.create_memory_entry("project:demo", "entry-9", "Body", idempotency_key="hermes-add-1")
    client.remove_memory_entry("project:demo", "entry-9", artifact_id="notes", idempotency_key="hermes-remove-1")
    client.record_experience_revision("project:demo", "e", "Lesson")
    assert [request.headers.get("Idempotency-Key") for request in recorder.requests] == [
        "hermes-add-1",
        "hermes-remove-1",
        None,
    ]
    # The key travels in the header only; the JSON body is the same as without one.
    assert json.loads(recorder.requests[1].content) == {
        "scope_id": "project:demo",
        "artifact_id": "notes",
        "entry_id": "entry-9",
    }


@pytest.mark.parametrize("key", ["", "x" * 201, "clé", "line\nbreak"])
def test_an_invalid_idempotency_key_is_refused_before_sending(client, recorder, key):
    with pytest.raises(InvalidRequest) as raised:
        client.create_memory_entry("project:demo", "entry-9", "Body", idempotency_key=key)

    assert [field.path for field in raised.value.fields] == ["Idempotency-Key"]
    assert recorder.requests == []


def test_list_scopes_sends_only_the_given_query_parameters_and_reads_the_page(client, recorder):
    recorder.response = {
        "scopes": [
            {
                "scope_id": "project:demo",
                "title": "Demo",
                "authority": "current_turn",
                "can_write": True,
                "references": ["org:shared"],
                "all_references_readable": False,
            }
        ],
        "next_after": "project:demo",
    }
    page = client.list_scopes()
    assert page.scopes[0].references == ["org:shared"] and page.scopes[0].all_references_readable is False
    assert page.scopes[0].authority == "current_turn"
    assert page.next_after == "project:demo"
    client.list_scopes(after="project:demo", limit=10)
    client.list_scopes(scope_id="project:demo")
    first, second, third = recorder.requests
    assert (first.url.path, dict(first.url.params)) == ("/v1/scopes", {})
    assert dict(second.url.params) == {"after": "project:demo", "limit": "10"}
    assert dict(third.url.params) == {"scope_id": "project:demo"}
