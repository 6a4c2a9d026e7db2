"""DESIGN §4 exact reads: GET /v1/artifacts/revision returns exactly the cited revision or entry
version, never the head instead, and hides unreadable scopes exactly like unknown ones."""

import hashlib

import pytest

from artifacts.selectors import exact_reads
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
from vocabulary.limits import REVISION_ENTRIES_PAGE_DEFAULT, REVISION_ENTRIES_PAGE_MAX


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


# --- entries of a memory revision, page by page ------------------------------------------------------


def entry_pages(client, key, **params) -> list[dict]:
    """Every page of a memory revision's entries, following ``next_entries_after`` until it is null."""
    pages = [revision_of(client, key, **params).json()]
    while pages[-1]["next_entries_after"] is not None:
        assert len(pages) < 100, "the cursor chain does not end"
        pages.append(revision_of(client, key, **params, entries_after=pages[-1]["next_entries_after"]).json())
    return pages


@pytest.fixture
def many_entries(demo):
    """r1 adds 25 entries; r2 updates entry-03, removes entry-04 and adds entry-99 (entry ids sort as numbers)."""
    add_memory(demo, {f"entry-{i:02}": f"body {i}" for i in range(25)})
    update_memory(demo, "entry-03", "body 3, revised")
    remove_memory(demo, "entry-04")
    add_memory(demo, {"entry-99": "body 99"})
    return demo


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [1, 4, 7, 25, 100])
def test_a_memory_revision_pages_its_entries_in_order_none_lost_or_repeated(client, key, many_entries, limit):
    pages = entry_pages(client, key, revision=1, entries_limit=limit)

    listed = [(e["id"], e["body"]) for page in pages for e in page["entries"]]
    assert listed == [(f"entry-{i:02}", f"body {i}") for i in range(25)]
    assert [len(page["entries"]) for page in pages[:-1]] == [limit] * (len(pages) - 1)
    assert len(pages) == -(-25 // limit)
    assert all(page["revision"] == 1 for page in pages)
    assert [page["next_entries_after"] for page in pages[:-1]] == [page["entries"][-1]["id"] for page in pages[:-1]]


@pytest.mark.django_db
def test_each_page_lists_the_versions_live_at_the_cited_revision(client, key, many_entries):
    pages = entry_pages(client, key, revision=4, entries_limit=10)

    live = {e["id"]: e["body"] for page in pages for e in page["entries"]}
    assert list(live) == sorted(live) and "entry-04" not in live and len(live) == 25
    assert (live["entry-03"], live["entry-99"]) == ("body 3, revised", "body 99")


@pytest.mark.django_db
def test_the_default_page_holds_the_default_number_of_entries(client, key, demo):
    add_memory(demo, {f"e{i:03}": "x" for i in range(REVISION_ENTRIES_PAGE_DEFAULT + 1)})

    first = revision_of(client, key, revision=1).json()
    last = revision_of(client, key, revision=1, entries_after=first["next_entries_after"]).json()

    assert len(first["entries"]) == REVISION_ENTRIES_PAGE_DEFAULT
    assert first["next_entries_after"] == f"e{REVISION_ENTRIES_PAGE_DEFAULT - 1:03}"
    assert [e["id"] for e in last["entries"]] == [f"e{REVISION_ENTRIES_PAGE_DEFAULT:03}"]
    assert last["next_entries_after"] is None


@pytest.mark.django_db
def test_a_revision_whose_entries_fit_one_page_says_so(client, key, golden_memory):
    body = revision_of(client, key, revision=2).json()

    assert [e["id"] for e in body["entries"]] == ["entry-1", "entry-2"]
    assert body["next_entries_after"] is None
    assert revision_of(client, key, revision=2, entries_limit=2).json()["next_entries_after"] is None
    assert revision_of(client, key, revision=2, entries_limit=1).json()["next_entries_after"] == "entry-1"


@pytest.mark.django_db
def test_entries_after_the_last_entry_is_an_empty_last_page(client, key, golden_memory):
    body = revision_of(client, key, revision=2, entries_after="entry-2").json()

    assert (body["entries"], body["next_entries_after"], body["revision"]) == ([], None, 2)
    assert revision_of(client, key, revision=2, entries_after="entry-0").json()["entries"][0]["id"] == "entry-1"


@pytest.mark.django_db
def test_the_byte_bound_ends_a_page_after_the_entry_that_crosses_it(client, key, demo, monkeypatch):
    monkeypatch.setattr(exact_reads, "REVISION_ENTRIES_PAGE_MAX_BYTES", 1000)
    # 400 UTF-8 bytes each (200 two-byte characters): the third entry takes a page past 1000 bytes.
    add_memory(demo, {f"big-{i}": "é" * 200 for i in range(7)})

    pages = entry_pages(client, key, revision=1, entries_limit=REVISION_ENTRIES_PAGE_MAX)

    assert [[e["id"] for e in page["entries"]] for page in pages] == [
        ["big-0", "big-1", "big-2"],
        ["big-3", "big-4", "big-5"],
        ["big-6"],
    ]


@pytest.mark.django_db
def test_an_entry_bigger_than_the_byte_bound_is_a_page_of_its_own(client, key, demo, monkeypatch):
    monkeypatch.setattr(exact_reads, "REVISION_ENTRIES_PAGE_MAX_BYTES", 10)
    add_memory(demo, {"a": "x" * 50, "b": "y" * 50, "c": "z"})

    pages = entry_pages(client, key, revision=1)

    assert [[e["id"] for e in page["entries"]] for page in pages] == [["a"], ["b"], ["c"]]
    assert pages[0]["entries"][0]["body"] == "x" * 50


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params, paths",
    [
        ({"entries_limit": 0}, ["entries_limit"]),
        ({"entries_limit": REVISION_ENTRIES_PAGE_MAX + 1}, ["entries_limit"]),
        ({"entries_limit": "-1"}, ["entries_limit"]),
        ({"entries_limit": "ten"}, ["entries_limit"]),
        ({"entries_limit": "1.0"}, ["entries_limit"]),
        ({"entries_limit": ""}, ["entries_limit"]),
        ({"entries_limit": "9" * 40}, ["entries_limit"]),
        ({"entries_after": ""}, ["entries_after"]),
        ({"entries_after": "x" * 201}, ["entries_after"]),
        ({"entries_after": "a\x00b"}, ["entries_after"]),
        ({"entries_after": "entry-1", "entry_id": "entry-1", "entry_version": "entry-1-v1"}, ["entries_after"]),
        ({"entries_limit": 5, "entry_id": "entry-1", "entry_version": "entry-1-v1"}, ["entries_limit"]),
    ],
)
def test_invalid_entry_page_parameters_are_rejected(client, key, golden_memory, params, paths):
    error = error_of(revision_of(client, key, revision=1, **params), 422, "invalid_request")

    assert [field["path"] for field in error["fields"]] == paths


@pytest.mark.django_db
@pytest.mark.parametrize("params", [{"entries_after": "x"}, {"entries_limit": 5}])
def test_entry_page_parameters_on_a_non_memory_family_are_rejected(client, demo, key, params):
    add_experience(demo, "lesson", "body")

    response = read_revision(
        client, key, scope_id="project:demo", family="experience", artifact_id="lesson", revision=1, **params
    )

    assert [f["path"] for f in error_of(response, 422, "invalid_request")["fields"]] == list(params)


@pytest.mark.django_db
def test_a_repeated_entry_page_parameter_is_rejected(client, key, golden_memory):
    response = client.get(
        f"{REVISION_URL}?scope_id=project:demo&family=memory&artifact_id=memory&revision=1"
        "&entries_limit=1&entries_limit=2",
        **auth(key),
    )

    assert [f["path"] for f in error_of(response, 422, "invalid_request")["fields"]] == ["entries_limit"]


@pytest.mark.django_db
def test_a_paged_read_of_an_unreadable_scope_is_not_found_exactly_like_an_unknown_scope(client, demo):
    hidden = make_scope("project:hidden")
    add_memory(hidden, {f"entry-{i}": "hidden body" for i in range(5)})
    key = make_key(read=[demo])
    params = {"family": "memory", "artifact_id": "memory", "revision": 1, "entries_after": "entry-1"}

    unreadable = read_revision(client, key, scope_id="project:hidden", **params, entries_limit=2)
    unknown = read_revision(client, key, scope_id="project:nowhere", **params, entries_limit=2)

    error_of(unreadable, 404, "not_found")
    assert unreadable.content == unknown.content
    assert b"hidden" not in unreadable.content and b"entry" not in unreadable.content


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
