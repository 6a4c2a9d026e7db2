"""The API answers JSON whatever the request accepts, as DRF negotiates it: the usual requests (no Accept, */*,
application/json) take a short path, every other one is negotiated as before."""

import pytest

from tests.api.factories import auth, make_key, make_scope

SCOPES = "/v1/scopes"


@pytest.fixture
def key(db):
    return make_key(read=[make_scope("project:demo")])


@pytest.mark.parametrize(
    "accept", [None, "*/*", "application/json", "application/json; indent=4", "text/html, application/json;q=0.9"]
)
def test_a_request_accepting_json_gets_json(client, key, accept):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    response = client.get(SCOPES, **auth(key), **headers)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["scopes"][0]["scope_id"] == "project:demo"


def test_a_request_that_accepts_no_json_is_refused_in_the_error_shape(client, key):
    response = client.get(SCOPES, **auth(key), HTTP_ACCEPT="text/html")
    assert response.status_code == 406
    assert response.json()["error"]["code"] == "not_acceptable"


def test_the_format_parameter_is_negotiated_as_before(client, key):
    # Negotiated (JSON), then refused by the closed query: "format" is no parameter of the endpoint.
    assert client.get(SCOPES, {"format": "json"}, **auth(key)).status_code == 422
    assert client.get(SCOPES, {"format": "xml"}, **auth(key)).status_code == 404
