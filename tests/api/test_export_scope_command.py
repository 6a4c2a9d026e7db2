"""manage.py export_scope: everything a scope holds, as a fixture that loads into an empty database as the same history.

Export → flush → load → export gives the same bytes; every exact read over HTTP answers the same bytes after the
move; the chains verify against an anchor written before it; an SQLite database moves into the engine under test.
"""

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from artifacts import services
from artifacts.models import ProfileCandidate
from tests.api.factories import (
    AUTHOR,
    add_experience,
    add_memory,
    add_profile,
    add_topic,
    make_key,
    make_scope,
    prepare,
    propose_profile,
    read_revision,
    remove_memory,
    set_references,
    update_memory,
)
from tests.conftest import PROJECT_ROOT


def export(*scope_ids: str, **options) -> tuple[str, str]:
    """(the fixture written to stdout, the progress written to stderr)."""
    out, err = StringIO(), StringIO()
    call_command("export_scope", *scope_ids, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def load(path: Path) -> str:
    out = StringIO()
    call_command("load_context_fixtures", str(path), stdout=out)
    return out.getvalue()


def empty_database() -> None:
    """What a fresh database holds: nothing (the project's flush lifts the history guards for it; the tests that
    empty it commit for real, as an operator's database does)."""
    call_command("flush", interactive=False, verbosity=0)


def every_scope_family():
    """Two scopes holding every family, updates, removals, slots, a repeated text, and candidates of each status."""
    team = make_scope("team:tools", title="Tools")
    demo = make_scope("project:demo", title="Démo ✓")
    set_references(demo, team)
    add_memory(demo, [("indent", "Indent with four spaces.", "indent-v1"), ("review", "Review every change.", "r-v1")])
    services.memory_revision_create(
        scope=demo,
        artifact_id="memory",
        writes=[
            services.EntryVersionWrite(
                entry_id="lang", version_id=None, body="Scripts are Python 3.11.", conflict_key="preference:lang"
            )
        ],
        author="api-key:host",
    )
    update_memory(demo, "indent", "Indent with two spaces.\u2028(line separator kept)")
    remove_memory(demo, "review")
    add_memory(demo, [("zh", "发布前运行契约测试。", "zh-v1")], artifact_id="notes")
    add_experience(demo, "exp-release", "Releases go out on Tuesdays.")
    add_experience(demo, "exp-release", "Releases go out on Tuesdays.")  # the API accepts the same text again
    add_topic(demo, "topic-a", title="Releases", summary="Tuesdays.")
    add_topic(demo, "topic-a", title="Releases", summary="Tuesdays.", body="Details\n\nand more.")
    add_profile(demo, "Prefers short answers.")
    committed = propose_profile(demo, "Prefers short answers in English.")
    services.profile_candidate_commit(candidate=committed, committed_by="admin:operator")
    propose_profile(demo, "Prefers long answers.", status=ProfileCandidate.Status.REJECTED)
    propose_profile(demo, "Prefers bullet lists.")
    services.artifact_body_revision_create(
        scope=demo, family="skill", artifact_id="skill-release", body="1. Tag. 2. Push.", author=AUTHOR
    )
    add_experience(team, "exp-tools", "The tools team owns the CLI.")
    return demo, team


def citations(fixture: str) -> list[dict]:
    """Every revision and every memory entry version the fixture holds, as exact-read query parameters."""
    found = []
    for artifact in json.loads(fixture)["artifacts"]:
        cited = {"scope_id": artifact["scope"], "family": artifact["family"], "artifact_id": artifact["id"]}
        for number, revision in enumerate(artifact["revisions"], start=1):
            found.append(cited | {"revision": number})
            for entry in revision.get("add", []):
                found.append(cited | {"revision": number, "entry_id": entry["id"], "entry_version": entry["version"]})
    return found


def exact_reads(client, key: str, cited: list[dict]) -> list[bytes]:
    responses = []
    for params in cited:
        response = read_revision(client, key, **params)
        assert response.status_code == 200, (params, response.content)
        responses.append(response.content)
    return responses


def test_export_load_into_an_empty_database_and_export_again_gives_the_same_bytes(committed_db, tmp_path, client):
    demo, team = every_scope_family()
    first, _ = export("project:demo", "team:tools")
    cited = citations(first)
    key = make_key(read=[demo, team])
    before = exact_reads(client, key, cited)
    anchor = tmp_path / "anchor.json"
    call_command("verify_history", write_anchor=str(anchor), stdout=StringIO())
    (tmp_path / "scopes.json").write_text(first, encoding="utf-8")

    empty_database()
    loaded = load(tmp_path / "scopes.json")
    second, _ = export("project:demo", "team:tools")

    assert "loaded: 2 scopes (2 new)" in loaded
    assert second.splitlines() == first.splitlines()
    key = make_key(read=[services_scope("project:demo"), services_scope("team:tools")])
    assert exact_reads(client, key, cited) == before
    report = StringIO()
    call_command("verify_history", anchor=str(anchor), as_json=True, stdout=report)
    assert json.loads(report.getvalue())["ok"] is True


def services_scope(scope_id: str):
    from artifacts.selectors import scope_get

    return scope_get(scope_id=scope_id)


def test_a_prepare_after_the_move_answers_the_same_bytes(committed_db, tmp_path, client):
    demo, team = every_scope_family()
    key = make_key(read=[demo, team])
    body = {"scope_id": "project:demo", "query": "releases indent answers tools"}
    before = prepare(client, key, body)
    assert before.status_code == 200 and b"Tuesdays" in before.content
    (tmp_path / "scopes.json").write_text(export("project:demo", "team:tools")[0], encoding="utf-8")

    empty_database()
    load(tmp_path / "scopes.json")
    key = make_key(read=[services_scope("project:demo"), services_scope("team:tools")])

    assert prepare(client, key, body).content == before.content


def test_loading_an_export_again_changes_nothing(committed_db, tmp_path):
    every_scope_family()
    path = tmp_path / "scopes.json"
    path.write_text(export("project:demo", "team:tools")[0], encoding="utf-8")
    empty_database()
    load(path)

    again = load(path)

    assert "already loaded, nothing changed" in again
    assert export("project:demo", "team:tools")[0] == path.read_text(encoding="utf-8")


@pytest.mark.django_db
def test_an_export_loaded_over_a_history_written_by_another_author_is_refused_naming_the_revision(tmp_path):
    demo = make_scope("project:demo")
    add_experience(demo, "exp", "Same text.")
    path = tmp_path / "scopes.json"
    path.write_text(export("project:demo")[0].replace('"author": "tests"', '"author": "api-key:other"'), "utf-8")

    with pytest.raises(CommandError) as refused:
        load(path)

    assert 'artifacts[0].revisions[0].author: differs from stored revision 1 ("tests")' in str(refused.value)


@pytest.mark.django_db
def test_an_unknown_scope_is_a_command_error_naming_it_and_writes_no_file(tmp_path):
    make_scope("project:demo")
    output = tmp_path / "out.json"

    with pytest.raises(CommandError) as refused:
        export("project:demo", "project:missing", "project:gone", output=str(output))

    assert str(refused.value) == "nothing was exported: no such scope: project:gone, project:missing"
    assert list(tmp_path.iterdir()) == []


def test_a_long_history_is_exported_with_progress_on_stderr_and_moves_intact(committed_db, tmp_path):
    demo = make_scope("project:demo")
    for i in range(1, 151):
        add_memory(demo, [(f"e{i % 40}", f"Fact {i} about the release train.", f"e{i % 40}-v{i}")])
    for i in range(1, 51):
        add_experience(demo, f"exp-{i % 7}", f"Lesson {i}.")
    output = tmp_path / "scopes.json"

    _, progress = export("project:demo", output=str(output), progress_every=80)

    assert progress.splitlines() == [
        "scope 1/1 project:demo: 8 artifacts, 200 revisions",
        "scope 1/1 project:demo: 80/200 revisions",
        "scope 1/1 project:demo: 160/200 revisions",
        f"exported: 1 scope, 8 artifacts with 200 revisions (150 memory entry versions) and 0 candidates to {output}",
    ]
    first = output.read_bytes()
    empty_database()
    load(output)
    export("project:demo", output=str(output), verbosity=0)
    assert output.read_bytes() == first


SQLITE_HISTORY = """
import django
django.setup()
from artifacts import services
scope = services.scope_create(scope_id="project:moved", title="Moved", authority="workspace_override")
services.memory_revision_create(scope=scope, artifact_id="memory", author="api-key:host",
    writes=[services.EntryVersionWrite(entry_id="a", version_id=None, body="Ü first", conflict_key="slot:a")])
services.memory_revision_create(scope=scope, artifact_id="memory", author="api-key:host",
    writes=[services.EntryVersionWrite(entry_id="a", version_id=None, body="Ü second")])
services.topic_memory_revision_create(scope=scope, artifact_id="t", title="T", summary="S", author="admin:op")
"""


@pytest.mark.django_db
def test_a_scope_moves_from_an_sqlite_database_into_this_engine_with_the_same_bytes_and_unknown_scopes_exit_1(tmp_path):
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'old.sqlite3'}", SECRET_KEY="x" * 50)
    env["DJANGO_SETTINGS_MODULE"] = "powercontext.settings"
    manage = [sys.executable, str(PROJECT_ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, cwd=PROJECT_ROOT)
    subprocess.run([sys.executable, "-c", SQLITE_HISTORY], env=env, check=True, cwd=PROJECT_ROOT)
    exported = subprocess.run(
        [*manage, "export_scope", "project:moved", "--output", str(tmp_path / "moved.json")],
        env=env,
        check=True,
        cwd=PROJECT_ROOT,
        capture_output=True,
    )
    assert exported.stdout == b""
    unknown = subprocess.run(
        [*manage, "export_scope", "project:missing"], env=env, capture_output=True, text=True, cwd=PROJECT_ROOT
    )
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr == "CommandError: nothing was exported: no such scope: project:missing\n"

    load(tmp_path / "moved.json")

    assert export("project:moved")[0].encode() == (tmp_path / "moved.json").read_bytes()


@pytest.mark.django_db
def test_a_scope_holding_erased_text_is_refused_naming_it_and_nothing_is_written(tmp_path):
    from artifacts.services.erasure import content_erase

    demo = make_scope("project:demo")
    make_scope("project:kept")
    add_memory(demo, [("secret", "The token is hunter2.", "secret-v1")])
    content_erase(
        scope_id="project:demo",
        family="memory",
        artifact_id="memory",
        version_id="secret-v1",
        reason="pasted by mistake",
        erased_by="operator",
    )
    output = tmp_path / "out.json"

    with pytest.raises(CommandError) as refused:
        export("project:demo", "project:kept", output=str(output))

    assert str(refused.value) == (
        "nothing was exported: erased text cannot be exported yet (a fixture has no form for a blank text and its "
        "hash): project:demo (1 erasure)"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.django_db
def test_all_exports_every_scope_as_naming_each_does():
    every_scope_family()
    make_scope("project:empty")

    assert export(all=True)[0] == export("team:tools", "project:empty", "project:demo")[0]


@pytest.mark.django_db
@pytest.mark.parametrize("arguments", [(), ("project:demo", "--all")])
def test_scopes_and_all_are_one_or_the_other(arguments):
    make_scope("project:demo")

    with pytest.raises(CommandError, match=r"^name the scopes to export, or give --all \(not both\)$"):
        call_command("export_scope", *arguments, stdout=StringIO(), stderr=StringIO())
