"""Bad query strings and headers get the one error shape too, never Django's HTML page, and a query parameter is read
as the UTF-8 the client sent or refused: never looked up as another text."""

import json

import pytest
from django.conf import settings

from tests.api.factories import add_memory, auth, make_key, make_scope

GET_ENDPOINTS = ["/v1/scopes", "/v1/artifacts/history", "/v1/artifacts/revision"]


@pytest.fixture
def key(db):
    scope = make_scope("project:demo")
    add_memory(scope, {"e1": "the deploy runbook lives in the wiki"})
    return make_key(read=[scope])


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content[:200]
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content.decode("utf-8"))
    assert body["error"]["code"] == "invalid_request"
    return body["error"]


@pytest.mark.parametrize("path", GET_ENDPOINTS)
def test_more_query_parameters_than_the_server_reads_are_refused_in_the_error_shape(client, key, path):
    too_many = "&".join(["a"] * (settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    error = error_of(client.get(f"{path}?{too_many}", **auth(key)), 422)
    assert str(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS) in error["message"]


@pytest.mark.parametrize("path", GET_ENDPOINTS)
def test_as_many_query_parameters_as_the_server_reads_are_read_and_validated_normally(client, key, path):
    at_most = "&".join(["a"] * settings.DATA_UPLOAD_MAX_NUMBER_FIELDS)
    error = error_of(client.get(f"{path}?{at_most}", **auth(key)), 422)
    assert error["fields"] == [{"path": "a", "message": "is given more than once"}]


@pytest.mark.parametrize("raw", ["%FF", "%ED%A0%80", "%C3", "abc%E2%82"])
def test_a_query_value_that_is_not_utf8_is_refused_with_its_parameter(client, key, raw):
    # Django would read these bytes as U+FFFD and list the scopes after that text instead.
    error = error_of(client.get(f"/v1/scopes?after={raw}", **auth(key)), 422)
    assert error["fields"] == [{"path": "after", "message": "is not valid UTF-8 (a lone surrogate included)"}]


def test_a_scope_id_that_is_not_utf8_is_refused_not_looked_up_as_another_scope(client, key):
    query = "scope_id=project%3Ademo%FF&family=memory&artifact_id=memory&revision=1"
    error = error_of(client.get(f"/v1/artifacts/revision?{query}", **auth(key)), 422)
    assert [field["path"] for field in error["fields"]] == ["scope_id"]


def test_a_parameter_name_that_is_not_utf8_is_named_as_the_server_reads_it(client, key):
    error = error_of(client.get("/v1/scopes?a%FF=1", **auth(key)), 422)
    assert [field["path"] for field in error["fields"]] == ["a\ufffd"]


def test_a_replacement_character_sent_as_utf8_is_read_as_itself(client, key):
    response = client.get("/v1/scopes?after=%EF%BF%BD", **auth(key))
    assert response.status_code == 200
    assert response.json()["scopes"] == []  # every scope id sorts before U+FFFD


def test_a_host_the_server_does_not_serve_gets_the_error_shape(client, key):
    error = error_of(client.get("/v1/scopes", HTTP_HOST="evil.example", **auth(key)), 400)
    assert error["message"] == "the request is malformed"
