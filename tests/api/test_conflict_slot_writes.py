"""A memory entry's conflict slot through the write API (issue 35, seeds/003): written exactly as given with the
entry version, read back by every exact read and the history, refused in the one error shape when it cannot be a
slot, and part of what an Idempotency-Key promises."""

from __future__ import annotations

import pytest

from artifacts import services
from artifacts.models import ArtifactRevision, MemoryEntryVersion
from tests.api.test_writes import (
    ENTRY_CREATE,
    ENTRY_UPDATE,
    HISTORY,
    SCOPE,
    auth,
    create_entry,
    error,
    exact_json,
    post,
    update_entry,
)
from vocabulary.limits import MAX_CONFLICT_KEY_CHARACTERS

pytestmark = pytest.mark.django_db

SLOT = "preference:automation-language"


@pytest.fixture
def writer():
    scope = services.scope_create(scope_id=SCOPE)
    return services.api_key_create(name="slot-writer", read_scopes=[scope], write_scopes=[scope])[1]


def entry_read(client, key, result) -> dict:
    return exact_json(client, key, result["citation"])["entry"]


def test_an_entry_written_with_a_slot_reads_back_with_it_from_every_exact_read(client, writer):
    result = create_entry(client, writer, "lang", "Use Python.", conflict_key=SLOT)
    assert entry_read(client, writer, result)["conflict_key"] == SLOT
    whole = exact_json(client, writer, {k: v for k, v in result["citation"].items() if not k.startswith("entry")})
    assert [(e["id"], e["conflict_key"]) for e in whole["entries"]] == [("lang", SLOT)]
    page = client.get(HISTORY, data={"scope_id": SCOPE, "family": "memory", "artifact_id": "memory"}, **auth(writer))
    assert page.status_code == 200
    assert [(e["id"], e["conflict_key"]) for e in page.json()["revisions"][0]["added"]] == [("lang", SLOT)]


def test_each_version_has_its_own_slot_and_the_old_one_keeps_its_own(client, writer):
    first = create_entry(client, writer, "lang", "Use Python.", conflict_key=SLOT)
    moved = update_entry(client, writer, "lang", "Use Go.", conflict_key="preference:other")
    cleared = update_entry(client, writer, "lang", "Any language.")
    assert [entry_read(client, writer, r)["conflict_key"] for r in (first, moved, cleared)] == [
        SLOT,
        "preference:other",
        None,
    ]
    page = client.get(HISTORY, data={"scope_id": SCOPE, "family": "memory", "artifact_id": "memory"}, **auth(writer))
    newest = page.json()["revisions"][0]
    assert [(e["version"], e["conflict_key"]) for e in newest["retired"]] == [("lang-v2", "preference:other")]


@pytest.mark.parametrize(
    "slot",
    [
        " Preference:Automation-Language ",  # not normalized: the selection policy compares, storage keeps
        "偏好:自动化语言",
        "x" * MAX_CONFLICT_KEY_CHARACTERS,
        "a\u00a0b",
        "\u202eevil",  # a format character is text, not a control character (the admin shows it escaped)
    ],
)
def test_a_slot_is_stored_exactly_as_given(client, writer, slot):
    result = create_entry(client, writer, "e", "text", conflict_key=slot)
    assert entry_read(client, writer, result)["conflict_key"] == slot
    assert MemoryEntryVersion.objects.get().conflict_key == slot


@pytest.mark.parametrize(
    ("slot", "message"),
    [
        ("", "blank"),
        (" ", "not whitespace"),
        ("\u3000 \u00a0", "not whitespace"),
        ("x" * (MAX_CONFLICT_KEY_CHARACTERS + 1), f"no more than {MAX_CONFLICT_KEY_CHARACTERS}"),
        ("a\tb", "U+0009"),
        ("slot\n", "U+000A"),
        ("a\x7f", "U+007F"),
        ("a\x85", "U+0085"),
        ("a\x00b", "U+0000"),
        ("a\ud800", "surrogate"),
        (None, "null"),
        (7, "valid string"),
        (["preference:x"], "valid string"),
        ({"slot": "x"}, "valid string"),
        (True, "valid string"),
    ],
)
@pytest.mark.parametrize("path", [ENTRY_CREATE, ENTRY_UPDATE])
def test_a_bad_slot_is_refused_in_the_error_shape_and_writes_nothing(client, writer, path, slot, message):
    if path == ENTRY_UPDATE:
        create_entry(client, writer, "e", "text")
    count = ArtifactRevision.objects.count()
    body = {"scope_id": SCOPE, "entry_id": "e", "body": "new text", "conflict_key": slot}
    problem = error(post(client, path, writer, body), 422, "invalid_request")
    assert [field["path"] for field in problem["fields"]] == ["conflict_key"]
    assert message in problem["fields"][0]["message"]
    assert ArtifactRevision.objects.count() == count


def test_unknown_fields_are_still_refused_beside_a_slot(client, writer):
    body = {"scope_id": SCOPE, "entry_id": "e", "body": "x", "conflict_key": SLOT, "authority": "current_turn"}
    problem = error(post(client, ENTRY_CREATE, writer, body), 422, "invalid_request")
    assert [field["path"] for field in problem["fields"]] == ["authority"]
    assert ArtifactRevision.objects.count() == 0


def test_an_idempotency_key_covers_the_slot(client, writer):
    body = {"scope_id": SCOPE, "entry_id": "e", "body": "once", "conflict_key": SLOT}
    headers = {**auth(writer), "HTTP_IDEMPOTENCY_KEY": "slot-1"}
    first = client.post(ENTRY_CREATE, body, content_type="application/json", **headers)
    assert first.status_code == 201
    again = client.post(ENTRY_CREATE, body, content_type="application/json", **headers)
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    for other in ({**body, "conflict_key": "preference:other"}, {k: v for k, v in body.items() if k != "conflict_key"}):
        refused = client.post(ENTRY_CREATE, other, content_type="application/json", **headers)
        problem = error(refused, 422, "invalid_request")
        assert problem["fields"][0]["path"] == "Idempotency-Key"
    assert ArtifactRevision.objects.count() == 1
    assert MemoryEntryVersion.objects.get().conflict_key == SLOT
