"""Nothing above the head (issue 51, item 1): no revision or entry version is ever stored, read or written over above
its artifact's head.

An attack review found that, as the least-privilege runtime role (or through the server's own connection to the
SQLite file), ``INSERT … SELECT id, head_revision + 1, 'PLANTED lesson', … FROM artifacts_artifact`` was accepted
without moving the head: the exact read of revision 2 served it, the history listed it, every later write of the
artifact answered 500 (its number was taken) and verify_history reported nothing (it walked up to the head only).
Now the commit refuses it (PostgreSQL: a deferred constraint trigger; SQLite: a deferred foreign key); a row a
superuser leaves above the head with the guards lifted is served by no read, makes a write answer 409, not 500, and
verify_history names it. Each case runs on the current engine (CI runs SQLite and PostgreSQL), committed: the refusal
is the commit's.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.utils import timezone

from artifacts import services
from artifacts.management.commands import verify_history
from artifacts.models import Artifact
from artifacts.selectors import CitationNotFound, citation_resolve
from tests.api.factories import add_experience, add_memory, auth, make_key, read_revision
from tests.api.test_history_attacks import Runtime, runtime, stored  # noqa: F401 - the runtime role fixture
from tests.api.test_verify_history import triggers_lifted, verify
from vocabulary.citation import Citation

SCOPE = "project:planted"
HISTORY_URL = "/v1/artifacts/history"


@pytest.fixture
def history(committed_db):
    """Experience "exp-plant" at revision 1 and memory revision 1 (e1, e2), written by the services and committed."""
    scope = services.scope_create(scope_id=SCOPE)
    add_experience(scope, "exp-plant", "lesson")
    add_memory(scope, {"e1": "first", "e2": "second"})
    return scope


@pytest.fixture
def key(history) -> str:
    return make_key(read=[history], write=[history])


def artifact(family: str, artifact_id: str) -> Artifact:
    return Artifact.objects.get(scope__scope_id=SCOPE, family=family, artifact_id=artifact_id)


def planted_insert(role: Runtime) -> str:
    """The attack as it was found, on this engine."""
    now = "now()" if role.pg is not None else "strftime('%Y-%m-%d %H:%M:%f', 'now')"
    return (
        "INSERT INTO artifacts_artifactrevision (artifact_id, revision, body, content_sha256, author, created_at) "
        f"SELECT id, head_revision + 1, 'PLANTED lesson', 'x', 'api-key:someone', {now} FROM artifacts_artifact "
        "WHERE artifact_id = 'exp-plant'"
    )


def insert_revision(target: Artifact, number: int, *, born: int = 0, retired: int = 0) -> tuple[str, list]:
    return (
        "INSERT INTO artifacts_artifactrevision (artifact_id, revision, body, content_sha256, author, created_at, "
        "entries_born, entries_retired) VALUES (%s, %s, 'PLANTED lesson', 'x', 'api-key:someone', %s, %s, %s)",
        [target.pk, number, timezone.now(), born, retired],
    )


def move_head(target: Artifact, number: int) -> tuple[str, list]:
    return "UPDATE artifacts_artifact SET head_revision = %s WHERE id = %s", [number, target.pk]


def exact(client, key: str, family: str, artifact_id: str, revision: int, **entry):
    return read_revision(
        client, key, scope_id=SCOPE, family=family, artifact_id=artifact_id, revision=revision, **entry
    )


def history_revisions(client, key: str, family: str, artifact_id: str) -> list[dict]:
    response = client.get(
        HISTORY_URL, data={"scope_id": SCOPE, "family": family, "artifact_id": artifact_id}, **auth(key)
    )
    assert response.status_code == 200, response.content
    page = response.json()
    assert page["next_before"] is None
    return page["revisions"]


def write_experience(client, key: str, body: str):
    return client.post(
        "/v1/experiences/revisions",
        {"scope_id": SCOPE, "artifact_id": "exp-plant", "body": body},
        content_type="application/json",
        **auth(key),
    )


def write_memory(client, key: str, entry_id: str, body: str):
    return client.post(
        "/v1/memory/entries",
        {"scope_id": SCOPE, "entry_id": entry_id, "body": body},
        content_type="application/json",
        **auth(key),
    )


# --- the guards: the commit refuses a revision left above its head ----------------------------------------


@pytest.mark.parametrize("deferred", [False, True], ids=["as-found", "checks-deferred"])
def test_the_planted_revision_is_refused_as_the_runtime_role(client, runtime, history, key, deferred):  # noqa: F811
    before = stored()
    preamble = [runtime.defer_foreign_keys] if deferred else []
    runtime.refused(*preamble, planted_insert(runtime))
    assert stored() == before
    assert exact(client, key, "experience", "exp-plant", 2).status_code == 404
    # The artifact is not blocked: the next write is revision 2.
    response = write_experience(client, key, "lesson two")
    assert response.status_code == 201, response.content
    assert exact(client, key, "experience", "exp-plant", 2).json()["body"] == "lesson two"


def test_a_revision_left_above_the_head_by_a_longer_transaction_is_refused(runtime, history):  # noqa: F811
    target = artifact("experience", "exp-plant")
    before = stored()
    runtime.refused(insert_revision(target, 2), move_head(target, 2), insert_revision(target, 3))
    assert stored() == before
    # The services' order (the revision, then the head moved onto it) commits, twice in one transaction too.
    runtime.run(insert_revision(target, 2), move_head(target, 2), insert_revision(target, 3), move_head(target, 3))
    assert artifact("experience", "exp-plant").head_revision == 3


# --- rows a superuser leaves above the head (the guards lifted) -------------------------------------------


def plant_experience() -> None:
    target = artifact("experience", "exp-plant")
    with triggers_lifted() as cursor:
        cursor.execute(*insert_revision(target, 2))


def test_a_revision_above_the_head_is_not_read_listed_or_written_over(client, history, key):
    plant_experience()
    unknown = exact(client, key, "experience", "exp-plant", 3)
    planted = exact(client, key, "experience", "exp-plant", 2)
    assert planted.status_code == unknown.status_code == 404
    assert planted.json() == unknown.json()
    assert exact(client, key, "experience", "exp-plant", 1).json()["body"] == "lesson"
    assert [r["citation"]["revision"] for r in history_revisions(client, key, "experience", "exp-plant")] == [1]
    with pytest.raises(CitationNotFound, match=r"no revision 2 .*\(its revisions are 1–1\)"):
        citation_resolve(citation=Citation(SCOPE, "experience", "exp-plant", 2))
    before = stored()
    response = write_experience(client, key, "lesson two")
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "conflict"
    assert "above its head revision 1" in response.json()["error"]["message"]
    assert stored() == before


def plant_birth(cursor, target: Artifact, ordinal: int = 9) -> str:
    """Entry version "p" born in revision 2 (above the head, 1); the problem verify_history names."""
    cursor.execute(
        "INSERT INTO artifacts_memoryentryversion (artifact_id, entry_id, version_id, body, content_sha256, "
        "born_in_revision, born_ordinal, created_at) VALUES (%s, 'p', 'p-v1', 'PLANTED', 'x', 2, %s, %s)",
        [target.pk, ordinal, timezone.now()],
    )
    return 'entry "p"@"p-v1" born in a revision above the head (revision 1)'


def plant_retirement(cursor, target: Artifact, ordinal: int = 9) -> str:
    """Entry "e1" retired in revision 2 (above the head, 1); the problem verify_history names."""
    cursor.execute(
        "UPDATE artifacts_memoryentryversion SET retired_in_revision = 2, retired_ordinal = %s "
        "WHERE artifact_id = %s AND entry_id = 'e1'",
        [ordinal, target.pk],
    )
    return 'entry "e1"@"e1-v1" retired in a revision above the head (revision 1)'


def plant_memory_revision() -> list[str]:
    """Memory revision 2 above the head, birthing "p" and retiring "e1"; the problems verify_history names."""
    target = artifact("memory", "memory")
    with triggers_lifted() as cursor:
        cursor.execute(*insert_revision(target, 2, born=1, retired=1))
        return [
            "revision stored above the head (revision 1)",
            plant_birth(cursor, target, 1),
            plant_retirement(cursor, target, 1),
        ]


def test_memory_rows_above_the_head_are_not_read_listed_or_written_over(client, history, key):
    plant_memory_revision()
    assert exact(client, key, "memory", "memory", 2).status_code == 404
    assert exact(client, key, "memory", "memory", 2, entry_id="p", entry_version="p-v1").status_code == 404
    head = exact(client, key, "memory", "memory", 1).json()
    assert [(e["id"], e["version"]) for e in head["entries"]] == [("e1", "e1-v1"), ("e2", "e2-v1")]
    (only,) = history_revisions(client, key, "memory", "memory")
    assert only["citation"]["revision"] == 1 and only["retired"] == []
    assert [e["id"] for e in only["added"]] == ["e1", "e2"]
    before = stored()
    response = write_memory(client, key, "e3", "third")
    assert response.status_code == 409, response.content
    assert stored() == before


@pytest.mark.parametrize("plant", [plant_birth, plant_retirement], ids=["born", "retired"])
def test_an_entry_version_changed_above_the_head_is_never_adopted_by_the_next_write(client, history, key, plant):
    # No revision is planted: the next write's number (2) is free, and would make the planted birth (or retirement)
    # part of the revision it writes.
    with triggers_lifted() as cursor:
        problem = plant(cursor, artifact("memory", "memory"))
    before = stored()
    response = write_memory(client, key, "e3", "third")
    assert response.status_code == 409, response.content
    assert stored() == before
    assert exact(client, key, "memory", "memory", 2).status_code == 404
    ok, out, _ = verify()
    assert not ok
    assert out.splitlines()[:-1] == [f'scope "project:planted" memory:memory revision 2: {problem}']


# --- verify_history names every row above the head --------------------------------------------------------

PLANTED = 'scope "project:planted" experience:exp-plant revision 2: revision stored above the head (revision 1)'


def test_verify_history_reports_a_revision_above_the_head_with_and_without_an_anchor(history, tmp_path):
    anchor = tmp_path / "anchor.json"
    assert verify("--write-anchor", str(anchor))[0]
    plant_experience()
    for args in ((), ("--anchor", str(anchor))):
        ok, out, err = verify(*args)
        assert not ok and "history does not verify" in err
        assert out.splitlines()[:-1] == [PLANTED], args
        assert "1 problems in 1 artifacts" in out
    ok, out, _ = verify("--json", "--anchor", str(anchor))
    report = json.loads(out)
    assert not ok and report["ok"] is False
    assert [(p["family"], p["artifact_id"], p["revision"], p["problem"]) for p in report["report"]] == [
        ("experience", "exp-plant", 2, "revision stored above the head (revision 1)")
    ]


def test_verify_history_names_each_memory_row_above_the_head(history):
    problems = plant_memory_revision()
    ok, out, _ = verify()
    assert not ok
    assert out.splitlines()[:-1] == [f'scope "project:planted" memory:memory revision 2: {p}' for p in problems]
    assert "3 problems in 1 artifacts" in out


def test_verify_history_does_not_report_a_write_committed_while_it_runs(history, monkeypatch):
    # A write committed after a batch read its heads puts its rows past them, with its head: only the planted row,
    # still above the head read again afterwards, is reported.
    plant_experience()
    add_experience(history, "late", "written while verify_history runs")
    add_experience(history, "late", "again")
    walk = verify_history.history_artifact_batches

    def heads_read_before_the_write(**kwargs):
        for batch in walk(**kwargs):
            yield [dataclasses.replace(a, head_revision=1) if a.artifact_id == "late" else a for a in batch]

    monkeypatch.setattr(verify_history, "history_artifact_batches", heads_read_before_the_write)
    ok, out, _ = verify()
    assert not ok
    assert out.splitlines()[:-1] == [PLANTED]
