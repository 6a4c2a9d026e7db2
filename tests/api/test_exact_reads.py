"""DESIGN §4 exact reads: GET /v1/artifacts/revision returns exactly the cited revision or entry
version, never the head instead, and hides unreadable scopes exactly like unknown ones."""

import hashlib

import pytest

from tests.api.factories import (
    REVISION_URL,
    add_experience,
    add_memory,
    add_profile,
    add_topic,
    auth,
    error_of,
    make_key,
    make_scope,
    markdown_of,
    prepare,
    read_revision,
    remove_memory,
    set_references,
    update_memory,
)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def demo(db):
    return make_scope("project:demo")


@pytest.fixture
def key(demo):
    return make_key(read=[demo])


@pytest.fixture
def golden_memory(demo):
    """The golden history: r1 adds entry-1; r2 adds entry-2; r3 updates entry-1 and removes entry-2."""
    add_memory(demo, [("entry-1", "After changing OpenAPI, regenerate the client.", "entry-1-v1")])
    add_memory(demo, [("entry-2", "Release notes are kept in docs/CHANGELOG.md.", "entry-2-v1")])
    add_memory(
        demo,
        [("entry-1", "After changing OpenAPI, regenerate the client and run contract tests.", "entry-1-v2")],
        removals=["entry-2"],
    )


def revision_of(client, key, **params):
    params = {"scope_id": "project:demo", "family": "memory", "artifact_id": "memory", **params}
    return read_revision(client, key, **params)


# --- each family ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_experience_revision_is_read_exactly(client, demo, key):
    add_experience(demo, "lesson", "first body\twith tab")
    add_experience(demo, "lesson", "second body")

    response = read_revision(
        client, key, scope_id="project:demo", family="experience", artifact_id="lesson", revision=1
    )

    assert response.status_code == 200
    body = response.json()
    assert {k: body[k] for k in ("scope_id", "family", "artifact_id", "revision", "body", "title", "summary")} == {
        "scope_id": "project:demo",
        "family": "experience",
        "artifact_id": "lesson",
        "revision": 1,
        "body": "first body\twith tab",
        "title": None,
        "summary": None,
    }
    assert body["content_sha256"] == sha256("first body\twith tab")
    assert "entries" not in body
    assert body["created_at"] and body["author"] == "tests"


@pytest.mark.django_db
def test_profile_revision_is_read_exactly(client, demo, key):
    add_profile(demo, "profile one")
    add_profile(demo, "profile two")

    response = read_revision(client, key, scope_id="project:demo", family="profile", artifact_id="profile", revision=1)

    assert response.status_code == 200
    assert (response.json()["body"], response.json()["revision"]) == ("profile one", 1)
    assert response.json()["content_sha256"] == sha256("profile one")


@pytest.mark.django_db
def test_topic_memory_revision_is_read_with_title_summary_and_detail(client, demo, key):
    add_topic(demo, "topic", title="Old title", summary="Old summary", body="Old detail")
    add_topic(demo, "topic", title="New title", summary="New summary")

    old = read_revision(client, key, scope_id="project:demo", family="topic_memory", artifact_id="topic", revision=1)
    new = read_revision(client, key, scope_id="project:demo", family="topic_memory", artifact_id="topic", revision=2)

    assert {k: old.json()[k] for k in ("title", "summary", "body", "revision")} == {
        "title": "Old title",
        "summary": "Old summary",
        "body": "Old detail",
        "revision": 1,
    }
    assert {k: new.json()[k] for k in ("title", "summary", "body", "revision")} == {
        "title": "New title",
        "summary": "New summary",
        "body": None,
        "revision": 2,
    }
    assert old.json()["content_sha256"] != new.json()["content_sha256"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "revision, live",
    [
        (1, [("entry-1", "entry-1-v1", "After changing OpenAPI, regenerate the client.")]),
        (
            2,
            [
                ("entry-1", "entry-1-v1", "After changing OpenAPI, regenerate the client."),
                ("entry-2", "entry-2-v1", "Release notes are kept in docs/CHANGELOG.md."),
            ],
        ),
        (3, [("entry-1", "entry-1-v2", "After changing OpenAPI, regenerate the client and run contract tests.")]),
    ],
)
def test_memory_revision_lists_the_entries_live_at_that_revision(client, key, golden_memory, revision, live):
    response = revision_of(client, key, revision=revision)

    assert response.status_code == 200
    body = response.json()
    assert body["revision"] == revision
    assert [(e["id"], e["version"], e["body"]) for e in body["entries"]] == live
    assert all(e["content_sha256"] == sha256(e["body"]) for e in body["entries"])


@pytest.mark.django_db
def test_memory_revision_after_removing_every_entry_lists_none(client, demo, key):
    add_memory(demo, {"only": "alpha"})
    remove_memory(demo, "only")

    assert revision_of(client, key, revision=2).json()["entries"] == []
    assert [e["id"] for e in revision_of(client, key, revision=1).json()["entries"]] == ["only"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "revision, entry_id, version, status",
    [
        (1, "entry-1", "entry-1-v1", 200),
        (2, "entry-1", "entry-1-v1", 200),
        (2, "entry-2", "entry-2-v1", 200),
        (3, "entry-1", "entry-1-v2", 200),
        (3, "entry-1", "entry-1-v1", 404),  # superseded in 3
        (3, "entry-2", "entry-2-v1", 404),  # removed in 3
        (1, "entry-2", "entry-2-v1", 404),  # not born yet
        (1, "entry-1", "entry-1-v2", 404),  # not born yet, although it is the head version now
        (2, "entry-1", "entry-1-v2", 404),
        (3, "entry-2", "entry-1-v2", 404),  # version of another entry
        (4, "entry-1", "entry-1-v2", 404),  # no such revision: never the head instead
        (3, "entry-9", "entry-9-v1", 404),
    ],
)
def test_entry_version_is_found_only_where_it_was_live(client, key, golden_memory, revision, entry_id, version, status):
    response = revision_of(client, key, revision=revision, entry_id=entry_id, entry_version=version)

    if status == 404:
        error_of(response, 404, "not_found")
        assert b"OpenAPI" not in response.content and b"CHANGELOG" not in response.content
    else:
        assert response.status_code == 200
        body = response.json()
        assert (body["scope_id"], body["family"], body["artifact_id"], body["revision"]) == (
            "project:demo",
            "memory",
            "memory",
            revision,
        )
        assert (body["entry"]["id"], body["entry"]["version"]) == (entry_id, version)
        assert body["entry"]["content_sha256"] == sha256(body["entry"]["body"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params",
    [
        {"revision": 4},
        {"revision": 999},
        {"artifact_id": "missing", "revision": 1},
        {"family": "experience", "revision": 1},  # the id exists only as a memory artifact
    ],
)
def test_missing_revision_or_artifact_is_not_found_never_the_head(client, key, golden_memory, params):
    error_of(revision_of(client, key, **params), 404, "not_found")


@pytest.mark.django_db
def test_prepared_citation_reads_back_the_cited_bytes(client, demo, key):
    add_memory(demo, {"entry-1": "alpha\tcited\r\nbody \u202e"})
    add_experience(demo, "lesson", "alpha lesson")
    add_topic(demo, "topic", title="alpha topic", summary="summary", body="alpha detail")
    add_profile(demo, "profile body")
    doc = markdown_of(
        prepare(
            client,
            key,
            {
                "query": "alpha",
                "assembly": {
                    "sections": [
                        {"family": "memory", "limit": 1},
                        {"family": "experience", "limit": 1},
                        {"family": "topic_memory", "limit": 1},
                        {"family": "profile", "limit": 1},
                    ]
                },
            },
        )
    )
    update_memory(demo, "entry-1", "alpha changed")
    add_experience(demo, "lesson", "alpha changed lesson")
    add_topic(demo, "topic", title="changed", summary="changed")
    add_profile(demo, "changed profile")

    read = {}
    for entry in doc.entries:
        params = {
            "scope_id": entry.scope,
            "family": entry.family,
            "artifact_id": entry.artifact_id,
            "revision": entry.revision,
        }
        if entry.entry_id is not None:
            params.update(entry_id=entry.entry_id, entry_version=entry.version)
        response = read_revision(client, key, **params)
        assert response.status_code == 200
        read[entry.family] = response.json()

    assert read["memory"]["entry"]["body"] == "alpha\tcited\r\nbody \u202e"
    assert read["experience"]["body"] == "alpha lesson"
    assert (read["topic_memory"]["title"], read["topic_memory"]["body"]) == ("alpha topic", "alpha detail")
    assert read["profile"]["body"] == "profile body"


# --- request validation ---------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params, paths",
    [
        ({"revision": 1, "unknown": "x"}, ["unknown"]),
        ({"revision": 1, "head": "true"}, ["head"]),
        ({"revision": 1, "entry_id": "entry-1"}, ["entry_version"]),
        ({"revision": 1, "entry_version": "entry-1-v1"}, ["entry_id"]),
        ({"revision": 0}, ["revision"]),
        ({"revision": -1}, ["revision"]),
        ({"revision": "latest"}, ["revision"]),
        ({"revision": "1.5"}, ["revision"]),
        ({}, ["revision"]),
        ({"revision": 1, "family": "widget"}, ["family"]),
        ({"revision": 1, "scope_id": ""}, ["scope_id"]),
    ],
)
def test_invalid_query_parameters_are_rejected(client, key, golden_memory, params, paths):
    response = revision_of(client, key, **params)

    error = error_of(response, 422, "invalid_request")
    assert [field["path"] for field in error["fields"]] == paths


@pytest.mark.django_db
def test_entry_parameters_on_a_non_memory_family_are_rejected(client, demo, key):
    add_experience(demo, "lesson", "body")

    response = read_revision(
        client,
        key,
        scope_id="project:demo",
        family="experience",
        artifact_id="lesson",
        revision=1,
        entry_id="x",
        entry_version="y",
    )

    assert [f["path"] for f in error_of(response, 422, "invalid_request")["fields"]] == ["entry_id"]


# --- authentication and authorization ---------------------------------------------------------------


@pytest.mark.django_db
def test_unreadable_scope_is_not_found_exactly_like_an_unknown_scope(client, demo, golden_memory):
    hidden = make_scope("project:hidden")
    add_memory(hidden, [("entry-1", "hidden body", "entry-1-v1")])
    key = make_key(read=[demo])

    unreadable = read_revision(
        client, key, scope_id="project:hidden", family="memory", artifact_id="memory", revision=1
    )
    unknown = read_revision(client, key, scope_id="project:nowhere", family="memory", artifact_id="memory", revision=1)
    entry_unreadable = read_revision(
        client,
        key,
        scope_id="project:hidden",
        family="memory",
        artifact_id="memory",
        revision=1,
        entry_id="entry-1",
        entry_version="entry-1-v1",
    )

    error_of(unreadable, 404, "not_found")
    assert unreadable.content == unknown.content == entry_unreadable.content
    assert b"hidden" not in unreadable.content


@pytest.mark.django_db
def test_write_only_grant_cannot_read_revisions(client, demo, golden_memory):
    key = make_key(write=[demo])

    error_of(revision_of(client, key, revision=1), 404, "not_found")


@pytest.mark.django_db
def test_reading_a_referenced_scope_needs_its_own_grant(client, demo):
    team = make_scope("team:platform")
    set_references(demo, team)
    add_experience(team, "lesson", "team lesson")
    key = make_key(read=[demo])

    response = read_revision(
        client, key, scope_id="team:platform", family="experience", artifact_id="lesson", revision=1
    )

    error_of(response, 404, "not_found")


@pytest.mark.django_db
@pytest.mark.parametrize("header", [None, "Bearer pc_unknown_key_0123456789abcdef0123456789", "Basic abc"])
def test_exact_reads_require_a_valid_key(client, demo, golden_memory, header):
    headers = {} if header is None else {"HTTP_AUTHORIZATION": header}

    response = client.get(
        REVISION_URL,
        {"scope_id": "project:demo", "family": "memory", "artifact_id": "memory", "revision": 1},
        **headers,
    )

    error_of(response, 401, "unauthenticated")
    assert b"OpenAPI" not in response.content


@pytest.mark.django_db
def test_exact_read_with_a_valid_key_uses_the_same_bearer_format(client, demo, key, golden_memory):
    response = client.get(
        REVISION_URL,
        {"scope_id": "project:demo", "family": "memory", "artifact_id": "memory", "revision": 3},
        **auth(key),
    )

    assert response.status_code == 200
    assert [e["version"] for e in response.json()["entries"]] == ["entry-1-v2"]


@pytest.mark.django_db
@pytest.mark.parametrize("revision", ["1.0", " 1", "+1", "1e0", "\u0661", ""])
def test_revision_must_be_plain_digits(client, key, golden_memory, revision):
    response = revision_of(
        client, key, scope_id="project:demo", family="memory", artifact_id="memory", revision=revision
    )

    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["path"] == "revision"
