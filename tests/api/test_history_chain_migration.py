"""Migration 0022 (issue 51, item 2): it upgrades a history whose chain verifies under encoding 1 to encoding 2, and
refuses one whose chain does not, naming the first bad row and writing nothing.

Each test takes the test database back to 0021 (the reverse step writes the encoding 1 chains again and drops
``texts_sha256``), then forward again, with Django's migration executor; the database is migrated to the latest state
afterwards whatever happens. Runs on the current engine (CI runs SQLite and PostgreSQL).
"""

from __future__ import annotations

import importlib
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

from artifacts import services
from artifacts.management.commands import verify_history
from artifacts.models import Artifact, ArtifactRevision
from tests.api.factories import add_memory, add_topic, make_scope, update_memory
from tests.api.test_verify_history import recompute_chain, triggers_lifted, verify

APP = "artifacts"
UPGRADE = "0022_history_chain_covers_reads"
BEFORE = "0021_erasure_scope_bound"
MIGRATION = importlib.import_module(f"artifacts.migrations.{UPGRADE}")


def migrate(name: str | None) -> None:
    """The app migrated to ``name`` (None: its latest migration)."""
    executor = MigrationExecutor(connection)
    target = name or executor.loader.graph.leaf_nodes(APP)[0][1]
    executor.migrate([(APP, target)])


def applied() -> bool:
    return (APP, UPGRADE) in MigrationRecorder(connection).applied_migrations()


def stored() -> dict[int, tuple[str, str | None]]:
    """Each revision's (chain_sha256, texts_sha256 or None where the column does not exist)."""
    with connection.cursor() as cursor:
        columns = [c.name for c in connection.introspection.get_table_description(cursor, "artifacts_artifactrevision")]
        texts = "texts_sha256" if "texts_sha256" in columns else "NULL"
        cursor.execute(f"SELECT id, chain_sha256, {texts} FROM artifacts_artifactrevision")  # noqa: S608
        return {pk: (chain, texts) for pk, chain, texts in cursor.fetchall()}


@pytest.fixture
def history(committed_db):
    """A history of every family, with a slot, a retirement and texts, written by the services (encoding 2); the
    database is back at the latest migration after the test."""
    scope = make_scope("project:upgraded")
    add_memory(scope, {"e1": "first", "e2": "second"})
    update_memory(scope, "e1", "first, revised")
    services.experience_revision_create(scope=scope, artifact_id="x", body="lesson one", author="test")
    services.experience_revision_create(scope=scope, artifact_id="x", body="lesson two", author="test")
    add_topic(scope, "t", title="Topic", summary="summary", body="detail")
    services.artifact_body_revision_create(scope=scope, family="skill", artifact_id="s", body="how", author="test")
    written = stored()
    try:
        yield written
    finally:
        migrate(None)


def test_the_upgrade_verifies_encoding_1_and_writes_what_the_services_write(history):
    migrate(BEFORE)
    downgraded = stored()
    assert set(downgraded) == set(history)
    assert all(downgraded[pk][0] != history[pk][0] and downgraded[pk][1] is None for pk in history)

    migrate(UPGRADE)

    assert stored() == history
    ok, out, _ = verify()
    assert ok, out


def test_the_upgrade_refuses_a_history_whose_chain_does_not_verify_and_writes_nothing(history):
    target = ArtifactRevision.objects.get(artifact__artifact_id="x", revision=2).pk
    migrate(BEFORE)
    downgraded = stored()
    with triggers_lifted() as cursor:
        cursor.execute("UPDATE artifacts_artifactrevision SET chain_sha256 = %s WHERE id = %s", ["f" * 64, target])

    with pytest.raises(MIGRATION.HistoryDoesNotVerify) as refused:
        migrate(UPGRADE)

    message = str(refused.value)
    assert "scope 'project:upgraded' experience:'x' revision 2" in message
    assert f"row id {target}" in message and "does not verify under encoding 1" in message
    assert "f" * 64 in message and "verify_history" in message
    assert not applied()
    assert stored() == {**downgraded, target: ("f" * 64, None)}  # nothing written, the column not added

    with triggers_lifted() as cursor:  # repaired: the upgrade goes through
        cursor.execute(
            "UPDATE artifacts_artifactrevision SET chain_sha256 = %s WHERE id = %s", [downgraded[target][0], target]
        )
    migrate(UPGRADE)
    assert applied() and stored() == history


def test_the_upgrade_refuses_a_history_with_a_gap(history):
    target = ArtifactRevision.objects.get(artifact__artifact_id="x", revision=1).pk
    migrate(BEFORE)
    with triggers_lifted() as cursor:
        cursor.execute("SELECT * FROM artifacts_artifactrevision WHERE id = %s", [target])
        columns, row = [c[0] for c in cursor.description], cursor.fetchone()
        cursor.execute("DELETE FROM artifacts_artifactrevision WHERE id = %s", [target])

    with pytest.raises(MIGRATION.HistoryDoesNotVerify, match="experience:'x' revision 2 .* follows revision 0"):
        migrate(UPGRADE)
    assert not applied()

    with triggers_lifted() as cursor:  # put back, so that the database migrates to its latest state again
        marks = ", ".join(["%s"] * len(columns))
        cursor.execute(f"INSERT INTO artifacts_artifactrevision ({', '.join(columns)}) VALUES ({marks})", row)  # noqa: S608


def test_an_erased_revision_upgrades_and_still_verifies_as_erased(history):
    erased = ArtifactRevision.objects.get(artifact__artifact_id="t", revision=1).pk
    call_command(
        "erase",
        *("--scope", "project:upgraded", "--family", "topic_memory", "--artifact", "t", "--revision", "1"),
        *("--reason", "test", "--by", "operator:test"),
        stdout=None,
    )
    migrate(BEFORE)
    migrate(UPGRADE)

    after = stored()
    # The blanked texts are all the upgrade can hash: the erased revision's texts hash and chain are new ones.
    assert after[erased] != history[erased]
    assert {pk: value for pk, value in after.items() if pk != erased} == {
        pk: value for pk, value in history.items() if pk != erased
    }
    ok, out, _ = verify()
    assert ok, out
    assert "erasure #1 (revision)" in out and "0 problems" in out


def encoding_1_anchor(path) -> None:
    """An anchor as verify_history wrote it before 0022 (format v1: each head's encoding 1 chain hash), from the rows
    as 0021 stores them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.scope_id, a.family, a.artifact_id, a.head_revision, r.chain_sha256 FROM artifacts_artifact a "
            "JOIN artifacts_scope s ON s.id = a.scope_id JOIN artifacts_artifactrevision r "
            "ON r.artifact_id = a.id AND r.revision = a.head_revision ORDER BY a.id"
        )
        heads = [list(row) for row in cursor.fetchall()]
    document = {
        "format": verify_history.ENCODING_1_ANCHOR_FORMAT,
        "heads": heads,
        "digest": verify_history.anchor_digest(heads),
    }
    path.write_text(json.dumps(document), encoding="utf-8")


def test_an_anchor_written_before_the_upgrade_still_verifies_the_history_and_catches_a_rewrite(history, tmp_path):
    anchor = tmp_path / "anchor-before-0022.json"
    migrate(BEFORE)
    encoding_1_anchor(anchor)
    migrate(UPGRADE)
    ok, out, _ = verify("--anchor", str(anchor))
    assert ok, out

    recompute_chain(Artifact.objects.get(artifact_id="x"), "forged")  # every encoding 2 hash agrees again
    assert verify()[0]
    ok, out, _ = verify("--anchor", str(anchor))
    assert not ok and "experience:x revision 2: chain_sha256 at the anchored head (stored " in out
