"""The fixture format's selection inputs (issue 35, seeds/003): a scope's ``authority`` tier and a memory entry's
``conflict_key`` slot, each checked with a clear error, stored as given, compared with what is stored like every
other immutable part, and hashed as the write service hashes them."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from artifacts.models import Artifact, ArtifactRevision, MemoryEntryVersion, Scope
from tests.api.test_fixture_loader import DEMO, assert_refused, load, row_counts, write_fixture
from vocabulary.limits import MAX_CONFLICT_KEY_CHARACTERS

pytestmark = pytest.mark.django_db

SLOT = "preference:automation-language"


def fixture(*, authority=..., slot=SLOT, later=None) -> dict:
    scope = {"id": "project:sel", "title": "Selection"}
    if authority is not ...:
        scope["authority"] = authority
    first = {"id": "lang", "version": "lang-v1", "body": "Use Python."}
    if slot is not ...:
        first["conflict_key"] = slot
    revisions = [{"entries": [first]}]
    if later is not None:
        revisions.append({"entries": [later, {"id": "other", "version": "other-v1", "body": "Other."}]})
    return {
        "scopes": [scope],
        "artifacts": [{"scope": "project:sel", "family": "memory", "id": "memory", "revisions": revisions}],
    }


def test_a_scope_tier_and_an_entry_slot_load_as_given_and_verify(tmp_path):
    load(write_fixture(tmp_path, fixture(authority="workspace_override", later={"id": "lang", "version": "lang-v1"})))
    assert Scope.objects.get().authority == "workspace_override"
    assert MemoryEntryVersion.objects.get(version_id="lang-v1").conflict_key == SLOT
    assert MemoryEntryVersion.objects.get(version_id="other-v1").conflict_key is None
    call_command("verify_history")  # the fixture's hashes are the services' (exits 1 otherwise)
    before = row_counts()
    load(write_fixture(tmp_path, fixture(authority="workspace_override", later={"id": "lang", "version": "lang-v1"})))
    assert row_counts() == before  # idempotent


def test_a_scope_without_a_tier_gets_the_default_and_an_entry_without_a_slot_none(tmp_path):
    load(write_fixture(tmp_path, fixture(slot=...)))
    assert Scope.objects.get().authority is None
    assert MemoryEntryVersion.objects.get().conflict_key is None


@pytest.mark.parametrize("value", ["admin", "Current_Turn", "", None, 1, ["current_turn"]])
def test_an_unknown_tier_is_refused_with_its_path(tmp_path, value):
    assert_refused(
        tmp_path,
        fixture(authority=value),
        "scopes[0].authority",
        "must be current_turn, workspace_override or user_default",
    )


@pytest.mark.parametrize(
    ("slot", "message"),
    [
        ("", "must not be empty"),
        ("  ", "not whitespace"),
        ("a\nb", "control character U+000A"),
        ("x" * (MAX_CONFLICT_KEY_CHARACTERS + 1), f"at most {MAX_CONFLICT_KEY_CHARACTERS}"),
        (None, "must be a string"),
        (3, "must be a string"),
    ],
)
def test_a_bad_slot_is_refused_with_its_path(tmp_path, slot, message):
    assert_refused(tmp_path, fixture(slot=slot), "artifacts[0].revisions[0].entries[0].conflict_key", message)


def test_a_version_listed_again_cannot_change_its_slot(tmp_path):
    later = {"id": "lang", "version": "lang-v1", "conflict_key": "preference:other"}
    assert_refused(
        tmp_path,
        fixture(later=later),
        "artifacts[0].revisions[1].entries[0].conflict_key",
        "a version's slot is immutable",
    )


def test_a_version_listed_again_may_repeat_its_slot(tmp_path):
    load(write_fixture(tmp_path, fixture(later={"id": "lang", "version": "lang-v1", "conflict_key": SLOT})))
    assert Artifact.objects.get().head_revision == 2


@pytest.mark.parametrize("slot", ["preference:other", ...])  # another slot, or none
def test_a_stored_slot_is_never_contradicted(tmp_path, slot):
    load(write_fixture(tmp_path, fixture()))
    assert_refused(
        tmp_path,
        fixture(slot=slot),
        "artifacts[0].revisions[0].entries[0].conflict_key",
        f'differs from the stored conflict_key of version "lang-v1" ("{SLOT}"); a version\'s slot is immutable',
    )


def test_a_stored_tier_is_not_changed_by_a_fixture_but_its_effective_value_may_be_restated(tmp_path):
    load(write_fixture(tmp_path, fixture()))  # no tier: the default
    load(write_fixture(tmp_path, fixture(authority="user_default")))  # the same effective tier
    assert_refused(
        tmp_path,
        fixture(authority="current_turn"),
        "scopes[0].authority",
        'is stored with the authority "user_default"; a fixture does not change the tier',
    )
    assert Scope.objects.get().authority is None


def test_the_demo_teaches_one_slot_across_the_three_tiers():
    load(DEMO)
    tiers = dict(Scope.objects.values_list("scope_id", "authority"))
    assert (tiers["user:alice"], tiers["workspace:automation"], tiers["turn:automation-task"]) == (
        "user_default",
        "workspace_override",
        "current_turn",
    )
    assert tiers["project:demo"] is None
    turn = Scope.objects.get(scope_id="turn:automation-task")
    assert [r.target.scope_id for r in turn.references.order_by("position")] == ["workspace:automation", "user:alice"]
    slotted = MemoryEntryVersion.objects.filter(conflict_key=SLOT).order_by("artifact__scope__scope_id")
    assert [v.artifact.scope.scope_id for v in slotted] == [
        "turn:automation-task",
        "user:alice",
        "workspace:automation",
    ]
    assert ArtifactRevision.objects.filter(artifact__scope__scope_id="turn:automation-task").count() == 1
