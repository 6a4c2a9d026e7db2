"""GET /v1/scopes lists exactly the scopes the calling key may read, a bounded page at a time."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts import services
from tests.api.factories import auth, error_of, make_key, make_key_object, make_scope

SCOPES_URL = "/v1/scopes"


def list_scopes(client, key: str, **params):
    return client.get(SCOPES_URL, data=params, **auth(key))


def test_a_request_without_a_key_is_refused(client, db):
    make_scope("project:demo")
    error_of(client.get(SCOPES_URL), 401, "unauthenticated")


def test_only_the_scopes_the_key_may_read_are_listed_with_their_write_flags(client, db):
    readable, writable, hidden = make_scope("a:read", title="Read only"), make_scope("b:write"), make_scope("c:hidden")
    write_only = make_scope("d:write-only")
    api_key, plaintext = make_key_object(read=[readable, writable], write=[writable])
    services.api_key_grant_set(api_key=api_key, scope=write_only, can_read=False, can_write=True)
    make_key(read=[hidden])  # another key's grant changes nothing for this one

    response = list_scopes(client, plaintext)

    assert response.status_code == 200, response.content
    assert response.json() == {
        "scopes": [
            {
                "scope_id": "a:read",
                "title": "Read only",
                "authority": "user_default",
                "can_write": False,
                "references": [],
                "all_references_readable": True,
            },
            {
                "scope_id": "b:write",
                "title": "",
                "authority": "user_default",
                "can_write": True,
                "references": [],
                "all_references_readable": True,
            },
        ],
        "next_after": None,
    }
    assert b"c:hidden" not in response.content and b"d:write-only" not in response.content


def test_references_are_listed_in_order_and_an_unreadable_one_is_never_named(client, db):
    shared, team, secret = make_scope("org:shared"), make_scope("team:core"), make_scope("team:secret")
    project = make_scope("project:demo", references=[team, secret, shared])
    plain = make_scope("project:plain", references=[shared, team])
    key = make_key(read=[project, plain, shared, team])

    scopes = {item["scope_id"]: item for item in list_scopes(client, key).json()["scopes"]}

    assert scopes["project:demo"]["references"] == ["team:core", "org:shared"]
    assert scopes["project:demo"]["all_references_readable"] is False
    assert scopes["project:plain"]["references"] == ["org:shared", "team:core"]
    assert scopes["project:plain"]["all_references_readable"] is True
    assert b"team:secret" not in list_scopes(client, key).content


def test_pages_follow_next_after_until_every_readable_scope_is_listed_once(client, db):
    scopes = [make_scope(f"project:{i:02d}") for i in range(7)]
    key = make_key(read=scopes[:5] + scopes[6:])
    seen, after, pages = [], None, 0
    while True:
        params = {"limit": 2} | ({"after": after} if after else {})
        page = list_scopes(client, key, **params).json()
        seen += [item["scope_id"] for item in page["scopes"]]
        pages += 1
        after = page["next_after"]
        if after is None:
            break
    assert seen == [f"project:{i:02d}" for i in (0, 1, 2, 3, 4, 6)]
    assert pages == 3


def test_a_page_costs_the_same_statements_whatever_its_size_and_the_key_grants(client, db):
    shared = make_scope("org:shared")
    many = [make_scope(f"project:{i:03d}", references=[shared]) for i in range(120)]
    small_key, large_key = make_key(read=many[:1]), make_key(read=[shared, *many])

    def statements(key, limit):
        with CaptureQueriesContext(connection) as captured:
            response = list_scopes(client, key, limit=limit)
        assert response.status_code == 200, response.content
        return len(captured), response.json()

    small, one = statements(small_key, 1)
    large, full = statements(large_key, 100)
    assert len(one["scopes"]) == 1 and len(full["scopes"]) == 100
    assert full["next_after"] == "project:098"
    # The key with its grants, the page's scopes, the page's references.
    assert small == large == 3


def test_scope_id_lists_that_one_scope_when_the_key_may_read_it(client, db):
    demo = make_scope("project:demo", title="Demo", references=[make_scope("org:shared")])
    key = make_key(read=[make_scope("a:first"), demo, make_scope("z:last")], write=[demo])

    response = list_scopes(client, key, scope_id="project:demo")

    assert response.status_code == 200, response.content
    [scope] = response.json()["scopes"]
    assert response.json()["next_after"] is None
    # Listed as in the full list: its write flag, and its unreadable reference never named.
    assert (scope["scope_id"], scope["title"], scope["can_write"]) == ("project:demo", "Demo", True)
    assert (scope["references"], scope["all_references_readable"]) == ([], False)


def test_scope_id_of_an_unreadable_and_of_a_nonexistent_scope_answer_alike(client, db):
    readable, unreadable = make_scope("project:demo"), make_scope("project:secret")
    api_key, key = make_key_object(read=[readable])
    services.api_key_grant_set(api_key=api_key, scope=unreadable, can_read=False, can_write=True)

    def answer(scope_id):
        with CaptureQueriesContext(connection) as captured:
            response = list_scopes(client, key, scope_id=scope_id)
        return response.status_code, response.content, len(captured)

    # The same body and the same statements (the key with its grants, the empty page): nothing tells a scope the
    # key may not read from no scope at all.
    assert answer("project:secret") == answer("project:missing") == (200, b'{"scopes":[],"next_after":null}', 2)
    assert list_scopes(client, key, scope_id="project:demo").json()["scopes"][0]["scope_id"] == "project:demo"


def test_scope_id_keeps_after_and_limit_meaning_what_they_always_mean(client, db):
    key = make_key(read=[make_scope("project:a"), make_scope("project:b")])

    def listed(**params):
        return [scope["scope_id"] for scope in list_scopes(client, key, **params).json()["scopes"]]

    assert listed(scope_id="project:b", limit=1) == ["project:b"]
    assert listed(scope_id="project:b", after="project:a") == ["project:b"]
    assert listed(scope_id="project:a", after="project:a") == []


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"after": "x" * 201}, "after"),
        ({"after": "a\x00b"}, "after"),
        ({"scope_id": "x" * 201}, "scope_id"),
        ({"scope_id": "a\x00b"}, "scope_id"),
        ({"scope_id": ""}, "scope_id"),
        ({"scope": "project:demo"}, "scope"),
    ],
)
def test_bad_query_parameters_are_refused_with_the_error_shape(client, db, params, path):
    key = make_key(read=[make_scope("project:demo")])
    error = error_of(list_scopes(client, key, **params), 422, "invalid_request")
    assert [field["path"] for field in error["fields"]] == [path]


def test_a_repeated_query_parameter_is_refused_rather_than_one_value_guessed(client, db):
    key = make_key(read=[make_scope("project:demo")])
    response = client.get(f"{SCOPES_URL}?limit=1&limit=2", **auth(key))
    error = error_of(response, 422, "invalid_request")
    assert error["fields"] == [{"path": "limit", "message": "is given more than once"}]
