"""The write API through HTTP: every write answers 201 with the exact citation of the one revision it created.

Covers memory entries (create, update, remove), experience and topic-memory revisions, profile candidates
(propose, commit, reject), conditional writes, authorization, validation in the one error shape, the
history listing, and that recall and exact reads see each write as soon as it commits.
"""

import hashlib
import json

import pytest

from artifacts import services
from artifacts.models import Artifact, ArtifactRevision, MemoryEntryVersion, ProfileCandidate
from vocabulary import limits

pytestmark = pytest.mark.django_db

PREPARE = "/v1/context/prepare"
REVISION = "/v1/artifacts/revision"
HISTORY = "/v1/artifacts/history"
ENTRY_CREATE = "/v1/memory/entries"
ENTRY_UPDATE = "/v1/memory/entries/update"
ENTRY_REMOVE = "/v1/memory/entries/remove"
EXPERIENCE = "/v1/experiences/revisions"
TOPIC = "/v1/topic-memories/revisions"
CANDIDATES = "/v1/profile/candidates"
SCOPE = "project:writes"
LEGACY_BEGIN = "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1\n"
LEGACY_END = "\nEND_POWERCONTEXT_PREPARED_CONTEXT_V1"


# --- helpers ----------------------------------------------------------------------------------------


def auth(key: str | None) -> dict:
    return {} if key is None else {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def post(client, url: str, key: str | None, body) -> object:
    """POST ``body`` (a dict, or already-encoded JSON text or bytes) as application/json."""
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(url, data=data, content_type="application/json", **auth(key))


def created(response) -> dict:
    assert response.status_code == 201, (response.status_code, response.content)
    return response.json()


def error(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.content)
    body = response.json()
    assert list(body) == ["error"]
    assert set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["code"] == code
    return body["error"]


def read_exact(client, key: str, citation: dict):
    params = {k: citation[k] for k in ("scope_id", "family", "artifact_id", "revision")}
    if "entry_id" in citation:
        params |= {"entry_id": citation["entry_id"], "entry_version": citation["entry_version"]}
    return client.get(REVISION, data=params, **auth(key))


def exact_json(client, key: str, citation: dict) -> dict:
    response = read_exact(client, key, citation)
    assert response.status_code == 200, (response.status_code, response.content)
    return response.json()


def history(client, key: str, *, family: str = "memory", artifact_id: str = "memory", **params):
    query = {"scope_id": SCOPE, "family": family, "artifact_id": artifact_id, **params}
    return client.get(HISTORY, data=query, **auth(key))


def legacy_items(client, key: str, query: str) -> list[dict]:
    """The items of a legacy-envelope prepare (memory, topic memory, experience)."""
    response = post(client, PREPARE, key, {"scope_id": SCOPE, "query": query})
    assert response.status_code == 200, response.content
    content = response.json()["content"]
    if content is None:
        return []
    payload = content.split(LEGACY_BEGIN, 1)[1].split(LEGACY_END, 1)[0]
    return json.loads(payload)["items"]


def prepared_profile(client, key: str) -> str | None:
    body = {"scope_id": SCOPE, "query": "anything", "assembly": {"sections": [{"family": "profile", "limit": 8}]}}
    response = post(client, PREPARE, key, body)
    assert response.status_code == 200, response.content
    return response.json()["content"]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def memory_citation(entry_id: str, version: str, revision: int, artifact_id: str = "memory") -> dict:
    return {
        "scope_id": SCOPE,
        "family": "memory",
        "artifact_id": artifact_id,
        "revision": revision,
        "entry_id": entry_id,
        "entry_version": version,
    }


def create_entry(client, key, entry_id: str, body: str, **extra) -> dict:
    return created(post(client, ENTRY_CREATE, key, {"scope_id": SCOPE, "entry_id": entry_id, "body": body, **extra}))


def update_entry(client, key, entry_id: str, body: str, **extra) -> dict:
    return created(post(client, ENTRY_UPDATE, key, {"scope_id": SCOPE, "entry_id": entry_id, "body": body, **extra}))


def remove_entry(client, key, entry_id: str, **extra) -> dict:
    return created(post(client, ENTRY_REMOVE, key, {"scope_id": SCOPE, "entry_id": entry_id, **extra}))


def propose(client, key, body: str, **extra):
    return post(client, CANDIDATES, key, {"scope_id": SCOPE, "body": body, **extra})


def revision_count() -> int:
    return ArtifactRevision.objects.count()


# --- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture
def scope():
    return services.scope_create(scope_id=SCOPE, title="Writes")


@pytest.fixture
def other_scope():
    return services.scope_create(scope_id="project:elsewhere")


@pytest.fixture
def writer(scope):
    """A key that may read and write the scope."""
    return services.api_key_create(name="writer-host", read_scopes=[scope], write_scopes=[scope])[1]


@pytest.fixture
def reader(scope):
    """A key that may only read the scope."""
    return services.api_key_create(name="reader-host", read_scopes=[scope])[1]


@pytest.fixture
def stranger(other_scope):
    """A key with read and write on another scope, and no grant at all on ours."""
    return services.api_key_create(name="stranger-host", read_scopes=[other_scope], write_scopes=[other_scope])[1]


# --- memory entries ---------------------------------------------------------------------------------


def test_creating_an_entry_answers_201_with_its_exact_citation_which_reads_back_the_exact_body(client, writer):
    body = "Deploys go out on Tuesdays.\r\nNever on Fridays ‮ (RTL) and 🚀 and \u2028 separators."
    result = create_entry(client, writer, "deploy-day", body)

    assert list(result) == ["citation", "content_sha256"]
    assert result["citation"] == memory_citation("deploy-day", "deploy-day-v1", 1)
    entry = exact_json(client, writer, result["citation"])
    assert entry["entry"] == {
        "id": "deploy-day",
        "version": "deploy-day-v1",
        "body": body,
        "content_sha256": sha256(body),
        "conflict_key": None,
    }
    whole = exact_json(client, writer, {k: v for k, v in result["citation"].items() if not k.startswith("entry")})
    assert whole["revision"] == 1
    assert whole["content_sha256"] == result["content_sha256"]
    assert whole["author"] == "api-key:writer-host"
    assert [e["id"] for e in whole["entries"]] == ["deploy-day"]


def test_a_new_entry_defaults_to_the_memory_artifact_and_may_name_another_one_and_its_version(client, writer):
    result = create_entry(client, writer, "e", "in the notes artifact", artifact_id="notes", version_id="e@2024")
    assert result["citation"] == memory_citation("e", "e@2024", 1, artifact_id="notes")
    assert exact_json(client, writer, result["citation"])["entry"]["body"] == "in the notes artifact"
    assert not Artifact.objects.filter(family="memory", artifact_id="memory").exists()


def test_each_write_creates_exactly_one_new_revision_numbered_after_the_head(client, writer):
    citations = [
        create_entry(client, writer, "a", "alpha")["citation"],
        create_entry(client, writer, "b", "bravo")["citation"],
        update_entry(client, writer, "a", "alpha, revised")["citation"],
        remove_entry(client, writer, "b")["citation"],
    ]
    assert [c["revision"] for c in citations] == [1, 2, 3, 4]
    assert revision_count() == 4
    assert MemoryEntryVersion.objects.count() == 3


def test_updating_an_entry_adds_a_new_version_while_old_citations_keep_resolving_to_their_exact_bytes(client, writer):
    first = create_entry(client, writer, "style", "Use tabs.")["citation"]
    second = update_entry(client, writer, "style", "Use four spaces.")["citation"]

    assert second == memory_citation("style", "style-v2", 2)
    assert exact_json(client, writer, first)["entry"]["body"] == "Use tabs."
    assert exact_json(client, writer, second)["entry"]["body"] == "Use four spaces."
    # The old version was not live at revision 2, and the new one was not yet live at revision 1.
    error(read_exact(client, writer, {**first, "revision": 2}), 404, "not_found")
    error(read_exact(client, writer, {**second, "revision": 1}), 404, "not_found")
    head = exact_json(client, writer, {k: v for k, v in second.items() if not k.startswith("entry")})
    assert [(e["id"], e["version"]) for e in head["entries"]] == [("style", "style-v2")]


def test_removing_an_entry_retires_its_live_version_in_a_new_revision_without_an_entry_in_the_citation(client, writer):
    kept = create_entry(client, writer, "kept", "stays")["citation"]
    gone = create_entry(client, writer, "gone", "goes away")["citation"]
    result = remove_entry(client, writer, "gone")

    assert result["citation"] == {"scope_id": SCOPE, "family": "memory", "artifact_id": "memory", "revision": 3}
    head = exact_json(client, writer, result["citation"])
    assert [e["id"] for e in head["entries"]] == ["kept"]
    assert exact_json(client, writer, gone)["entry"]["body"] == "goes away"
    assert exact_json(client, writer, {**kept, "revision": 3})["entry"]["body"] == "stays"
    error(read_exact(client, writer, {**gone, "revision": 3}), 404, "not_found")


def test_a_removed_entry_can_be_created_again_as_its_next_version(client, writer):
    create_entry(client, writer, "again", "first life")
    remove_entry(client, writer, "again")
    result = create_entry(client, writer, "again", "second life")
    assert result["citation"] == memory_citation("again", "again-v2", 3)


def test_creating_an_entry_that_exists_is_a_conflict_and_writes_nothing(client, writer):
    create_entry(client, writer, "dup", "original")
    err = error(
        post(client, ENTRY_CREATE, writer, {"scope_id": SCOPE, "entry_id": "dup", "body": "copy"}), 409, "conflict"
    )
    assert "dup" in err["message"]
    assert revision_count() == 1


def test_reusing_a_version_id_is_a_conflict(client, writer):
    create_entry(client, writer, "a", "one", version_id="v-shared")
    response = post(
        client, ENTRY_CREATE, writer, {"scope_id": SCOPE, "entry_id": "b", "body": "two", "version_id": "v-shared"}
    )
    error(response, 409, "conflict")
    response = post(
        client, ENTRY_UPDATE, writer, {"scope_id": SCOPE, "entry_id": "a", "body": "three", "version_id": "v-shared"}
    )
    error(response, 409, "conflict")
    assert revision_count() == 1


@pytest.mark.parametrize("url", [ENTRY_UPDATE, ENTRY_REMOVE])
def test_updating_or_removing_an_entry_that_does_not_exist_is_404_never_500(client, writer, url):
    body = {"scope_id": SCOPE, "entry_id": "missing"} | ({"body": "x"} if url == ENTRY_UPDATE else {})
    # No memory artifact at all yet, then an artifact without that entry, then the entry already removed.
    error(post(client, url, writer, body), 404, "not_found")
    create_entry(client, writer, "present", "here")
    error(post(client, url, writer, body), 404, "not_found")
    create_entry(client, writer, "missing", "briefly")
    remove_entry(client, writer, "missing")
    error(post(client, url, writer, body), 404, "not_found")
    assert revision_count() == 3


# --- experience and topic memory --------------------------------------------------------------------


def test_an_experience_revision_answers_its_citation_and_sha256_and_older_revisions_stay_readable(client, writer):
    first = created(
        post(client, EXPERIENCE, writer, {"scope_id": SCOPE, "artifact_id": "exp-1", "body": "Lesson one."})
    )
    second = created(
        post(client, EXPERIENCE, writer, {"scope_id": SCOPE, "artifact_id": "exp-1", "body": "Lesson two."})
    )

    assert first == {
        "citation": {"scope_id": SCOPE, "family": "experience", "artifact_id": "exp-1", "revision": 1},
        "content_sha256": sha256("Lesson one."),
    }
    assert second["citation"]["revision"] == 2
    old, new = exact_json(client, writer, first["citation"]), exact_json(client, writer, second["citation"])
    assert (old["body"], old["content_sha256"]) == ("Lesson one.", sha256("Lesson one."))
    assert (new["body"], new["content_sha256"]) == ("Lesson two.", sha256("Lesson two."))
    assert "entries" not in new


def test_a_topic_memory_revision_stores_title_summary_and_optional_detail_exactly(client, writer):
    with_detail = {"title": "Caching", "summary": "We cache at the edge.", "body": "Detail line one\nline two"}
    first = created(post(client, TOPIC, writer, {"scope_id": SCOPE, "artifact_id": "topic-1", **with_detail}))
    second = created(
        post(client, TOPIC, writer, {"scope_id": SCOPE, "artifact_id": "topic-1", "title": "Caching", "summary": "No."})
    )

    assert first["citation"] == {"scope_id": SCOPE, "family": "topic_memory", "artifact_id": "topic-1", "revision": 1}
    assert first["content_sha256"] == services.topic_memory_sha256(**with_detail)
    read = exact_json(client, writer, first["citation"])
    assert (read["title"], read["summary"], read["body"]) == ("Caching", "We cache at the edge.", with_detail["body"])
    read = exact_json(client, writer, second["citation"])
    assert (read["revision"], read["title"], read["summary"], read["body"]) == (2, "Caching", "No.", None)


# --- conditional writes -----------------------------------------------------------------------------


def test_a_write_with_the_current_head_as_expected_revision_succeeds(client, writer):
    assert create_entry(client, writer, "a", "one", expected_head_revision=0)["citation"]["revision"] == 1
    assert update_entry(client, writer, "a", "two", expected_head_revision=1)["citation"]["revision"] == 2
    assert remove_entry(client, writer, "a", expected_head_revision=2)["citation"]["revision"] == 3
    exp = {"scope_id": SCOPE, "artifact_id": "exp", "body": "b", "expected_head_revision": 0}
    assert created(post(client, EXPERIENCE, writer, exp))["citation"]["revision"] == 1
    topic = {"scope_id": SCOPE, "artifact_id": "t", "title": "T", "summary": "S", "expected_head_revision": 0}
    assert created(post(client, TOPIC, writer, topic))["citation"]["revision"] == 1


@pytest.mark.parametrize(
    ("url", "body"),
    [
        (ENTRY_CREATE, {"entry_id": "new", "body": "x"}),
        (ENTRY_UPDATE, {"entry_id": "a", "body": "x"}),
        (ENTRY_REMOVE, {"entry_id": "a"}),
        (EXPERIENCE, {"artifact_id": "exp", "body": "x"}),
        (TOPIC, {"artifact_id": "topic", "title": "T", "summary": "S"}),
    ],
)
@pytest.mark.parametrize("stale", [0, 1, 5])
def test_a_write_whose_expected_revision_is_not_the_head_is_409_and_writes_nothing(client, writer, url, body, stale):
    create_entry(client, writer, "a", "one")
    create_entry(client, writer, "b", "two")
    created(post(client, EXPERIENCE, writer, {"scope_id": SCOPE, "artifact_id": "exp", "body": "e1"}))
    created(post(client, EXPERIENCE, writer, {"scope_id": SCOPE, "artifact_id": "exp", "body": "e2"}))
    created(post(client, TOPIC, writer, {"scope_id": SCOPE, "artifact_id": "topic", "title": "T", "summary": "1"}))
    created(post(client, TOPIC, writer, {"scope_id": SCOPE, "artifact_id": "topic", "title": "T", "summary": "2"}))
    before = revision_count()

    err = error(
        post(client, url, writer, {"scope_id": SCOPE, **body, "expected_head_revision": stale}), 409, "conflict"
    )
    assert "head" in err["message"]
    assert revision_count() == before


def test_a_conditional_create_of_a_new_artifact_expects_revision_zero(client, writer):
    body = {"scope_id": SCOPE, "artifact_id": "fresh", "body": "x", "expected_head_revision": 1}
    error(post(client, EXPERIENCE, writer, body), 409, "conflict")
    assert not Artifact.objects.filter(artifact_id="fresh").exists()
    assert created(post(client, EXPERIENCE, writer, {**body, "expected_head_revision": 0}))["citation"]["revision"] == 1
    error(post(client, EXPERIENCE, writer, {**body, "expected_head_revision": 0}), 409, "conflict")


# --- authorization ----------------------------------------------------------------------------------

WRITES = [
    (ENTRY_CREATE, {"scope_id": SCOPE, "entry_id": "x", "body": "x"}),
    (ENTRY_UPDATE, {"scope_id": SCOPE, "entry_id": "x", "body": "x"}),
    (ENTRY_REMOVE, {"scope_id": SCOPE, "entry_id": "x"}),
    (EXPERIENCE, {"scope_id": SCOPE, "artifact_id": "exp", "body": "x"}),
    (TOPIC, {"scope_id": SCOPE, "artifact_id": "topic", "title": "T", "summary": "S"}),
    (CANDIDATES, {"scope_id": SCOPE, "body": "x"}),
]


@pytest.mark.parametrize(("url", "body"), WRITES)
def test_a_write_without_a_key_is_401_and_with_an_unknown_key_too(client, scope, url, body):
    err = error(post(client, url, None, body), 401, "unauthenticated")
    assert err["fields"] == []
    assert post(client, url, None, body)["WWW-Authenticate"] == "Bearer"
    error(post(client, url, "pc_not-a-key", body), 401, "unauthenticated")
    assert revision_count() == 0


@pytest.mark.parametrize(("url", "body"), WRITES)
def test_a_revoked_key_may_not_write(client, scope, url, body):
    api_key, plaintext = services.api_key_create(name="revoked", read_scopes=[scope], write_scopes=[scope])
    services.api_key_revoke(api_key=api_key)
    error(post(client, url, plaintext, body), 401, "unauthenticated")


@pytest.mark.parametrize(("url", "body"), WRITES)
def test_a_read_grant_does_not_allow_writes_it_is_403(client, reader, url, body):
    err = error(post(client, url, reader, body), 403, "forbidden")
    assert SCOPE not in err["message"]
    assert revision_count() == 0
    assert ProfileCandidate.objects.count() == 0


@pytest.mark.parametrize(("url", "body"), WRITES)
def test_a_key_without_any_grant_on_the_scope_gets_the_same_404_as_for_an_unknown_scope(
    client, scope, stranger, url, body
):
    hidden = post(client, url, stranger, body)
    unknown = post(client, url, stranger, {**body, "scope_id": "project:does-not-exist"})
    error(hidden, 404, "not_found")
    assert hidden.content == unknown.content
    assert revision_count() == 0


def test_a_write_only_grant_allows_writes(client, scope):
    plaintext = services.api_key_create(name="write-only", write_scopes=[scope])[1]
    assert create_entry(client, plaintext, "w", "written blind")["citation"]["revision"] == 1


def test_a_write_grant_on_one_scope_does_not_reach_another(client, scope, other_scope, writer):
    body = {"scope_id": "project:elsewhere", "entry_id": "x", "body": "x"}
    unknown = post(client, ENTRY_CREATE, writer, {**body, "scope_id": "project:nowhere"})
    hidden = post(client, ENTRY_CREATE, writer, body)
    error(hidden, 404, "not_found")
    assert hidden.content == unknown.content


def test_deciding_on_a_candidate_needs_write_on_its_scope(client, writer, reader, stranger):
    candidate = created(propose(client, writer, "Prefers short answers."))["id"]
    for action in ("commit", "reject"):
        url = f"{CANDIDATES}/{candidate}/{action}"
        error(post(client, url, None, {}), 401, "unauthenticated")
        error(post(client, url, reader, {}), 403, "forbidden")
        hidden = post(client, url, stranger, {})
        unknown = post(client, f"{CANDIDATES}/987654/{action}", stranger, {})
        error(hidden, 404, "not_found")
        assert hidden.content == unknown.content  # an unreadable candidate looks like a missing one
        error(post(client, f"{CANDIDATES}/987654/{action}", writer, {}), 404, "not_found")
    assert ProfileCandidate.objects.get().status == "pending"
    assert revision_count() == 0


# --- validation -------------------------------------------------------------------------------------

LONG_ID = "i" * 201
TOO_LONG_BODY = "b" * (limits.MAX_BODY_CHARACTERS + 1)


def _raw(fields: dict) -> str:
    """JSON text with ASCII escapes, so a lone surrogate travels as the six bytes \\ud800."""
    return json.dumps(fields, ensure_ascii=True)


MEMORY = {"scope_id": SCOPE, "entry_id": "e", "body": "b"}
REMOVAL = {"scope_id": SCOPE, "entry_id": "e"}
EXP = {"scope_id": SCOPE, "artifact_id": "x", "body": "b"}
TOP = {"scope_id": SCOPE, "artifact_id": "x", "title": "t", "summary": "s"}
PROPOSAL = {"scope_id": SCOPE, "body": "b"}
EXPECTED = "expected_head_revision"

INVALID = [
    ("unknown field", ENTRY_CREATE, {**MEMORY, "colour": "red"}, "colour"),
    ("unknown field", EXPERIENCE, {**EXP, "extra": 1}, "extra"),
    ("unknown field", TOPIC, {**TOP, "x": None}, "x"),
    ("unknown field", ENTRY_REMOVE, {**REMOVAL, "body": "b"}, "body"),
    ("unknown field", CANDIDATES, {**PROPOSAL, "status": "committed"}, "status"),
    ("NUL in body", ENTRY_CREATE, {**MEMORY, "body": "a\x00b"}, "body"),
    ("NUL in entry id", ENTRY_CREATE, {**MEMORY, "entry_id": "e\x00"}, "entry_id"),
    ("NUL in title", TOPIC, {**TOP, "title": "\x00"}, "title"),
    ("NUL in summary", TOPIC, {**TOP, "summary": "s\x00"}, "summary"),
    ("NUL in proposal", CANDIDATES, {**PROPOSAL, "body": "\x00"}, "body"),
    ("lone surrogate in body", ENTRY_CREATE, _raw({**MEMORY, "body": "a\ud800b"}), "body"),
    ("lone low surrogate", EXPERIENCE, _raw({**EXP, "body": "\udfff"}), "body"),
    ("lone surrogate in id", ENTRY_UPDATE, _raw({**MEMORY, "entry_id": "\ud83d"}), "entry_id"),
    ("lone surrogate in scope", ENTRY_CREATE, _raw({**MEMORY, "scope_id": "p\udc00"}), "scope_id"),
    ("lone surrogate in detail", TOPIC, _raw({**TOP, "body": "\ud800"}), "body"),
    ("body too long", ENTRY_CREATE, {**MEMORY, "body": TOO_LONG_BODY}, "body"),
    ("body too long", ENTRY_UPDATE, {**MEMORY, "body": TOO_LONG_BODY}, "body"),
    ("body too long", EXPERIENCE, {**EXP, "body": TOO_LONG_BODY}, "body"),
    ("summary too long", TOPIC, {**TOP, "summary": TOO_LONG_BODY}, "summary"),
    ("detail too long", TOPIC, {**TOP, "body": TOO_LONG_BODY}, "body"),
    ("body too long", CANDIDATES, {**PROPOSAL, "body": TOO_LONG_BODY}, "body"),
    ("entry id too long", ENTRY_CREATE, {**MEMORY, "entry_id": LONG_ID}, "entry_id"),
    ("entry id too long", ENTRY_REMOVE, {**REMOVAL, "entry_id": LONG_ID}, "entry_id"),
    ("version id too long", ENTRY_CREATE, {**MEMORY, "version_id": LONG_ID}, "version_id"),
    ("artifact id too long", EXPERIENCE, {**EXP, "artifact_id": LONG_ID}, "artifact_id"),
    ("artifact id too long", ENTRY_CREATE, {**MEMORY, "artifact_id": LONG_ID}, "artifact_id"),
    ("artifact id too long", CANDIDATES, {**PROPOSAL, "artifact_id": LONG_ID}, "artifact_id"),
    ("scope id too long", ENTRY_CREATE, {**MEMORY, "scope_id": "s" * 201}, "scope_id"),
    ("scope id too long", CANDIDATES, {**PROPOSAL, "scope_id": "s" * 201}, "scope_id"),
    ("empty body", ENTRY_CREATE, {**MEMORY, "body": ""}, "body"),
    ("empty entry id", ENTRY_CREATE, {**MEMORY, "entry_id": ""}, "entry_id"),
    ("missing body", ENTRY_CREATE, REMOVAL, "body"),
    ("missing scope", EXPERIENCE, {"artifact_id": "x", "body": "b"}, "scope_id"),
    ("missing summary", TOPIC, {"scope_id": SCOPE, "artifact_id": "x", "title": "t"}, "summary"),
    ("body is a number", ENTRY_CREATE, {**MEMORY, "body": 5}, "body"),
    ("body is a list", EXPERIENCE, {**EXP, "body": ["b"]}, "body"),
    ("entry id is null", ENTRY_CREATE, {**MEMORY, "entry_id": None}, "entry_id"),
    ("scope id is a number", ENTRY_CREATE, {**MEMORY, "scope_id": 7}, "scope_id"),
    ("detail is null", TOPIC, {**TOP, "body": None}, "body"),
    ("expected is true", ENTRY_CREATE, {**MEMORY, EXPECTED: True}, EXPECTED),
    ("expected is false", EXPERIENCE, {**EXP, EXPECTED: False}, EXPECTED),
    ("expected is a string", ENTRY_CREATE, {**MEMORY, EXPECTED: "0"}, EXPECTED),
    ("expected is a float", EXPERIENCE, {**EXP, EXPECTED: 0.0}, EXPECTED),
    ("expected is negative", TOPIC, {**TOP, EXPECTED: -1}, EXPECTED),
    ("expected is huge", ENTRY_REMOVE, {**REMOVAL, EXPECTED: 2**31}, EXPECTED),
    ("expected is null", ENTRY_CREATE, {**MEMORY, EXPECTED: None}, EXPECTED),
]


@pytest.mark.parametrize(
    ("url", "body", "path"), [case[1:] for case in INVALID], ids=[f"{c[0]}:{c[1]}" for c in INVALID]
)
def test_an_invalid_write_is_422_in_the_one_error_shape_naming_the_field_and_writes_nothing(
    client, writer, url, body, path
):
    if url != ENTRY_CREATE:
        create_entry(client, writer, "e", "existing")  # so that "missing entry" never masks validation
    before = revision_count()

    err = error(post(client, url, writer, body), 422, "invalid_request")
    assert path in [field["path"] for field in err["fields"]], err
    assert all(set(field) == {"path", "message"} for field in err["fields"])
    assert revision_count() == before
    assert ProfileCandidate.objects.count() == 0


@pytest.mark.parametrize(
    "raw",
    [
        b'{"scope_id": "project:writes", "entry_id": "e", "body": "\xed\xa0\x80"}',  # a surrogate encoded as UTF-8
        b'{"scope_id": "project:writes", "entry_id": "e", "body": "\xff"}',
        b'{"scope_id": "project:writes", "entry_id": "e", "body": "unterminated}',
        b"[1, 2, 3]",
        b'"just a string"',
        b"null",
        b"",
    ],
)
def test_a_body_that_is_not_a_json_object_is_422(client, writer, raw):
    error(post(client, ENTRY_CREATE, writer, raw), 422, "invalid_request")
    assert revision_count() == 0


def test_the_limits_themselves_are_accepted_and_stored_exactly(client, writer):
    body = "😀" * limits.MAX_BODY_CHARACTERS  # 65,536 characters, 262,144 UTF-8 bytes
    entry_id = "é" * limits.MAX_IDENTIFIER_CHARACTERS
    result = create_entry(client, writer, entry_id, body, artifact_id="a" * 200, version_id="v" * 200)
    read = exact_json(client, writer, result["citation"])["entry"]
    assert (read["id"], read["version"], read["body"]) == (entry_id, "v" * 200, body)
    assert read["content_sha256"] == sha256(body)


def test_a_scope_id_at_the_length_limit_can_be_written(client):
    scope = services.scope_create(scope_id="s" * 200)
    key = services.api_key_create(name="long-scope", read_scopes=[scope], write_scopes=[scope])[1]
    response = post(client, EXPERIENCE, key, {"scope_id": "s" * 200, "artifact_id": "x", "body": "b"})
    assert created(response)["citation"]["scope_id"] == "s" * 200


def test_a_key_whose_name_is_at_the_length_limit_can_write(client, scope):
    # The author recorded with each revision names the key; it must fit the column on every engine.
    name = "n" * limits.MAX_IDENTIFIER_CHARACTERS
    key = services.api_key_create(name=name, read_scopes=[scope], write_scopes=[scope])[1]
    citation = create_entry(client, key, "e", "by a long-named key")["citation"]
    author = exact_json(client, key, {k: v for k, v in citation.items() if not k.startswith("entry")})["author"]
    assert author.startswith("api-key:nnn")
    assert len(author) <= 200


def test_writes_accept_post_only(client, writer):
    response = client.get(ENTRY_CREATE, **auth(writer))
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


# --- profile candidates -----------------------------------------------------------------------------


def test_a_proposed_candidate_never_reaches_prepare_until_committed(client, writer, reader):
    proposal = created(propose(client, writer, "Prefers concise answers in English."))
    assert proposal["status"] == "pending"
    assert proposal["committed_revision"] is None
    assert (proposal["scope_id"], proposal["artifact_id"]) == (SCOPE, "profile")
    assert proposal["content_sha256"] == sha256("Prefers concise answers in English.")
    assert prepared_profile(client, reader) is None
    assert revision_count() == 0

    commit = created(post(client, f"{CANDIDATES}/{proposal['id']}/commit", writer, {}))
    assert commit["citation"] == {"scope_id": SCOPE, "family": "profile", "artifact_id": "profile", "revision": 1}
    assert commit["content_sha256"] == proposal["content_sha256"]
    content = prepared_profile(client, reader)
    assert "Prefers concise answers in English." in content
    assert 'Artifact: family="profile", id="profile", revision=1' in content
    assert exact_json(client, reader, commit["citation"])["body"] == "Prefers concise answers in English."
    assert ProfileCandidate.objects.get().status == "committed"
    assert ProfileCandidate.objects.get().committed_revision == 1


def test_a_pending_candidate_does_not_replace_the_committed_profile_in_prepare(client, writer):
    first = created(propose(client, writer, "Likes Python."))
    created(post(client, f"{CANDIDATES}/{first['id']}/commit", writer, {}))
    created(propose(client, writer, "Likes Rust now."))
    content = prepared_profile(client, writer)
    assert "Likes Python." in content
    assert "Likes Rust now." not in content


def test_a_candidate_is_decided_once_a_second_decision_is_409(client, writer):
    committed = created(propose(client, writer, "Committed one."))["id"]
    rejected = created(propose(client, writer, "Rejected one."))["id"]
    created(post(client, f"{CANDIDATES}/{committed}/commit", writer, {}))
    response = post(client, f"{CANDIDATES}/{rejected}/reject", writer, {})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "rejected"

    for candidate in (committed, rejected):
        error(post(client, f"{CANDIDATES}/{candidate}/commit", writer, {}), 409, "conflict")
        error(post(client, f"{CANDIDATES}/{candidate}/reject", writer, {}), 409, "conflict")
    assert revision_count() == 1
    assert "Rejected one." not in prepared_profile(client, writer)


def test_committing_a_candidate_is_conditional_on_the_expected_head(client, writer):
    first = created(propose(client, writer, "First snapshot."))["id"]
    second = created(propose(client, writer, "Second snapshot."))["id"]
    created(post(client, f"{CANDIDATES}/{first}/commit", writer, {"expected_head_revision": 0}))

    error(post(client, f"{CANDIDATES}/{second}/commit", writer, {"expected_head_revision": 0}), 409, "conflict")
    assert ProfileCandidate.objects.get(pk=second).status == "pending"
    commit = created(post(client, f"{CANDIDATES}/{second}/commit", writer, {"expected_head_revision": 1}))
    assert commit["citation"]["revision"] == 2
    assert "Second snapshot." in prepared_profile(client, writer)


@pytest.mark.parametrize(
    "body",
    [{"expected_head_revision": True}, {"expected_head_revision": "1"}, {"expected_head_revision": 1.0}, {"x": 1}],
)
def test_a_commit_body_is_validated(client, writer, body):
    candidate = created(propose(client, writer, "Snapshot."))["id"]
    error(post(client, f"{CANDIDATES}/{candidate}/commit", writer, body), 422, "invalid_request")
    assert ProfileCandidate.objects.get().status == "pending"


def test_candidates_may_target_another_profile_artifact(client, writer):
    proposal = created(propose(client, writer, "Team profile.", artifact_id="team-profile"))
    commit = created(post(client, f"{CANDIDATES}/{proposal['id']}/commit", writer, {}))
    assert commit["citation"]["artifact_id"] == "team-profile"


# --- history ----------------------------------------------------------------------------------------


def test_memory_history_lists_revisions_newest_first_in_pages_with_added_and_retired_versions(client, writer, reader):
    writes = [
        create_entry(client, writer, "a", "alpha"),
        create_entry(client, writer, "b", "bravo"),
        update_entry(client, writer, "a", "alpha two"),
        remove_entry(client, writer, "b"),
        create_entry(client, writer, "c", "charlie"),
    ]

    pages, before = [], None
    while True:
        params = {"limit": 2} | ({"before": before} if before is not None else {})
        response = history(client, reader, **params)
        assert response.status_code == 200, response.content
        page = response.json()
        assert list(page) == ["revisions", "next_before"]
        pages.append(page["revisions"])
        before = page["next_before"]
        if before is None:
            break
    assert [[item["citation"]["revision"] for item in page] for page in pages] == [[5, 4], [3, 2], [1]]

    items = {item["citation"]["revision"]: item for page in pages for item in page}
    for number, write in enumerate(writes, start=1):
        item = items[number]
        assert item["citation"] == {k: v for k, v in write["citation"].items() if not k.startswith("entry")}
        assert item["content_sha256"] == write["content_sha256"]
        assert item["author"] == "api-key:writer-host"
        assert item["created_at"]

    def changes(number: int, key: str) -> list[tuple[str, str, str]]:
        return [(v["id"], v["version"], v["body"]) for v in items[number][key]]

    assert (changes(1, "added"), changes(1, "retired")) == ([("a", "a-v1", "alpha")], [])
    assert (changes(3, "added"), changes(3, "retired")) == ([("a", "a-v2", "alpha two")], [("a", "a-v1", "alpha")])
    assert (changes(4, "added"), changes(4, "retired")) == ([], [("b", "b-v1", "bravo")])
    assert (changes(5, "added"), changes(5, "retired")) == ([("c", "c-v1", "charlie")], [])
    assert items[3]["added"][0]["content_sha256"] == sha256("alpha two")


def test_history_of_a_single_text_family_has_no_entry_lists_and_defaults_to_twenty_newest(client, writer):
    for i in range(1, 23):
        created(post(client, EXPERIENCE, writer, {"scope_id": SCOPE, "artifact_id": "exp", "body": f"take {i}"}))
    page = history(client, writer, family="experience", artifact_id="exp").json()
    assert [item["citation"]["revision"] for item in page["revisions"]] == list(range(22, 2, -1))
    assert page["next_before"] == 3
    assert all(set(item) == {"citation", "content_sha256", "author", "created_at"} for item in page["revisions"])
    assert page["revisions"][0]["content_sha256"] == sha256("take 22")
    rest = history(client, writer, family="experience", artifact_id="exp", before=3).json()
    assert [item["citation"]["revision"] for item in rest["revisions"]] == [2, 1]
    assert rest["next_before"] is None


def test_history_needs_read_on_the_scope_and_an_existing_artifact(client, scope, writer, stranger):
    create_entry(client, writer, "a", "alpha")
    error(history(client, None), 401, "unauthenticated")
    hidden = history(client, stranger)
    error(hidden, 404, "not_found")
    unknown = client.get(
        HISTORY, data={"scope_id": "project:nope", "family": "memory", "artifact_id": "memory"}, **auth(stranger)
    )
    assert hidden.content == unknown.content
    error(history(client, writer, artifact_id="no-such-memory"), 404, "not_found")


@pytest.mark.parametrize(
    "params",
    [{"limit": 0}, {"limit": 101}, {"limit": "x"}, {"before": 0}, {"family": "widgets"}, {"colour": "red"}],
)
def test_history_parameters_are_validated(client, writer, params):
    create_entry(client, writer, "a", "alpha")
    error(history(client, writer, **params), 422, "invalid_request")


# --- recall and exact reads see writes at once ------------------------------------------------------


def test_recall_sees_a_memory_write_as_soon_as_it_commits_and_cites_it_exactly(client, writer, reader):
    assert legacy_items(client, reader, "zebra crossing") == []
    first = create_entry(client, writer, "z", "The zebra crossing is on Main Street.")
    items = legacy_items(client, reader, "zebra crossing")
    assert [(i["artifact"], i["entry"], i["body"]) for i in items] == [
        ({"id": "memory", "revision": 1}, {"id": "z", "version": "z-v1"}, "The zebra crossing is on Main Street.")
    ]
    assert first["citation"]["revision"] == items[0]["artifact"]["revision"]

    update_entry(client, writer, "z", "The zebra crossing moved to Elm Street.")
    create_entry(client, writer, "other", "Unrelated note about lunch.")
    items = legacy_items(client, reader, "zebra crossing")
    # A recalled entry cites the artifact's head revision at recall time and its live version.
    assert [(i["artifact"], i["entry"], i["body"]) for i in items] == [
        ({"id": "memory", "revision": 3}, {"id": "z", "version": "z-v2"}, "The zebra crossing moved to Elm Street.")
    ]
    cited = memory_citation("z", "z-v2", 3)
    assert exact_json(client, reader, cited)["entry"]["body"] == "The zebra crossing moved to Elm Street."

    remove_entry(client, writer, "z")
    assert legacy_items(client, reader, "zebra crossing") == []
    # Every citation recall ever gave still resolves to its exact bytes.
    assert exact_json(client, reader, memory_citation("z", "z-v1", 1))["entry"]["body"].endswith("Main Street.")
    assert exact_json(client, reader, cited)["entry"]["body"].endswith("Elm Street.")


def test_recall_sees_the_newest_experience_and_topic_memory_revision_only(client, writer, reader):
    created(post(client, EXPERIENCE, writer, {"scope_id": SCOPE, "artifact_id": "exp", "body": "Kiwi harvest failed."}))
    created(post(client, EXPERIENCE, writer, {"scope_id": SCOPE, "artifact_id": "exp", "body": "Kiwi harvest fixed."}))
    topic = {"scope_id": SCOPE, "artifact_id": "t", "title": "Kiwi", "summary": "Fruit planning."}
    created(post(client, TOPIC, writer, topic))
    created(post(client, TOPIC, writer, {**topic, "summary": "Kiwi planning, revised."}))

    items = legacy_items(client, reader, "kiwi harvest")
    by_family = {i["family"]: i for i in items}
    assert set(by_family) == {"experience", "topic_memory"}
    assert by_family["experience"]["artifact"] == {"id": "exp", "revision": 2}
    assert by_family["experience"]["body"] == "Kiwi harvest fixed."
    assert by_family["topic_memory"]["artifact"] == {"id": "t", "revision": 2}
    assert by_family["topic_memory"]["body"] == "Title: Kiwi\nSummary: Kiwi planning, revised."
    old = {"scope_id": SCOPE, "family": "experience", "artifact_id": "exp", "revision": 1}
    assert exact_json(client, reader, old)["body"] == "Kiwi harvest failed."


def test_the_head_state_of_every_memory_revision_stays_readable_after_later_writes(client, writer):
    expected_live: dict[int, dict[str, str]] = {}
    live: dict[str, str] = {}
    steps = [
        ("create", "a", "1"),
        ("create", "b", "2"),
        ("update", "a", "3"),
        ("remove", "b", None),
        ("create", "b", "5"),
    ]
    for action, entry_id, body in steps:
        if action == "create":
            result = create_entry(client, writer, entry_id, body)
        elif action == "update":
            result = update_entry(client, writer, entry_id, body)
        else:
            result = remove_entry(client, writer, entry_id)
        if body is None:
            live.pop(entry_id)
        else:
            live[entry_id] = body
        expected_live[result["citation"]["revision"]] = dict(live)

    for revision, entries in expected_live.items():
        read = exact_json(
            client, writer, {"scope_id": SCOPE, "family": "memory", "artifact_id": "memory", "revision": revision}
        )
        assert {e["id"]: e["body"] for e in read["entries"]} == entries


@pytest.mark.parametrize("body", [{"reason": "no"}, [1], {"expected_head_revision": 0}])
def test_a_reject_body_is_empty_or_refused(client, writer, body):
    candidate = created(propose(client, writer, "Snapshot."))["id"]
    error(post(client, f"{CANDIDATES}/{candidate}/reject", writer, body), 422, "invalid_request")
    assert ProfileCandidate.objects.get().status == "pending"
    response = client.post(f"{CANDIDATES}/{candidate}/reject", content_type="application/json", **auth(writer))
    assert response.status_code == 200, response.content


def test_an_entry_id_at_the_length_limit_gets_a_generated_version_id_that_fits_and_resolves(client, writer):
    entry_id = "é" * limits.MAX_IDENTIFIER_CHARACTERS
    first = create_entry(client, writer, entry_id, "first")["citation"]
    second = update_entry(client, writer, entry_id, "second")["citation"]
    assert len(first["entry_version"]) <= limits.MAX_IDENTIFIER_CHARACTERS
    assert len(second["entry_version"]) <= limits.MAX_IDENTIFIER_CHARACTERS
    assert first["entry_version"] != second["entry_version"]
    assert exact_json(client, writer, first)["entry"]["body"] == "first"
    assert exact_json(client, writer, second)["entry"]["body"] == "second"


def test_generated_version_ids_skip_ids_taken_in_the_same_revision_and_before(scope):
    # Several writes in one revision (as fixtures do): a generated id never repeats an explicit one.
    W = services.EntryVersionWrite
    result = services.memory_revision_create(
        scope=scope, artifact_id="memory", writes=[W("a", "b-v1", "explicit"), W("b", None, "generated")], author="t"
    )
    assert sorted((v.entry_id, v.version_id) for v in result.added) == [("a", "b-v1"), ("b", "b-v2")]
    for n in range(3, 7):
        result = services.memory_revision_create(
            scope=scope, artifact_id="memory", writes=[W("b", None, f"{n}")], author="t"
        )
        assert result.added[0].version_id == f"b-v{n}"
