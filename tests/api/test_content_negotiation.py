"""The API answers JSON whatever the request accepts or names as ``?format=``, and a request without a key gets its
401 whatever it accepts (DRF negotiates before it authenticates)."""

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


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "image/*;q=0.1", "x" * 300])
def test_a_request_that_accepts_no_json_still_gets_json(client, key, accept):
    response = client.get(SCOPES, **auth(key), HTTP_ACCEPT=accept)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("format_", ["json", "xml", "api"])
def test_format_is_an_unknown_query_parameter_like_any_other(client, key, format_):
    response = client.get(SCOPES, {"format": format_}, **auth(key))
    assert response.status_code == 422
    assert [field["path"] for field in response.json()["error"]["fields"]] == ["format"]


@pytest.mark.parametrize(
    ("query", "accept"), [({}, "application/xml"), ({"format": "xml"}, "*/*"), ({"format": "api"}, "text/html")]
)
def test_a_request_without_a_key_gets_its_401_whatever_it_accepts(client, db, query, accept):
    response = client.get(SCOPES, query, HTTP_ACCEPT=accept)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
