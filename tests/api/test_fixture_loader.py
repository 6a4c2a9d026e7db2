"""load_context_fixtures: the golden and demo fixtures load, reloads change nothing, bad input writes nothing."""

import copy
import json
import os
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError

from artifacts import services
from artifacts.fixtures import FIXTURE_AUTHOR
from artifacts.models import (
    ApiKey,
    ApiKeyGrant,
    Artifact,
    ArtifactRevision,
    ContextReference,
    MemoryEntryVersion,
    ProfileCandidate,
    Scope,
)
from tests import waits
from tests.conftest import GOLDEN, GOLDEN_KEY, PROJECT_ROOT, golden_json
from vocabulary.limits import MAX_SCOPE_REFERENCES
from vocabulary.text import sha256_text

DEMO = PROJECT_ROOT / "demo" / "demo.json"


def write_fixture(directory: Path, data, name: str = "fixture.json") -> Path:
    """Write ``data`` as JSON (ASCII escapes, so lone surrogates survive as ``\\udXXX`` escapes)."""
    path = directory / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def load(*paths) -> str:
    out = StringIO()
    call_command("load_context_fixtures", *map(str, paths), stdout=out)
    return out.getvalue()


def row_counts() -> dict[str, int]:
    """Rows of every table of the artifacts app (storage, keys, candidates and the recall index)."""
    return {model.__name__: model.objects.count() for model in apps.get_app_config("artifacts").get_models()}


def golden_en():
    return golden_json("fixture-en.json")


def live_at(artifact: Artifact, revision: int) -> dict[str, str]:
    return {
        v.entry_id: v.version_id for v in MemoryEntryVersion.objects.filter(artifact=artifact) if v.is_live_at(revision)
    }


def assert_refused(tmp_path, data, *fragments: str) -> str:
    """Loading ``data`` fails, names every fragment (paths, messages) and writes nothing."""
    path = write_fixture(tmp_path, data, "bad.json")
    before = row_counts()
    with pytest.raises(CommandError) as excinfo:
        load(path)
    message = str(excinfo.value)
    assert "nothing was written" in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    assert row_counts() == before
    return message


# --- the golden fixtures ------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("language", ["en", "zh"])
def test_golden_fixture_loads_unchanged_with_the_documented_history(language):
    data = golden_json(f"fixture-{language}.json")
    load(GOLDEN / f"fixture-{language}.json")

    scope = Scope.objects.get(scope_id="project:demo")
    assert scope.title == "Demo project"
    assert not ContextReference.objects.exists()

    memory = Artifact.objects.get(scope=scope, family="memory", artifact_id="memory")
    assert memory.head_revision == 3
    revisions = list(ArtifactRevision.objects.filter(artifact=memory).order_by("revision"))
    assert [r.revision for r in revisions] == [1, 2, 3]
    assert {r.author for r in revisions} == {FIXTURE_AUTHOR}
    assert len({r.content_sha256 for r in revisions}) == 3
    assert live_at(memory, 1) == {"entry-1": "entry-1-v1"}
    assert live_at(memory, 2) == {"entry-1": "entry-1-v1", "entry-2": "entry-2-v1"}
    assert live_at(memory, 3) == {"entry-1": "entry-1-v2"}
    versions = {v.version_id: v for v in MemoryEntryVersion.objects.filter(artifact=memory)}
    assert {k: (v.born_in_revision, v.retired_in_revision) for k, v in versions.items()} == {
        "entry-1-v1": (1, 3),
        "entry-2-v1": (2, 3),
        "entry-1-v2": (3, None),
    }
    fixture_entries = data["artifacts"][1]["revisions"]
    assert versions["entry-1-v1"].body == fixture_entries[0]["entries"][0]["body"]
    assert versions["entry-2-v1"].body == fixture_entries[1]["entries"][1]["body"]
    assert versions["entry-1-v2"].body == fixture_entries[2]["entries"][0]["body"]
    for version in versions.values():
        assert version.content_sha256 == sha256_text(version.body)

    experience = Artifact.objects.get(scope=scope, family="experience", artifact_id="experience-1")
    assert experience.head_revision == 1
    revision = ArtifactRevision.objects.get(artifact=experience)
    assert revision.body == data["artifacts"][0]["revisions"][0]["body"]
    assert revision.content_sha256 == sha256_text(revision.body)
    assert revision.author == FIXTURE_AUTHOR

    api_key = ApiKey.objects.get(name="golden-host")
    assert api_key.key_sha256 == sha256_text(GOLDEN_KEY)
    assert api_key.revoked_at is None
    assert GOLDEN_KEY not in (api_key.name, api_key.key_prefix, api_key.key_sha256)
    assert [(g.scope.scope_id, g.can_read, g.can_write) for g in ApiKeyGrant.objects.filter(api_key=api_key)] == [
        ("project:demo", True, True)
    ]


@pytest.mark.django_db
def test_loading_the_same_fixture_twice_changes_nothing():
    load(GOLDEN / "fixture-en.json")
    before = row_counts()
    output = load(GOLDEN / "fixture-en.json")
    assert row_counts() == before
    assert "already loaded, nothing changed" in output
    assert "artifact 2/2 project:demo memory:memory — 3 revisions, 0 new" in output


@pytest.mark.django_db
def test_progress_is_reported_one_line_per_scope_key_and_artifact_plus_a_summary():
    lines = load(GOLDEN / "fixture-en.json").splitlines()
    assert lines == [
        "scope 1/1 project:demo — created",
        "api key 1/1 golden-host — created with 1 grant",
        "artifact 1/2 project:demo experience:experience-1 — 1 revision, 1 new",
        "artifact 2/2 project:demo memory:memory — 3 revisions, 3 new",
        "loaded: 1 scope (1 new), 1 API key (1 new, 0 grants added), 2 artifacts with 4 revisions (4 new) "
        "and 0 candidates (0 new)",
    ]


@pytest.mark.django_db
def test_further_fixture_revisions_are_appended_to_a_stored_prefix(tmp_path):
    shorter = golden_en()
    shorter["artifacts"][1]["revisions"] = shorter["artifacts"][1]["revisions"][:2]
    load(write_fixture(tmp_path, shorter, "first-two.json"))
    memory = Artifact.objects.get(family="memory")
    assert memory.head_revision == 2

    output = load(GOLDEN / "fixture-en.json")
    memory.refresh_from_db()
    assert memory.head_revision == 3
    assert live_at(memory, 3) == {"entry-1": "entry-1-v2"}
    assert "artifact 2/2 project:demo memory:memory — 3 revisions, 1 new" in output

    # The chain computed from the whole fixture equals the one written in two steps.
    fresh = ArtifactRevision.objects.filter(artifact=memory).order_by("revision")
    assert [r.revision for r in fresh] == [1, 2, 3]


@pytest.mark.django_db
def test_revisions_written_after_the_fixture_are_kept_and_a_reload_writes_nothing():
    load(GOLDEN / "fixture-en.json")
    scope = Scope.objects.get(scope_id="project:demo")
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        writes=[services.EntryVersionWrite(entry_id="entry-3", version_id=None, body="Written by a host.")],
        author="host",
    )
    before = row_counts()
    output = load(GOLDEN / "fixture-en.json")
    assert row_counts() == before
    assert "3 revisions, 0 new (4 stored)" in output


# --- the demo fixture ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_demo_fixture_loads_with_references_history_profile_and_candidates():
    load(DEMO)
    project = Scope.objects.get(scope_id="project:demo")
    references = ContextReference.objects.filter(scope=project).order_by("position")
    assert [(r.position, r.target.scope_id) for r in references] == [(1, "team:platform"), (2, "user:alice")]

    api_key = ApiKey.objects.get(name="demo-host")
    assert api_key.key_sha256 == sha256_text("pc_demo_0123456789abcdef0123456789abcdef")
    grants = {(g.scope.scope_id, g.can_read, g.can_write) for g in ApiKeyGrant.objects.filter(api_key=api_key)}
    assert grants == {
        ("project:demo", True, True),
        ("team:platform", True, True),
        ("user:alice", True, True),
        ("workspace:automation", True, True),
        ("turn:automation-task", True, True),
    }

    memory = Artifact.objects.get(scope=project, family="memory", artifact_id="memory")
    assert memory.head_revision >= 3
    versions = MemoryEntryVersion.objects.filter(artifact=memory)
    entry_ids = {v.entry_id for v in versions}
    live = live_at(memory, memory.head_revision)
    assert entry_ids - set(live), "an entry was removed"
    assert any(v.retired_in_revision and v.entry_id in live for v in versions), "an entry was updated"

    experiences = Artifact.objects.filter(family="experience")
    assert experiences.count() >= 3
    assert experiences.filter(head_revision__gte=2).exists()

    profile = Artifact.objects.get(scope__scope_id="user:alice", family="profile")
    assert profile.head_revision == 2
    statuses = sorted(ProfileCandidate.objects.filter(artifact=profile).values_list("status", flat=True))
    assert statuses == ["pending", "rejected"]

    topics = ArtifactRevision.objects.filter(artifact__family="topic_memory")
    assert topics.filter(body__isnull=True).exists()
    assert topics.filter(body__isnull=False).exists()

    bodies = list(MemoryEntryVersion.objects.values_list("body", flat=True)) + list(
        ArtifactRevision.objects.exclude(body=None).values_list("body", flat=True)
    )
    assert any("release" in body.lower() and "API" in body for body in bodies)
    assert any("发布" in body for body in bodies)

    before = row_counts()
    load(DEMO)
    assert row_counts() == before


@pytest.mark.django_db
def test_several_files_load_together_and_may_reference_each_others_scopes(tmp_path):
    base = {"scopes": [{"id": "team:platform", "title": "Platform"}]}
    project = {
        "scopes": [{"id": "project:x", "title": "X", "references": ["team:platform"]}],
        "artifacts": [
            {"scope": "team:platform", "family": "experience", "id": "e", "revisions": [{"body": "Deploy."}]}
        ],
    }
    output = load(write_fixture(tmp_path, base, "base.json"), write_fixture(tmp_path, project, "project.json"))
    assert "scope 2/2 project:x — created, references team:platform" in output
    assert ContextReference.objects.get().target.scope_id == "team:platform"


@pytest.mark.django_db
def test_skill_handoff_and_source_artifacts_are_stored_as_body_revisions(tmp_path):
    data = {
        "scopes": [{"id": "project:x"}],
        "artifacts": [
            {"scope": "project:x", "family": family, "id": f"{family}-1", "revisions": [{"body": f"{family} text"}]}
            for family in ("skill", "handoff", "source")
        ],
    }
    load(write_fixture(tmp_path, data))
    assert sorted(ArtifactRevision.objects.values_list("artifact__family", "body")) == [
        ("handoff", "handoff text"),
        ("skill", "skill text"),
        ("source", "source text"),
    ]


# --- invalid input: every problem named by its JSON path, nothing written ------------------------


def _mutate(change):
    data = golden_en()
    change(data)
    return data


def _memory(data):
    return data["artifacts"][1]["revisions"]


INVALID_CASES = {
    "unknown top-level key": (lambda d: d.update(bogus=1), ["bogus: unknown key"]),
    "unknown key in an entry": (
        lambda d: _memory(d)[0]["entries"][0].update(colour="red"),
        ["artifacts[1].revisions[0].entries[0].colour: unknown key"],
    ),
    "missing required field": (
        lambda d: d["artifacts"][0].pop("family"),
        ["artifacts[0].family: is required"],
    ),
    "wrong type": (
        lambda d: d["api_keys"][0]["grants"][0].update(read="yes"),
        ["api_keys[0].grants[0].read: must be true or false, not a string"],
    ),
    "unknown family": (
        lambda d: d["artifacts"][0].update(family="diary"),
        ["artifacts[0].family: must be one of memory, experience, profile, topic_memory, skill, handoff, source"],
    ),
    "empty id": (lambda d: d["artifacts"][0].update(id=""), ["artifacts[0].id: must not be empty"]),
    "id too long": (
        lambda d: d["artifacts"][0].update(id="x" * 201),
        ["artifacts[0].id: must be at most 200 characters, not 201"],
    ),
    "missing body on a first version": (
        lambda d: _memory(d)[2]["entries"][0].pop("body"),
        ['artifacts[1].revisions[2].entries[0].body: is required: version "entry-1-v2" appears here for the first'],
    ),
    "body changed for a known version": (
        lambda d: _memory(d)[1]["entries"][0].update(body="Something else."),
        ['artifacts[1].revisions[1].entries[0].body: differs from the body of version "entry-1-v1"'],
    ),
    "version id reused for another entry": (
        lambda d: _memory(d)[1]["entries"][1].update(version="entry-1-v1"),
        ['artifacts[1].revisions[1].entries[1].version: version "entry-1-v1" belongs to entry "entry-1"'],
    ),
    "retired version revived": (
        lambda d: _memory(d).append({"entries": [{"id": "entry-2", "version": "entry-2-v1"}]}),
        ['artifacts[1].revisions[3].entries[0].version: version "entry-2-v1" stopped being live in revision 3'],
    ),
    "entry listed twice in a revision": (
        lambda d: _memory(d)[1]["entries"].append({"id": "entry-1", "version": "entry-1-v1"}),
        ['artifacts[1].revisions[1].entries[2].id: entry "entry-1" is listed twice'],
    ),
    "memory revision identical to the previous one": (
        lambda d: _memory(d).insert(1, {"entries": [{"id": "entry-1", "version": "entry-1-v1"}]}),
        ["artifacts[1].revisions[1]: changes nothing"],
    ),
    "empty first memory revision": (
        lambda d: _memory(d).insert(0, {"entries": []}),
        ["artifacts[1].revisions[0]: changes nothing: the first memory revision must list at least one entry"],
    ),
    "experience revision identical to the previous one": (
        lambda d: d["artifacts"][0]["revisions"].append(copy.deepcopy(d["artifacts"][0]["revisions"][0])),
        ["artifacts[0].revisions[1]: changes nothing"],
    ),
    "unknown referenced scope": (
        lambda d: d["scopes"][0].update(references=["team:nowhere"]),
        ['scopes[0].references[0]: scope "team:nowhere" does not exist'],
    ),
    "self reference": (
        lambda d: d["scopes"][0].update(references=["project:demo"]),
        ["scopes[0].references[0]: a scope cannot reference itself"],
    ),
    "more references than a scope may have": (
        lambda d: (
            d["scopes"].extend({"id": f"team:{i}"} for i in range(MAX_SCOPE_REFERENCES + 1)),
            d["scopes"][0].update(references=[f"team:{i}" for i in range(MAX_SCOPE_REFERENCES + 1)]),
        ),
        [f"scopes[0].references: a scope references at most {MAX_SCOPE_REFERENCES} scopes, not 65"],
    ),
    "duplicate reference": (
        lambda d: (
            d["scopes"].append({"id": "team:platform"}),
            d["scopes"][0].update(references=["team:platform", "team:platform"]),
        ),
        ['scopes[0].references[1]: scope "team:platform" is already referenced at position 1'],
    ),
    "unknown scope of an artifact and a grant": (
        lambda d: (
            d["artifacts"][0].update(scope="project:other"),
            d["api_keys"][0]["grants"][0].update(scope="project:other"),
        ),
        ['artifacts[0].scope: scope "project:other" does not exist', "api_keys[0].grants[0].scope: scope"],
    ),
    "key too short": (
        lambda d: d["api_keys"][0].update(key="pc_short"),
        ["api_keys[0].key: must be 32–200 printable ASCII characters without spaces, not 8 characters"],
    ),
    "key too long": (
        lambda d: d["api_keys"][0].update(key="k" * 201),
        ["api_keys[0].key: must be 32–200 printable ASCII characters without spaces, not 201 characters"],
    ),
    "key with a space": (
        lambda d: d["api_keys"][0].update(key="pc_golden 0123456789abcdef0123456789abcdef"),
        ["api_keys[0].key: must be printable ASCII without spaces: character 9 is not"],
    ),
    "key with a non-ASCII character": (
        lambda d: d["api_keys"][0].update(key="pc_golden_é123456789abcdef0123456789abcdef"),
        ["api_keys[0].key: must be printable ASCII without spaces: character 10 is not"],
    ),
    "NUL in a body": (
        lambda d: d["artifacts"][0]["revisions"][0].update(body="before\x00after"),
        ["artifacts[0].revisions[0].body: contains U+0000 (NUL) at character 6"],
    ),
    "lone surrogate in an entry body": (
        lambda d: _memory(d)[0]["entries"][0].update(body="broken \ud800 text"),
        ["artifacts[1].revisions[0].entries[0].body: contains a lone surrogate U+D800 at character 7"],
    ),
    "lone surrogate in a scope id": (
        lambda d: d["scopes"][0].update(id="project:\udc00"),
        ["scopes[0].id: contains a lone surrogate U+DC00"],
    ),
    "lone surrogate in a key name of an object": (
        lambda d: d["scopes"][0].update({"\ud83d": 1}),
        ['scopes[0]["\\ud83d"]: unknown key (contains a lone surrogate U+D83D at character 0)'],
    ),
    "duplicate artifact": (
        lambda d: d["artifacts"].append(copy.deepcopy(d["artifacts"][0])),
        [
            'artifacts[2]: duplicate artifact: scope "project:demo", experience "experience-1" is already defined at '
            "artifacts[0]"
        ],
    ),
    "duplicate key name": (
        lambda d: d["api_keys"].append(
            {"name": "golden-host", "key": "pc_other_0123456789abcdef0123456789abcdef", "grants": []}
        ),
        ['api_keys[1].name: API key "golden-host" is already defined at api_keys[0]'],
    ),
    "same key under two names": (
        lambda d: d["api_keys"].append({"name": "other-host", "key": GOLDEN_KEY}),
        ["api_keys[1].key: is the same key as api_keys[0].key"],
    ),
    "duplicate scope": (
        lambda d: d["scopes"].append({"id": "project:demo"}),
        ['scopes[1].id: scope "project:demo" is already defined at scopes[0]'],
    ),
    "candidates on a non-profile artifact": (
        lambda d: d["artifacts"][0].update(candidates=[{"body": "x", "status": "pending"}]),
        ["artifacts[0].candidates: only profile artifacts have candidates"],
    ),
    "candidate with an invalid status": (
        lambda d: d["artifacts"].append(
            {
                "scope": "project:demo",
                "family": "profile",
                "id": "profile",
                "revisions": [{"body": "A profile."}],
                "candidates": [{"body": "Another.", "status": "accepted"}],
            }
        ),
        ['artifacts[2].candidates[0].status: must be pending, rejected or committed, not "accepted"'],
    ),
    "committed candidate without its revision": (
        lambda d: d["artifacts"].append(
            {
                "scope": "project:demo",
                "family": "profile",
                "id": "profile",
                "revisions": [{"body": "A profile."}],
                "candidates": [{"body": "Another.", "status": "committed"}],
            }
        ),
        ["artifacts[2].candidates[0].committed_revision: is required for a committed candidate"],
    ),
    "committed candidate whose revision holds another body": (
        lambda d: d["artifacts"].append(
            {
                "scope": "project:demo",
                "family": "profile",
                "id": "profile",
                "revisions": [{"body": "A profile."}],
                "candidates": [{"body": "Another.", "status": "committed", "committed_revision": 1}],
            }
        ),
        ["artifacts[2].candidates[0].committed_revision: revision 1 does not hold the candidate's body"],
    ),
    "memory revision removing an entry that is not live": (
        lambda d: d["artifacts"].append(
            {
                "scope": "project:demo",
                "family": "memory",
                "id": "changes",
                "revisions": [{"add": [{"id": "a", "version": "a-v1", "body": "A."}]}, {"remove": ["b"]}],
            }
        ),
        ['artifacts[2].revisions[1].remove[0]: entry "b" is not live before this revision'],
    ),
    "memory revision adding a version given before": (
        lambda d: d["artifacts"].append(
            {
                "scope": "project:demo",
                "family": "memory",
                "id": "changes",
                "revisions": [
                    {"add": [{"id": "a", "version": "a-v1", "body": "A."}]},
                    {"add": [{"id": "a", "version": "a-v1", "body": "A."}]},
                ],
            }
        ),
        ['artifacts[2].revisions[1].add[0].version: version "a-v1" is already given at artifacts[2].revisions[0]'],
    ),
    "revision with a time without a UTC offset": (
        lambda d: d["artifacts"][0]["revisions"][0].update(created_at="2026-01-31T09:30:00"),
        ["artifacts[0].revisions[0].created_at: must be an ISO 8601 time with a UTC offset"],
    ),
    "topic memory without a summary": (
        lambda d: d["artifacts"].append(
            {"scope": "project:demo", "family": "topic_memory", "id": "t", "revisions": [{"title": "T"}]}
        ),
        ["artifacts[2].revisions[0].summary: is required"],
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(INVALID_CASES))
def test_invalid_fixture_is_refused_naming_the_json_path_and_writes_nothing(tmp_path, case):
    change, fragments = INVALID_CASES[case]
    assert_refused(tmp_path, _mutate(change), *fragments)


@pytest.mark.django_db
def test_every_problem_of_the_input_is_listed_at_once(tmp_path):
    data = golden_en()
    data["bogus"] = True
    data["scopes"][0]["references"] = ["project:demo"]
    data["api_keys"][0]["key"] = "short"
    data["artifacts"][0]["revisions"][0]["body"] = "nul \x00"
    _memory(data)[1]["entries"][0]["body"] = "changed"
    _memory(data)[2]["entries"][0]["version"] = "entry-2-v1"
    message = assert_refused(
        tmp_path,
        data,
        "bogus: unknown key",
        "scopes[0].references[0]",
        "api_keys[0].key",
        "artifacts[0].revisions[0].body",
        "artifacts[1].revisions[1].entries[0].body",
    )
    assert "(5 problems)" in message


@pytest.mark.django_db
def test_problems_name_their_file_when_several_files_are_loaded(tmp_path):
    good = write_fixture(tmp_path, golden_en(), "good.json")
    bad = write_fixture(tmp_path, {"scopes": [{"id": "team:x", "references": ["team:y"]}]}, "bad.json")
    before = row_counts()
    with pytest.raises(CommandError) as excinfo:
        load(good, bad)
    assert f'{bad}: scopes[0].references[0]: scope "team:y" does not exist' in str(excinfo.value)
    assert row_counts() == before


@pytest.mark.django_db
def test_unreadable_and_malformed_files_are_refused(tmp_path):
    not_json = tmp_path / "broken.json"
    not_json.write_text('{"scopes": [', encoding="utf-8")
    duplicated = tmp_path / "duplicated.json"
    duplicated.write_text('{"scopes": [], "scopes": []}', encoding="utf-8")
    missing = tmp_path / "missing.json"
    with pytest.raises(CommandError) as excinfo:
        load(not_json, duplicated, missing)
    message = str(excinfo.value)
    assert f"{not_json}: $: is not valid JSON" in message
    assert f"{duplicated}: scopes: is given more than once" in message
    assert f"{missing}: $: cannot be read" in message
    assert row_counts() == dict.fromkeys(row_counts(), 0)


# --- input that contradicts stored immutable content -------------------------------------------


@pytest.mark.django_db
def test_a_different_body_for_a_stored_revision_is_refused(tmp_path):
    load(GOLDEN / "fixture-en.json")
    data = golden_en()
    data["artifacts"][0]["revisions"][0]["body"] = "Rewritten history."
    assert_refused(tmp_path, data, "artifacts[0].revisions[0].body: differs from stored revision 1")


@pytest.mark.django_db
def test_a_different_body_for_a_stored_entry_version_is_refused(tmp_path):
    load(GOLDEN / "fixture-en.json")
    data = golden_en()
    _memory(data)[0]["entries"][0]["body"] = "Rewritten entry."
    assert_refused(
        tmp_path,
        data,
        'artifacts[1].revisions[0].entries[0].body: differs from the stored body of version "entry-1-v1"',
    )


@pytest.mark.django_db
def test_a_different_memory_history_is_refused_at_the_first_differing_revision(tmp_path):
    load(GOLDEN / "fixture-en.json")
    data = golden_en()
    # Revision 3 now keeps entry-2 live: same versions, different live set.
    _memory(data)[2]["entries"].append({"id": "entry-2", "version": "entry-2-v1"})
    assert_refused(
        tmp_path,
        data,
        'artifacts[1].revisions[2]: differs from stored revision 3 (fixture only: "entry-2"@"entry-2-v1")',
    )


@pytest.mark.django_db
def test_a_stored_version_id_added_again_by_a_new_fixture_revision_is_refused(tmp_path):
    load(GOLDEN / "fixture-en.json")
    scope = Scope.objects.get(scope_id="project:demo")
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        writes=[services.EntryVersionWrite(entry_id="entry-3", version_id="entry-3-v1", body="By a host.")],
        author="host",
    )
    data = golden_en()
    _memory(data).append(
        {
            "entries": [
                {"id": "entry-1", "version": "entry-1-v2"},
                {"id": "entry-3", "version": "entry-3-v1", "body": "x"},
            ]
        }
    )
    assert_refused(tmp_path, data, "artifacts[1].revisions[3].entries[1].body: differs from the stored body")


@pytest.mark.django_db
def test_a_different_key_for_a_stored_key_name_is_refused(tmp_path):
    load(GOLDEN / "fixture-en.json")
    data = golden_en()
    data["api_keys"][0]["key"] = "pc_changed_0123456789abcdef0123456789abcdef"
    message = assert_refused(tmp_path, data, 'api_keys[0].key: API key "golden-host" is stored with a different key')
    assert "pc_changed_" not in message


@pytest.mark.django_db
def test_different_grants_for_a_stored_key_are_refused_and_new_grants_are_added(tmp_path):
    load(GOLDEN / "fixture-en.json")
    data = golden_en()
    data["api_keys"][0]["grants"][0]["write"] = False
    assert_refused(tmp_path, data, 'api_keys[0].grants[0]: API key "golden-host" is stored with read=true, write=true')

    data = golden_en()
    data["scopes"].append({"id": "team:platform", "title": "Platform"})
    data["api_keys"][0]["grants"].append({"scope": "team:platform", "read": True, "write": False})
    output = load(write_fixture(tmp_path, data, "more.json"))
    assert "api key 1/1 golden-host — 1 grant added" in output
    assert ApiKeyGrant.objects.filter(scope__scope_id="team:platform", can_read=True, can_write=False).exists()


@pytest.mark.django_db
def test_different_references_or_title_for_a_stored_scope_are_refused(tmp_path):
    data = golden_en()
    data["scopes"].append({"id": "team:platform", "title": "Platform"})
    load(write_fixture(tmp_path, data, "first.json"))
    data["scopes"][0]["references"] = ["team:platform"]
    data["scopes"][1]["title"] = "Renamed"
    assert_refused(
        tmp_path,
        data,
        'scopes[0].references: scope "project:demo" is stored with the references []',
        'scopes[1].title: scope "team:platform" is stored with the title "Platform"',
    )


@pytest.mark.django_db
def test_a_changed_stored_candidate_is_refused(tmp_path):
    data = {
        "scopes": [{"id": "user:a"}],
        "artifacts": [
            {
                "scope": "user:a",
                "family": "profile",
                "id": "profile",
                "revisions": [{"body": "Committed."}],
                "candidates": [{"body": "Proposed.", "status": "pending"}, {"body": "No.", "status": "rejected"}],
            }
        ],
    }
    load(write_fixture(tmp_path, data, "first.json"))
    assert ProfileCandidate.objects.count() == 2
    before = row_counts()
    load(write_fixture(tmp_path, data, "first.json"))
    assert row_counts() == before

    data["artifacts"][0]["candidates"][0]["body"] = "Proposed differently."
    assert_refused(tmp_path, data, "artifacts[0].candidates[0].body: differs from stored candidate")


# --- the process exit status --------------------------------------------------------------------


def test_the_command_exits_non_zero_on_invalid_input(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}"}
    manage = [sys.executable, str(PROJECT_ROOT / "manage.py")]
    waits.run([*manage, "migrate", "-v", "0", "--skip-checks"], env=env, check=True, cwd=PROJECT_ROOT)
    bad = write_fixture(tmp_path, {"scopes": [{"id": "x", "colour": "red"}]})
    result = waits.run(
        [*manage, "load_context_fixtures", "--skip-checks", str(bad)],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "scopes[0].colour: unknown key" in result.stderr
    good = waits.run(
        [*manage, "load_context_fixtures", "--skip-checks", str(GOLDEN / "fixture-en.json")],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines()[-1].startswith("loaded: 1 scope (1 new)")
