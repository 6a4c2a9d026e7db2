"""``manage.py verify_history`` reports a revision deleted from the middle of a history (issue 51, item 7c).

A superuser who lifts the guards (as ``tests/api/test_verify_history.py`` does) and deletes revision 2 of 3 leaves
revisions 1 and 3: the command names the gap in the revision numbers. One who also recomputes revision 3's chain
hash from revision 1 leaves every row agreeing with its predecessor: the gap is then the only thing left to see, and
the command must still exit 1 for it alone. Each case runs on the current engine (CI runs SQLite and PostgreSQL).
"""

from __future__ import annotations

import json

import pytest

from artifacts import services
from artifacts.models import ArtifactRevision, RecallDocument
from tests.api.factories import make_scope
from tests.api.test_verify_history import revision, triggers_lifted, verify
from vocabulary import history as hashes

pytestmark = pytest.mark.django_db

GAP = 'scope "project:gap" experience:x revision 3: revision number (stored 3, recomputed 2)'


@pytest.fixture
def scope():
    scope = make_scope("project:gap")
    for body in ("lesson one", "lesson two", "lesson three"):
        services.experience_revision_create(scope=scope, artifact_id="x", body=body, author="test")
    services.experience_revision_create(scope=scope, artifact_id="y", body="untouched", author="test")
    return scope


def delete_revision(cursor, target: ArtifactRevision) -> None:
    """Delete one revision row with raw SQL (the guards lifted), and the recall rows that point to it first."""
    documents = list(RecallDocument.objects.filter(revision=target).values_list("pk", flat=True))
    for table in ("artifacts_recallposting", "artifacts_recallvector"):
        for document in documents:
            cursor.execute(f"DELETE FROM {table} WHERE document_id = %s", [document])  # noqa: S608 - fixed names
    for document in documents:
        cursor.execute("DELETE FROM artifacts_recalldocument WHERE id = %s", [document])
    cursor.execute("DELETE FROM artifacts_artifactrevision WHERE id = %s", [target.pk])


def relink(cursor, target: ArtifactRevision, previous: ArtifactRevision) -> None:
    """Recompute ``target``'s chain hash as if ``previous`` came just before it (its number kept)."""
    chain = hashes.revision_chain_sha256(
        previous_chain=previous.chain_sha256,
        scope_id="project:gap",
        family=target.artifact.family,
        artifact_id=target.artifact.artifact_id,
        revision=target.revision,
        content_sha256=target.content_sha256,
        texts_sha256=target.texts_sha256,
        author=target.author,
        created_at=target.created_at,
    )
    cursor.execute("UPDATE artifacts_artifactrevision SET chain_sha256 = %s WHERE id = %s", [chain, target.pk])


def test_the_history_verifies_before_anything_is_deleted(scope):
    ok, out, _ = verify()
    assert ok, out
    assert "checked 2 artifacts, 4 revisions, 0 entry versions: 0 problems in 0 artifacts" in out


def test_a_middle_revision_deleted_is_reported_as_a_gap(scope):
    with triggers_lifted() as cursor:
        delete_revision(cursor, revision("experience", "x", 2))
    ok, out, err = verify()
    assert not ok and "history does not verify" in err
    assert GAP in out.splitlines()
    assert "experience:x revision 3: chain_sha256 (stored " in out  # its link named revision 2's hash
    assert "experience:y" not in out


def test_a_middle_revision_deleted_and_the_chain_relinked_is_caught_by_the_gap_alone(scope):
    with triggers_lifted() as cursor:
        delete_revision(cursor, revision("experience", "x", 2))
        relink(cursor, revision("experience", "x", 3), revision("experience", "x", 1))
    ok, out, err = verify()
    assert not ok, out
    assert out.splitlines()[:-1] == [GAP]
    assert "1 problems in 1 artifacts" in out and "history does not verify" in err
    ok, out, _ = verify("--json")
    report = json.loads(out)
    assert not ok and report["ok"] is False
    assert [
        (p["family"], p["artifact_id"], p["revision"], p["problem"], p["stored"], p["computed"])
        for p in report["report"]
    ] == [("experience", "x", 3, "revision number", 3, 2)]
