"""docs/fixtures.schema.json describes what `manage.py load_context_fixtures` reads (docs/fixtures.md).

Every fixture of the repository (tracked JSON files and the JSON the docs give) passes the schema and the loader's
check; input the loader refuses, the schema refuses too; the schema's numbers, names and patterns are the code's.
"""

import copy
import json
import os
import re
import subprocess
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from jsonschema import Draft202012Validator

from artifacts.fixtures import FixtureDocument, fixture_documents_check, fixture_text_parse
from artifacts.fixtures.spec import CANDIDATE_STATUSES, TIMESTAMP_PATTERN
from tests.conftest import PROJECT_ROOT
from vocabulary import limits
from vocabulary.authority import AUTHORITY_TIERS
from vocabulary.families import STORED_FAMILIES
from vocabulary.slots import CONFLICT_KEY_PATTERN

SCHEMA = json.loads((PROJECT_ROOT / "docs" / "fixtures.schema.json").read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)
FIXTURE_KEYS = {"scopes", "api_keys", "artifacts"}
DOC_BLOCKS = re.compile(r"```json\n(.*?)```|<<'?JSON'?\n(.*?)\nJSON\n", re.S)


def _is_fixture(data: object) -> bool:
    return isinstance(data, dict) and bool(data) and set(data) <= FIXTURE_KEYS


def _tracked_json_files() -> list[Path]:
    """The repository's JSON files: git's list when there is one, else every file outside dot and data folders."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.json"], cwd=PROJECT_ROOT, capture_output=True, check=True, timeout=60
        ).stdout
        return [PROJECT_ROOT / name for name in listed.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        found = []
        for folder, subfolders, files in os.walk(PROJECT_ROOT):
            subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in {"data", "mutants"}]
            found += [Path(folder) / name for name in files if name.endswith(".json")]
        return found


def repository_fixtures() -> dict[str, object]:
    """Every fixture of the repository by where it is: JSON files, and the JSON blocks and heredocs of the docs."""
    fixtures: dict[str, object] = {}
    for path in sorted(_tracked_json_files()):
        if path.is_file() and _is_fixture(data := json.loads(path.read_text(encoding="utf-8-sig"))):
            fixtures[str(path.relative_to(PROJECT_ROOT))] = data
    for page in [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]:
        for number, match in enumerate(DOC_BLOCKS.finditer(page.read_text(encoding="utf-8")), start=1):
            try:
                data = json.loads(match.group(1) or match.group(2))
            except json.JSONDecodeError:
                continue  # a response with "…", a template with shell variables: not a fixture
            if _is_fixture(data):
                fixtures[f"{page.relative_to(PROJECT_ROOT)} JSON block {number}"] = data
    return fixtures


FIXTURES = repository_fixtures()


def schema_errors(data: object) -> list[str]:
    return [f"{error.json_path}: {error.message}" for error in VALIDATOR.iter_errors(data)]


def loader_problems(data: object) -> list[str]:
    """The loader's own check (step 1, no database) of ``data`` as a file, parsed by the loader's parser."""
    problems: list = []
    document = FixtureDocument(name="case.json", data=fixture_text_parse(json.dumps(data)))
    fixture_documents_check([document], problems)
    return [str(problem) for problem in problems]


def test_the_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(SCHEMA)


def test_the_fixtures_found_include_the_demo_the_golden_ones_and_the_docs_example():
    assert {
        "demo/demo.json",
        "tests/golden/fixture-en.json",
        "tests/golden/fixture-zh.json",
        "docs/fixtures.md JSON block 1",
    } <= set(FIXTURES)
    assert any(name.startswith("docs/deployment.md") for name in FIXTURES)  # section 5's scopes.json


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_fixture_of_the_repository_passes_the_schema_and_the_loader_check(name):
    assert schema_errors(FIXTURES[name]) == []
    assert loader_problems(FIXTURES[name]) == []


@pytest.mark.django_db
def test_the_example_of_docs_fixtures_md_loads_then_changes_nothing(tmp_path):
    path = tmp_path / "example.json"
    path.write_text(json.dumps(FIXTURES["docs/fixtures.md JSON block 1"]), encoding="utf-8")
    first, second = StringIO(), StringIO()
    call_command("load_context_fixtures", str(path), stdout=first)
    call_command("load_context_fixtures", str(path), stdout=second)
    summary = "loaded: 2 scopes (2 new), 1 API key (1 new, 0 grants added), 2 artifacts with 4 revisions (4 new)"
    assert summary in first.getvalue()
    assert "already loaded, nothing changed" in second.getvalue()


def _definitions() -> dict:
    return SCHEMA["$defs"]


def test_the_schema_says_what_the_code_says():
    defs = _definitions()
    for name in ("identifier", "body"):
        assert defs[name]["minLength"] == 1
    assert defs["identifier"]["maxLength"] == limits.MAX_IDENTIFIER_CHARACTERS
    assert defs["body"]["maxLength"] == limits.MAX_BODY_CHARACTERS
    scope = defs["scope"]["properties"]
    assert scope["title"]["maxLength"] == limits.MAX_SCOPE_TITLE_CHARACTERS
    assert scope["references"]["maxItems"] == limits.MAX_SCOPE_REFERENCES
    assert scope["authority"]["enum"] == list(AUTHORITY_TIERS)
    key_pattern = defs["api_key"]["properties"]["key"]["pattern"]
    assert key_pattern == f"^[!-~]{{{limits.API_KEY_MIN_CHARACTERS},{limits.API_KEY_MAX_CHARACTERS}}}$"
    assert defs["artifact"]["properties"]["family"]["enum"] == list(STORED_FAMILIES)
    body_families = defs["artifact"]["allOf"][2]["if"]["properties"]["family"]["enum"]
    assert set(body_families) == set(STORED_FAMILIES) - {"memory", "topic_memory"}
    conflict_key = defs["memory_entry"]["properties"]["conflict_key"]
    assert (conflict_key["pattern"], conflict_key["maxLength"]) == (
        CONFLICT_KEY_PATTERN,
        limits.MAX_CONFLICT_KEY_CHARACTERS,
    )
    assert defs["topic_memory_revision"]["properties"]["title"]["maxLength"] == limits.MAX_TOPIC_TITLE_CHARACTERS
    assert defs["candidate"]["properties"]["status"]["enum"] == list(CANDIDATE_STATUSES)
    assert defs["timestamp"]["pattern"] == TIMESTAMP_PATTERN


BASE = {
    "scopes": [{"id": "project:x", "title": "X", "references": [], "authority": "user_default"}],
    "api_keys": [
        {"name": "host", "key": "pc_" + "a" * 32, "grants": [{"scope": "project:x", "read": True, "write": False}]}
    ],
    "artifacts": [
        {
            "scope": "project:x",
            "family": "memory",
            "id": "memory",
            "revisions": [{"entries": [{"id": "e", "version": "e-v1", "body": "B", "conflict_key": "slot:a"}]}],
        },
        {"scope": "project:x", "family": "topic_memory", "id": "t", "revisions": [{"title": "T", "summary": "S"}]},
        {"scope": "project:x", "family": "experience", "id": "x", "revisions": [{"body": "B"}]},
        {
            "scope": "project:x",
            "family": "profile",
            "id": "profile",
            "revisions": [{"body": "P"}],
            "candidates": [{"body": "C", "status": "pending"}],
        },
    ],
}
SCOPE, KEY, GRANT = "scopes[0]", "api_keys[0]", "api_keys[0].grants[0]"
ENTRY = "artifacts[0].revisions[0].entries[0]"


def _set(path: list, value) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        target = doc
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return edit


def _delete(path: list) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        target = doc
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return edit


_ENTRY = ["artifacts", 0, "revisions", 0, "entries", 0]

REFUSED = {
    "an unknown top-level key": (_set(["scope"], []), "scope"),
    "scopes as an object": (_set(["scopes"], {}), "scopes"),
    "a scope without an id": (_delete(["scopes", 0, "id"]), f"{SCOPE}.id"),
    "an empty scope id": (_set(["scopes", 0, "id"], ""), f"{SCOPE}.id"),
    "an id of 201 characters": (_set(["artifacts", 0, "id"], "a" * 201), "artifacts[0].id"),
    "U+0000 in a title": (_set(["scopes", 0, "title"], "a\x00b"), f"{SCOPE}.title"),
    "a title of 201 characters": (_set(["scopes", 0, "title"], "t" * 201), f"{SCOPE}.title"),
    "an unknown authority tier": (_set(["scopes", 0, "authority"], "admin"), f"{SCOPE}.authority"),
    "65 references": (_set(["scopes", 0, "references"], [f"s:{i}" for i in range(65)]), f"{SCOPE}.references"),
    "a reference given twice": (_set(["scopes", 0, "references"], ["s:a", "s:a"]), f"{SCOPE}.references[1]"),
    "an unknown scope key": (_set(["scopes", 0, "parent"], "s:a"), f"{SCOPE}.parent"),
    "a key of 31 characters": (_set(["api_keys", 0, "key"], "k" * 31), f"{KEY}.key"),
    "a key with a space": (_set(["api_keys", 0, "key"], "pc_demo " + "a" * 32), f"{KEY}.key"),
    "a grant of neither right": (_set(["api_keys", 0, "grants", 0, "read"], False), GRANT),
    "a right given as text": (_set(["api_keys", 0, "grants", 0, "write"], "yes"), f"{GRANT}.write"),
    "a grant without its scope": (_delete(["api_keys", 0, "grants", 0, "scope"]), f"{GRANT}.scope"),
    "an unknown family": (_set(["artifacts", 0, "family"], "notes"), "artifacts[0].family"),
    "an artifact without revisions": (_delete(["artifacts", 2, "revisions"]), "artifacts[2].revisions"),
    "no revision and no candidate": (_set(["artifacts", 2, "revisions"], []), "artifacts[2].revisions"),
    "candidates of an experience": (_set(["artifacts", 2, "candidates"], []), "artifacts[2].candidates"),
    "a committed candidate without its revision": (
        _set(["artifacts", 3, "candidates", 0, "status"], "committed"),
        "artifacts[3].candidates[0].committed_revision",
    ),
    "a pending candidate naming a committed revision": (
        _set(["artifacts", 3, "candidates", 0, "committed_revision"], 1),
        "artifacts[3].candidates[0].committed_revision",
    ),
    "a time without a UTC offset": (
        _set(["artifacts", 2, "revisions", 0, "created_at"], "2026-01-31T09:30:00"),
        "artifacts[2].revisions[0].created_at",
    ),
    "a time with a space for the T": (
        _set(["scopes", 0, "created_at"], "2026-01-31 09:30:00Z"),
        f"{SCOPE}.created_at",
    ),
    "an empty author": (_set(["artifacts", 2, "revisions", 0, "author"], ""), "artifacts[2].revisions[0].author"),
    "a first memory revision given as a removal": (
        _set(["artifacts", 0, "revisions", 0], {"remove": ["e"]}),
        "artifacts[0].revisions[0].remove[0]",
    ),
    "an added memory entry without a body": (
        _set(["artifacts", 0, "revisions", 0], {"add": [{"id": "e", "version": "e-v1"}]}),
        "artifacts[0].revisions[0].add[0].body",
    ),
    "a memory entry without a version": (_delete([*_ENTRY, "version"]), f"{ENTRY}.version"),
    "a first memory revision listing nothing": (
        _set(["artifacts", 0, "revisions", 0, "entries"], []),
        "artifacts[0].revisions[0]",
    ),
    "memory entries as an object": (
        _set(["artifacts", 0, "revisions", 0, "entries"], {}),
        "artifacts[0].revisions[0].entries",
    ),
    "a memory revision with a body": (
        _set(["artifacts", 0, "revisions", 0, "body"], "B"),
        "artifacts[0].revisions[0].body",
    ),
    "an empty body": (_set([*_ENTRY, "body"], ""), f"{ENTRY}.body"),
    "a body of 65,537 characters": (
        _set(["artifacts", 2, "revisions", 0, "body"], "b" * 65_537),
        "artifacts[2].revisions[0].body",
    ),
    "a conflict_key of whitespace only": (_set([*_ENTRY, "conflict_key"], "   "), f"{ENTRY}.conflict_key"),
    "a conflict_key with a control character": (_set([*_ENTRY, "conflict_key"], "slot\x07"), f"{ENTRY}.conflict_key"),
    "a conflict_key of 201 characters": (_set([*_ENTRY, "conflict_key"], "s" * 201), f"{ENTRY}.conflict_key"),
    "a null conflict_key": (_set([*_ENTRY, "conflict_key"], None), f"{ENTRY}.conflict_key"),
    "a topic revision without a summary": (
        _delete(["artifacts", 1, "revisions", 0, "summary"]),
        "artifacts[1].revisions[0].summary",
    ),
    "a topic revision's empty body": (
        _set(["artifacts", 1, "revisions", 0, "body"], ""),
        "artifacts[1].revisions[0].body",
    ),
    "an experience revision with a title": (
        _set(["artifacts", 2, "revisions", 0, "title"], "T"),
        "artifacts[2].revisions[0].title",
    ),
}


def _edited(edit: Callable[[dict], None]) -> dict:
    doc = copy.deepcopy(BASE)
    edit(doc)
    return doc


def test_the_base_of_the_cases_is_accepted_by_both():
    assert schema_errors(BASE) == [] and loader_problems(BASE) == []


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_loader_refuses_the_schema_refuses(case):
    edit, path = REFUSED[case]
    doc = _edited(edit)
    problems = loader_problems(doc)
    assert any(problem.startswith(f"{path}: ") for problem in problems), problems
    assert schema_errors(doc), f"the schema accepts {case}, which the loader refuses: {problems}"


ACCEPTED = {
    "an empty file": lambda doc: doc.clear(),
    "an empty scope title": _set(["scopes", 0, "title"], ""),
    "a topic revision with a null body": _set(["artifacts", 1, "revisions", 0, "body"], None),
    "a topic revision with a body": _set(["artifacts", 1, "revisions", 0, "body"], "More."),
    "a profile with candidates only": _set(["artifacts", 3, "revisions"], []),
    "a key of 200 characters": _set(["api_keys", 0, "key"], "~" * 200),
    "a key of 32 characters": _set(["api_keys", 0, "key"], "!" * 32),
    "a grant of write only": _set(["api_keys", 0, "grants", 0], {"scope": "project:x", "read": False, "write": True}),
    "a conflict_key after a space": _set([*_ENTRY, "conflict_key"], " preference: language"),
    "a conflict_key of 200 characters": _set([*_ENTRY, "conflict_key"], "s" * 200),
    "a body of 65,536 characters": _set(["artifacts", 2, "revisions", 0, "body"], "b" * 65_536),
    "64 references": _set(["scopes", 0, "references"], [f"s:{i}" for i in range(64)]),
    "memory revisions given as changes": _set(
        ["artifacts", 0, "revisions"],
        [
            {"add": [{"id": "e", "version": "e-v1", "body": "B", "created_at": "2026-01-31T09:30:00.000001Z"}]},
            {"add": [{"id": "e", "version": "e-v2", "body": "C"}, {"id": "f", "version": "f-v1", "body": "F"}]},
            {"remove": ["e"], "author": "api-key:host", "created_at": "2026-01-31T10:30:00+02:00"},
        ],
    ),
    "recorded authors and times": lambda doc: (
        doc["scopes"][0].update(created_at="2026-01-31T09:30:00Z"),
        doc["artifacts"][2].update(created_at="2026-01-31T09:30:00Z"),
        doc["artifacts"][2]["revisions"][0].update(author="api-key:host", created_at="2026-01-31T09:30:00.5Z"),
        doc["artifacts"][1]["revisions"][0].update(author="admin:op", created_at="2026-01-31T09:30:00Z"),
    ),
    "an identical revision with its time recorded": _set(
        ["artifacts", 2, "revisions"],
        [{"body": "B"}, {"body": "B", "author": "api-key:host", "created_at": "2026-01-31T09:30:00Z"}],
    ),
    "a committed candidate with its revision": _set(
        ["artifacts", 3, "candidates"],
        [{"body": "P", "status": "committed", "committed_revision": 1, "proposed_by": "api-key:host"}],
    ),
    "a later memory revision listing nothing": _set(
        ["artifacts", 0, "revisions"],
        [{"entries": [{"id": "e", "version": "e-v1", "body": "B"}]}, {"entries": []}],
    ),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_what_the_loader_accepts_the_schema_accepts(case):
    doc = _edited(ACCEPTED[case])
    assert loader_problems(doc) == []
    assert schema_errors(doc) == []


@pytest.mark.django_db
def test_the_exported_history_of_docs_fixtures_md_loads_and_exports_to_the_same_bytes(tmp_path):
    section = (PROJECT_ROOT / "docs" / "fixtures.md").read_text(encoding="utf-8").split("## Exported histories")[1]
    text = re.search(r"```json\n(.*?)```", section, re.S).group(1)
    path = tmp_path / "exported.json"
    path.write_text(text, encoding="utf-8")
    call_command("load_context_fixtures", str(path), stdout=StringIO())
    out = StringIO()

    call_command("export_scope", "project:notes", stdout=out, stderr=StringIO())

    assert out.getvalue() == text
