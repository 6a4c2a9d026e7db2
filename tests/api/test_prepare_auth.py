"""RFC acceptance 6 and DESIGN §4: authentication and authorization of POST /v1/context/prepare.

401 for missing, malformed, unknown and revoked keys; 404 with one body for unknown and unreadable
scopes; 403 naming no scope, with no content, when a referenced scope the request must read is not
readable.
"""

import json

import pytest

from artifacts import services
from tests.api.factories import (
    PREPARE_URL,
    add_experience,
    add_memory,
    add_profile,
    add_topic,
    error_of,
    make_key,
    make_key_object,
    make_scope,
    markdown_of,
    ok_json,
    prepare,
    set_references,
)

ASSEMBLY = {"sections": [{"family": "memory", "limit": 4}, {"family": "experience", "limit": 2}]}


@pytest.fixture
def demo(db):
    scope = make_scope("project:demo")
    add_memory(scope, {"entry-1": "alpha demo memory"})
    return scope


def post(client, headers, body=None):
    body = body or {"scope_id": "project:demo", "query": "alpha", "assembly": ASSEMBLY}
    return client.post(PREPARE_URL, data=json.dumps(body), content_type="application/json", **headers)


# --- 401 ------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer    ",
        "Token pc_whatever_key_value_here",
        "Basic dXNlcjpwYXNz",
        "pc_a_key_without_a_scheme",
        "Bearer pc_unknown_key_0123456789abcdef0123456789",
    ],
    ids=[
        "missing",
        "empty",
        "scheme only",
        "scheme and space",
        "blank key",
        "token scheme",
        "basic",
        "no scheme",
        "unknown",
    ],
)
def test_missing_malformed_or_unknown_key_is_unauthenticated(client, demo, header):
    make_key(read=[demo])
    headers = {} if header is None else {"HTTP_AUTHORIZATION": header}

    response = post(client, headers)

    error = error_of(response, 401, "unauthenticated")
    assert error["fields"] == []
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"alpha" not in response.content


@pytest.mark.django_db
def test_non_ascii_authorization_header_is_unauthenticated(client, demo):
    response = post(client, {"HTTP_AUTHORIZATION": "Bearer cl\xe9-non-ascii"})

    error_of(response, 401, "unauthenticated")


@pytest.mark.django_db
def test_revoked_key_is_unauthenticated(client, demo):
    api_key, plaintext = make_key_object(read=[demo])
    assert ok_json(prepare(client, plaintext, {"assembly": ASSEMBLY}))["status"] == "ready"

    services.api_key_revoke(api_key=api_key)

    error_of(prepare(client, plaintext, {"assembly": ASSEMBLY}), 401, "unauthenticated")
    error_of(prepare(client, plaintext, {}), 401, "unauthenticated")


@pytest.mark.django_db
def test_unknown_and_revoked_keys_get_the_same_body(client, demo):
    api_key, plaintext = make_key_object(read=[demo])
    services.api_key_revoke(api_key=api_key)

    revoked = prepare(client, plaintext)
    unknown = prepare(client, plaintext + "x")

    assert (revoked.status_code, revoked.content) == (unknown.status_code, unknown.content)


@pytest.mark.django_db
def test_authentication_is_checked_before_the_body_is_validated(client, demo):
    response = post(client, {}, {"scope_id": "project:demo", "query": "", "assembly": None})

    error_of(response, 401, "unauthenticated")


@pytest.mark.django_db
def test_a_key_is_the_bearer_token_exactly(client, demo):
    key = make_key(read=[demo])

    assert post(client, {"HTTP_AUTHORIZATION": f"bearer {key}"}).status_code == 200
    error_of(post(client, {"HTTP_AUTHORIZATION": f"Bearer {key[:-1]}"}), 401, "unauthenticated")
    error_of(post(client, {"HTTP_AUTHORIZATION": f"Bearer {key.upper()}"}), 401, "unauthenticated")


# --- 404: unknown and unreadable scopes look the same ---------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "assembly", [ASSEMBLY, {}, {"sections": []}, None], ids=["sections", "defaults", "none", "legacy"]
)
def test_unknown_and_unreadable_scopes_give_byte_identical_404s(client, demo, assembly):
    hidden = make_scope("project:hidden")
    add_memory(hidden, {"h": "alpha hidden memory"})
    key = make_key(read=[demo])

    def ask(scope_id):
        body = {"scope_id": scope_id, "query": "alpha"}
        if assembly is not None:
            body["assembly"] = assembly
        return prepare(client, key, body)

    unreadable = ask("project:hidden")
    unknown = ask("project:nowhere")

    error_of(unreadable, 404, "not_found")
    assert unreadable.content == unknown.content
    assert unreadable.status_code == unknown.status_code == 404
    assert b"hidden" not in unreadable.content


@pytest.mark.django_db
def test_write_only_grant_does_not_allow_prepare(client, demo):
    key = make_key(write=[demo])

    unreadable = prepare(client, key, {"assembly": ASSEMBLY})
    unknown = prepare(client, key, {"scope_id": "project:nowhere", "assembly": ASSEMBLY})

    error_of(unreadable, 404, "not_found")
    assert unreadable.content == unknown.content


@pytest.mark.django_db
def test_grants_of_one_key_do_not_apply_to_another(client, demo):
    other = make_scope("project:other")
    make_key(read=[demo])
    key = make_key(read=[other])

    error_of(prepare(client, key, {"assembly": ASSEMBLY}), 404, "not_found")


# --- 403: a referenced scope the key may not read -------------------------------------------------


@pytest.fixture
def secret_reference(demo):
    secret = make_scope("team:secret-reference")
    add_memory(secret, {"s1": "alpha classified memory"})
    add_experience(secret, "s-exp", "alpha classified lesson")
    add_profile(secret, "classified profile")
    set_references(demo, secret)
    add_experience(demo, "lesson", "alpha demo lesson")
    add_topic(demo, "topic", title="alpha demo topic", summary="summary")
    return secret


@pytest.mark.django_db
@pytest.mark.parametrize(
    "assembly",
    [
        ASSEMBLY,
        {},
        {"sections": [{"family": "experience", "limit": 1}]},
        {"sections": [{"family": "profile", "limit": 1}]},
        {"sections": [{"family": "topic_memory", "limit": 1}, {"family": "memory", "limit": 1}]},
        None,
    ],
    ids=["memory and experience", "defaults", "experience", "profile", "topic then memory", "legacy"],
)
def test_unreadable_referenced_scope_is_forbidden_without_naming_it_or_leaking_content(
    client, demo, secret_reference, assembly
):
    key = make_key(read=[demo])
    body = {"scope_id": "project:demo", "query": "alpha"}
    if assembly is not None:
        body["assembly"] = assembly

    response = prepare(client, key, body)

    error = error_of(response, 403, "forbidden")
    assert error["fields"] == []
    for leaked in (b"secret", b"team:", b"project:demo", b"classified", b"alpha", b"demo memory", b"BEGIN"):
        assert leaked not in response.content


@pytest.mark.django_db
def test_forbidden_body_is_the_same_whichever_reference_is_unreadable(client, demo):
    first, second = make_scope("team:first"), make_scope("team:second")
    set_references(demo, first, second)
    only_first = make_key(read=[demo, first])
    only_second = make_key(read=[demo, second])

    a = prepare(client, only_first, {"assembly": ASSEMBLY})
    b = prepare(client, only_second, {"assembly": ASSEMBLY})

    error_of(a, 403, "forbidden")
    assert a.content == b.content


@pytest.mark.django_db
def test_every_reference_needs_a_read_grant_not_only_the_first_or_last(client, demo):
    # Three references; the key reads the first and the last, and may only write the middle one.
    first, middle, last = make_scope("team:first"), make_scope("team:middle"), make_scope("team:last")
    set_references(demo, first, middle, last)
    for scope in (first, middle, last):
        add_memory(scope, {f"{scope.scope_id[5:]}-note": f"alpha {scope.scope_id[5:]} memory"})
    api_key, key = make_key_object(read=[demo, first, last], write=[middle])

    response = prepare(client, key, {"assembly": ASSEMBLY})

    assert error_of(response, 403, "forbidden")["fields"] == []
    for leaked in (b"middle", b"first", b"last", b"alpha", b"BEGIN"):
        assert leaked not in response.content
    # A read grant on the middle reference, to the same key, is all the request lacked.
    services.api_key_grant_set(api_key=api_key, scope=middle, can_read=True, can_write=True)
    doc = markdown_of(prepare(client, key, {"assembly": ASSEMBLY}))
    assert {"team:first", "team:middle", "team:last"} <= {e.scope for e in doc.entries}


@pytest.mark.django_db
def test_reference_grant_makes_the_same_request_succeed(client, demo, secret_reference):
    key = make_key(read=[demo, secret_reference])

    doc = markdown_of(prepare(client, key, {"assembly": ASSEMBLY}))

    assert ("team:secret-reference", "s1") in [(e.scope, e.entry_id) for e in doc.entries]


@pytest.mark.django_db
def test_references_of_a_referenced_scope_are_not_read(client, demo):
    middle, far = make_scope("team:middle"), make_scope("team:far")
    set_references(demo, middle)
    set_references(middle, far)
    add_memory(middle, {"mid": "alpha middle memory"})
    add_memory(far, {"far": "alpha far memory"})
    key = make_key(read=[demo, middle])  # no grant on team:far, which demo does not reference directly

    doc = markdown_of(prepare(client, key, {"assembly": ASSEMBLY}))

    assert sorted(e.scope for e in doc.entries) == ["project:demo", "team:middle"]


@pytest.mark.django_db
def test_unreadable_current_scope_is_not_found_even_when_references_are_unreadable_too(client, demo):
    secret = make_scope("team:secret")
    set_references(demo, secret)
    other = make_scope("project:other")
    key = make_key(read=[other])

    unreadable = prepare(client, key, {"assembly": ASSEMBLY})
    unknown = prepare(client, key, {"scope_id": "project:nowhere", "assembly": ASSEMBLY})

    error_of(unreadable, 404, "not_found")
    assert unreadable.content == unknown.content


@pytest.mark.django_db
def test_revoked_key_cannot_read_revisions(client, demo):
    api_key, plaintext = make_key_object(read=[demo])
    params = {"scope_id": "project:demo", "family": "memory", "artifact_id": "memory", "revision": 1}
    assert client.get("/v1/artifacts/revision", params, HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 200

    services.api_key_revoke(api_key=api_key)

    response = client.get("/v1/artifacts/revision", params, HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    error_of(response, 401, "unauthenticated")


@pytest.mark.django_db
@pytest.mark.parametrize("scope_id", ["PROJECT:DEMO", "project:demo ", " project:demo", "project:démo"])
def test_scope_ids_match_exactly(client, demo, scope_id):
    key = make_key(read=[demo])

    unknown = prepare(client, key, {"scope_id": scope_id, "assembly": ASSEMBLY})

    error_of(unknown, 404, "not_found")
