"""A memory entry version's conflict slot (``conflict_key``, seeds/003) is part of the immutable version: no path
changes it once stored, whether it sets, replaces or clears one. Each case runs on the current engine (CI runs
SQLite and PostgreSQL); the raw SQL runs as the least-privilege runtime role of test_history_attacks."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from artifacts import services
from artifacts.models import Artifact, MemoryEntryVersion
from tests.api.test_history_attacks import runtime  # noqa: F401 - the runtime role fixture

SLOT = "preference:automation-language"
W = services.EntryVersionWrite


@pytest.fixture
def slotted(runtime):  # noqa: F811 - the imported fixture
    """Memory revisions 1-2: "lang" in SLOT, then "note" without a slot; committed."""
    scope = services.scope_create(scope_id="project:slotted")
    services.memory_revision_create(
        scope=scope, artifact_id="memory", writes=[W("lang", "lang-v1", "Use Python.", conflict_key=SLOT)], author="t"
    )
    services.memory_revision_create(
        scope=scope, artifact_id="memory", writes=[W("note", "note-v1", "A note.")], author="t"
    )
    return scope


def slots() -> dict[str, str | None]:
    return dict(MemoryEntryVersion.objects.order_by("pk").values_list("version_id", "conflict_key"))


STORED = {"lang-v1": SLOT, "note-v1": None}
CHANGES = [("lang-v1", "preference:other"), ("lang-v1", None), ("lang-v1", ""), ("note-v1", SLOT)]
"""A slot replaced, cleared, blanked, and given to a version stored without one."""


@pytest.mark.parametrize(("version", "value"), CHANGES)
def test_the_orm_cannot_change_a_stored_slot(slotted, version, value):
    with pytest.raises(DatabaseError), transaction.atomic():
        MemoryEntryVersion.objects.filter(version_id=version).update(conflict_key=value)
    row = MemoryEntryVersion.objects.get(version_id=version)
    row.conflict_key = value
    with pytest.raises(DatabaseError), transaction.atomic():
        row.save()
    assert slots() == STORED


@pytest.mark.parametrize(("version", "value"), CHANGES)
def test_raw_sql_cannot_change_a_stored_slot(runtime, slotted, version, value):  # noqa: F811
    runtime.refused(
        ("UPDATE artifacts_memoryentryversion SET conflict_key = %s WHERE version_id = %s", [value, version])
    )
    assert slots() == STORED


@pytest.mark.parametrize(("version", "value"), CHANGES)
def test_deferred_constraints_do_not_let_a_slot_change(runtime, slotted, version, value):  # noqa: F811
    # The guards are BEFORE triggers, not deferrable constraints: deferring every constraint to the commit
    # changes nothing.
    runtime.refused(
        runtime.defer_foreign_keys,
        ("UPDATE artifacts_memoryentryversion SET conflict_key = %s WHERE version_id = %s", [value, version]),
    )
    assert slots() == STORED


def test_retiring_a_slotted_version_cannot_clear_its_slot(runtime, slotted):  # noqa: F811
    # The one allowed change (retirement by the revision being written) with the slot cleared on the way.
    artifact = Artifact.objects.get(scope=slotted, family="memory")
    runtime.refused(
        (
            "INSERT INTO artifacts_artifactrevision (artifact_id, revision, content_sha256, author, created_at, "
            "entries_retired) VALUES (%s, 3, %s, 'raw', %s, 1)",
            [artifact.pk, "0" * 64, timezone.now()],
        ),
        ("UPDATE artifacts_artifact SET head_revision = 3 WHERE id = %s", [artifact.pk]),
        "UPDATE artifacts_memoryentryversion SET retired_in_revision = 3, retired_ordinal = 1, conflict_key = NULL "
        "WHERE version_id = 'lang-v1'",
    )
    assert slots() == STORED


@pytest.mark.parametrize("value", ["preference:other", None])
def test_sqlite_replace_cannot_rewrite_a_slot(runtime, slotted, value):  # noqa: F811
    if connection.vendor != "sqlite":
        pytest.skip("REPLACE is SQLite's (PostgreSQL's ON CONFLICT DO UPDATE is an UPDATE, refused as above)")
    row = MemoryEntryVersion.objects.get(version_id="lang-v1")
    runtime.refused(
        (
            "REPLACE INTO artifacts_memoryentryversion (id, artifact_id, entry_id, version_id, body, content_sha256, "
            "conflict_key, born_in_revision, born_ordinal, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                row.pk,
                row.artifact_id,
                row.entry_id,
                row.version_id,
                row.body,
                row.content_sha256,
                value,
                row.born_in_revision,
                row.born_ordinal,
                row.created_at,
            ],
        )
    )
    assert slots() == STORED


def test_the_admin_shows_a_slot_and_cannot_change_it(slotted, staff_client):
    row = MemoryEntryVersion.objects.get(version_id="lang-v1")
    url = reverse("admin:artifacts_memoryentryversion_change", args=[row.pk])
    page = staff_client.get(url)
    assert page.status_code == 200
    assert SLOT in page.content.decode()
    assert staff_client.post(url, {"conflict_key": "preference:other"}).status_code == 403
    assert slots() == STORED
