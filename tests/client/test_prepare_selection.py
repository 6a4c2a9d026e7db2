"""The ``selection`` object of a prepare (issue 35): sent unchanged when given, never otherwise, only with
``assembly``, and refused before sending when the server would answer 422."""

import json

import httpx
import pytest
from powercontext_client import (
    InvalidRequest,
    PowerContextClient,
    SelectionOptions,
    build_prepare_request,
)

KEY = "pc_test_0123456789abcdef0123456789abcdef"
EMPTY = {"schema": "powercontext.prepared-context.v1", "status": "empty", "content": None, "content_bytes": 0}


@pytest.fixture
def requests_sent():
    return []


@pytest.fixture
def client(requests_sent):
    def answer(request: httpx.Request) -> httpx.Response:
        requests_sent.append(request)
        return httpx.Response(200, json=EMPTY)

    with PowerContextClient("http://powercontext.test", KEY, transport=httpx.MockTransport(answer)) as client:
        yield client


def sent_body(requests_sent) -> dict:
    assert len(requests_sent) == 1
    return json.loads(requests_sent[0].content)


@pytest.mark.parametrize(
    "selection",
    [
        {"policy": "authority-v1"},
        {"policy": "authority-v1", "min_score": 0.25},
        {"policy": "authority-v1", "max_tokens": 600},
        {"policy": "authority-v1", "min_score": 0, "max_tokens": 1},
    ],
)
def test_a_given_selection_is_sent_unchanged_beside_the_assembly(client, requests_sent, selection):
    client.prepare_context("project:demo", "q", assembly={}, selection=selection)
    assert sent_body(requests_sent) == {
        "scope_id": "project:demo",
        "query": "q",
        "assembly": {},
        "selection": selection,
    }


def test_the_selection_is_sent_after_the_assembly(client, requests_sent):
    client.prepare_context("project:demo", "q", assembly={}, selection={"policy": "authority-v1", "max_tokens": 9})
    assert requests_sent[0].content == (
        b'{"scope_id":"project:demo","query":"q","assembly":{},"selection":{"policy":"authority-v1","max_tokens":9}}'
    )


def test_typed_selection_options_send_only_the_fields_given(client, requests_sent):
    client.prepare_context("project:demo", "q", assembly={}, selection=SelectionOptions(policy="authority-v1"))
    assert sent_body(requests_sent)["selection"] == {"policy": "authority-v1"}


def test_without_selection_nothing_is_sent_for_it(client, requests_sent):
    client.prepare_context("project:demo", "q", assembly={})
    assert "selection" not in sent_body(requests_sent)


def test_selection_without_assembly_is_refused_before_sending(client, requests_sent):
    with pytest.raises(InvalidRequest) as raised:
        client.prepare_context("project:demo", "q", selection={"policy": "authority-v1"})
    assert [field.path for field in raised.value.fields] == ["selection"]
    assert requests_sent == []


def test_selection_none_is_refused_before_sending(client, requests_sent):
    with pytest.raises(TypeError, match="selection=None"):
        client.prepare_context("project:demo", "q", assembly={}, selection=None)
    assert requests_sent == []


def test_selection_of_wrong_type_is_refused(client, requests_sent):
    with pytest.raises(TypeError):
        client.prepare_context("project:demo", "q", assembly={}, selection=["authority-v1"])  # type: ignore[arg-type]
    assert requests_sent == []


@pytest.mark.parametrize(
    ("selection", "path"),
    [
        ({}, "selection.policy"),
        ({"policy": "score-only"}, "selection.policy"),
        ({"policy": "authority-v1", "min_score": -0.1}, "selection.min_score"),
        ({"policy": "authority-v1", "min_score": True}, "selection.min_score"),
        ({"policy": "authority-v1", "min_score": "0.5"}, "selection.min_score"),
        ({"policy": "authority-v1", "min_score": None}, "selection.min_score"),
        ({"policy": "authority-v1", "min_score": float("nan")}, "selection.min_score"),
        ({"policy": "authority-v1", "max_tokens": 0}, "selection.max_tokens"),
        ({"policy": "authority-v1", "max_tokens": 32769}, "selection.max_tokens"),
        ({"policy": "authority-v1", "max_tokens": 1.5}, "selection.max_tokens"),
        ({"policy": "authority-v1", "max_tokens": None}, "selection.max_tokens"),
        ({"policy": "authority-v1", "top_k": 3}, "selection.top_k"),
    ],
)
def test_an_invalid_selection_is_refused_before_sending_with_its_field_path(client, requests_sent, selection, path):
    with pytest.raises(InvalidRequest) as raised:
        client.prepare_context("project:demo", "q", assembly={}, selection=selection)
    assert (raised.value.status_code, raised.value.code) == (422, "invalid_request")
    assert [field.path for field in raised.value.fields] == [path]
    assert requests_sent == []


def test_build_prepare_request_shows_the_selection_that_is_sent(client, requests_sent):
    selection = {"policy": "authority-v1", "min_score": 0.5}
    expected = build_prepare_request("project:demo", "q", assembly={}, selection=selection)
    client.prepare_context("project:demo", "q", assembly={}, selection=selection)
    assert sent_body(requests_sent) == expected
