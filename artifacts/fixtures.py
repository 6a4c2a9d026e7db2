"""Context fixtures: validate JSON fixture files completely, then load them atomically (DESIGN §7).

The format is the one of ``tests/golden/fixture-*.json``::

    {"scopes": [{"id", "title", "references": [scope id, …]}],
     "api_keys": [{"name", "key", "grants": [{"scope", "read", "write"}]}],
     "artifacts": [{"scope", "family", "id", "revisions": […], "candidates": […] (profile only)}]}

A memory revision lists the entries live in it (``{"id", "version", "body"}``; the body only the first
time a version appears); consecutive revisions are diffed into adds, updates and removals. A
topic-memory revision has ``title``, ``summary`` and an optional ``body``; every other family's
revision has a ``body``.

Loading happens in three steps, all inside one transaction:

1. the whole input (every file) is checked without touching the database; every problem is kept
   with the JSON path it concerns;
2. the input is compared with what is stored: referenced scopes must exist, and what is stored must
   agree with the input. An artifact's stored revisions must equal the fixture's first ones
   (revisions the fixture has beyond the stored head are appended; revisions hosts wrote after the
   fixture's last one are kept). A stored key name keeps its key, a stored scope its title and
   references, a stored grant its rights (missing grants are added). Stored candidates a fixture
   proposed are matched in order (a pending one may since have been committed or rejected);
3. only when no problem was found anything is written, through ``artifacts.services``; what is
   already stored is skipped, so loading the same input twice writes nothing.

Any problem raises :class:`FixtureInvalid` listing all of them; nothing is written then.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from artifacts import selectors, services
from artifacts.models import Family, ProfileCandidate, Scope
from vocabulary.errors import NotFound
from vocabulary.families import STORED_FAMILIES
from vocabulary.limits import (
    API_KEY_MAX_CHARACTERS,
    API_KEY_MIN_CHARACTERS,
    MAX_BODY_CHARACTERS,
    MAX_IDENTIFIER_CHARACTERS,
    MAX_SCOPE_TITLE_CHARACTERS,
    MAX_TOPIC_TITLE_CHARACTERS,
)
from vocabulary.text import sha256_text, stored_text_problem

FIXTURE_AUTHOR = "fixture"
"""The author recorded on every revision and candidate a fixture writes."""

CANDIDATE_STATUSES = (ProfileCandidate.Status.PENDING.value, ProfileCandidate.Status.REJECTED.value)

_TOP_LEVEL_KEYS = ("scopes", "api_keys", "artifacts")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

Progress = Callable[[str], None]


# --- problems ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixtureProblem:
    """One reason the input cannot be loaded, at one JSON path (``artifacts[3].revisions[1]``)."""

    path: str
    message: str
    file: str = ""

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.file else self.path
        return f"{where}: {self.message}"


class FixtureInvalid(Exception):
    """The input cannot be loaded; ``problems`` lists every problem found. Nothing was written."""

    def __init__(self, problems: Sequence[FixtureProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__(self.report())

    def report(self) -> str:
        count = len(self.problems)
        lines = [f"fixture input is invalid ({count} problem{'s' if count != 1 else ''}); nothing was written:"]
        lines.extend(f"  {problem}" for problem in self.problems)
        return "\n".join(lines)


def show(value: object) -> str:
    """A value as a printable, single-line JSON literal (for messages; lone surrogates escaped)."""
    text = json.dumps(value, ensure_ascii=False)
    if stored_text_problem(text) or not text.isprintable():
        text = json.dumps(value, ensure_ascii=True)
    return text


def label(value: str) -> str:
    """An identity for progress lines: as is when plainly printable, else as an escaped literal."""
    if value and value.isprintable() and " " not in value:
        return value
    return json.dumps(value, ensure_ascii=True)


def _child(path: str, key: str) -> str:
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=True)}]"


def _item(path: str, index: int) -> str:
    return f"{path}[{index}]"


# --- parsed input -----------------------------------------------------------------------------


@dataclass
class ScopeSpec:
    file: str
    path: str
    scope_id: str
    title: str | None  # None: not given
    references: list[str] | None  # None: not given
    references_path: str


@dataclass
class GrantSpec:
    path: str
    scope_id: str
    read: bool
    write: bool


@dataclass
class ApiKeySpec:
    file: str
    path: str
    name: str
    key: str
    grants: list[GrantSpec]


@dataclass
class EntrySpec:
    path: str
    entry_id: str
    version_id: str
    body: str  # resolved: the body given where the version first appeared


@dataclass(frozen=True)
class _VersionRef:
    """What the memory revision hash chain needs of an entry version."""

    entry_id: str
    version_id: str
    content_sha256: str


@dataclass
class RevisionSpec:
    path: str
    number: int  # 1-based position in the fixture
    content_sha256: str
    body: str | None = None
    title: str | None = None
    summary: str | None = None
    # memory only
    live: dict[str, EntrySpec] = field(default_factory=dict)  # entry id -> live version at this revision
    added: list[EntrySpec] = field(default_factory=list)  # new versions (adds and updates)
    removed: list[str] = field(default_factory=list)  # entry ids no longer live


@dataclass
class CandidateSpec:
    path: str
    body: str
    status: str


@dataclass
class ArtifactSpec:
    file: str
    path: str
    scope_id: str
    family: str
    artifact_id: str
    revisions: list[RevisionSpec]
    candidates: list[CandidateSpec]
    versions: dict[str, EntrySpec] = field(default_factory=dict)  # memory: version id -> first appearance
    intact: bool = True  # False when the artifact itself has problems (storage comparison is skipped)


@dataclass
class FixtureInput:
    scopes: list[ScopeSpec] = field(default_factory=list)
    api_keys: list[ApiKeySpec] = field(default_factory=list)
    artifacts: list[ArtifactSpec] = field(default_factory=list)


@dataclass
class FixtureLoadSummary:
    """What a load found and what it wrote."""

    scopes: int = 0
    scopes_created: int = 0
    references_set: int = 0
    api_keys: int = 0
    api_keys_created: int = 0
    grants_created: int = 0
    artifacts: int = 0
    revisions: int = 0
    revisions_created: int = 0
    candidates: int = 0
    candidates_created: int = 0

    @property
    def changed(self) -> bool:
        return bool(
            self.scopes_created
            or self.references_set
            or self.api_keys_created
            or self.grants_created
            or self.revisions_created
            or self.candidates_created
        )

    def line(self) -> str:
        return (
            f"{_count(self.scopes, 'scope')} ({self.scopes_created} new), "
            f"{_count(self.api_keys, 'API key')} ({self.api_keys_created} new, "
            f"{_count(self.grants_created, 'grant')} added), "
            f"{_count(self.artifacts, 'artifact')} with {_count(self.revisions, 'revision')} "
            f"({self.revisions_created} new) and {_count(self.candidates, 'candidate')} "
            f"({self.candidates_created} new)"
        )


# --- reading ----------------------------------------------------------------------------------


class _JsonObject(dict):
    """A JSON object that remembers keys given more than once (json.loads keeps only the last)."""

    duplicate_keys: tuple[str, ...] = ()


def _object_pairs(pairs: list[tuple[str, object]]) -> _JsonObject:
    obj = _JsonObject(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        duplicates = []
        for key, _ in pairs:
            if key in seen and key not in duplicates:
                duplicates.append(key)
            seen.add(key)
        obj.duplicate_keys = tuple(duplicates)
    return obj


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def fixture_text_parse(text: str) -> object:
    """Parse fixture JSON; keeps duplicate-key information and refuses NaN / Infinity."""
    return json.loads(text, object_pairs_hook=_object_pairs, parse_constant=_reject_constant)


@dataclass
class FixtureDocument:
    """One input file: its display name and parsed content."""

    name: str
    data: object


def fixture_files_read(paths: Sequence[str | Path]) -> tuple[list[FixtureDocument], list[FixtureProblem]]:
    """Read and parse every file; problems (missing, not UTF-8, not JSON) are collected, not raised."""
    documents: list[FixtureDocument] = []
    problems: list[FixtureProblem] = []
    for path in paths:
        name = str(path)
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            problems.append(FixtureProblem("$", f"cannot be read: {exc.strerror or exc}", name))
            continue
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            problems.append(FixtureProblem("$", f"is not UTF-8 (byte {exc.start})", name))
            continue
        try:
            data = fixture_text_parse(text)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            problems.append(FixtureProblem("$", f"is not valid JSON: {exc}", name))
            continue
        documents.append(FixtureDocument(name=name, data=data))
    return documents, problems


# --- step 1: structure (no database) ----------------------------------------------------------


class _Checker:
    """Collects problems of one document while walking it."""

    def __init__(self, file: str, problems: list[FixtureProblem]) -> None:
        self.file = file
        self.problems = problems

    def problem(self, path: str, message: str) -> None:
        self.problems.append(FixtureProblem(path or "$", message, self.file))

    def obj(self, value: object, path: str, *, required: Iterable[str], optional: Iterable[str] = ()) -> dict | None:
        if not isinstance(value, dict):
            self.problem(path, f"must be an object, not {_json_type(value)}")
            return None
        required = tuple(required)
        allowed = set(required) | set(optional)
        for key in getattr(value, "duplicate_keys", ()):
            self.problem(_child(path, key), "is given more than once")
        for key in value:
            if key not in allowed:
                problem = stored_text_problem(key)
                self.problem(_child(path, key), f"unknown key{f' ({problem})' if problem else ''}")
        for key in required:
            if key not in value:
                self.problem(_child(path, key), "is required")
        return value

    def array(self, value: object, path: str) -> list | None:
        if not isinstance(value, list):
            self.problem(path, f"must be an array, not {_json_type(value)}")
            return None
        return value

    def text(self, value: object, path: str, *, max_length: int, allow_empty: bool = False) -> str | None:
        if not isinstance(value, str):
            self.problem(path, f"must be a string, not {_json_type(value)}")
            return None
        problem = stored_text_problem(value)
        if problem:
            self.problem(path, problem)
            return None
        if not value and not allow_empty:
            self.problem(path, "must not be empty")
            return None
        if len(value) > max_length:
            self.problem(path, f"must be at most {max_length} characters, not {len(value)}")
            return None
        return value

    def identifier(self, value: object, path: str) -> str | None:
        return self.text(value, path, max_length=MAX_IDENTIFIER_CHARACTERS)

    def body(self, value: object, path: str) -> str | None:
        return self.text(value, path, max_length=MAX_BODY_CHARACTERS)

    def boolean(self, value: object, path: str) -> bool | None:
        if not isinstance(value, bool):
            self.problem(path, f"must be true or false, not {_json_type(value)}")
            return None
        return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _api_key_problem(key: str) -> str | None:
    if not API_KEY_MIN_CHARACTERS <= len(key) <= API_KEY_MAX_CHARACTERS:
        return (
            f"must be {API_KEY_MIN_CHARACTERS}–{API_KEY_MAX_CHARACTERS} printable ASCII characters "
            f"without spaces, not {len(key)} characters"
        )
    for position, char in enumerate(key):
        if not "\x21" <= char <= "\x7e":
            return f"must be printable ASCII without spaces: character {position} is not"
    return None


def _check_scope(c: _Checker, value: object, path: str) -> ScopeSpec | None:
    obj = c.obj(value, path, required=("id",), optional=("title", "references"))
    if obj is None:
        return None
    scope_id = c.identifier(obj.get("id"), _child(path, "id")) if "id" in obj else None
    title = None
    if "title" in obj:
        title = c.text(obj["title"], _child(path, "title"), max_length=MAX_SCOPE_TITLE_CHARACTERS, allow_empty=True)
    references: list[str] | None = None
    references_path = _child(path, "references")
    if "references" in obj:
        problems_before = len(c.problems)
        items = c.array(obj["references"], references_path)
        if items is not None:
            references = []
            seen: dict[str, int] = {}
            for i, item in enumerate(items):
                item_path = _item(references_path, i)
                target = c.identifier(item, item_path)
                if target is None:
                    continue
                if target == scope_id:
                    c.problem(item_path, "a scope cannot reference itself")
                elif target in seen:
                    c.problem(item_path, f"scope {show(target)} is already referenced at position {seen[target] + 1}")
                else:
                    seen[target] = i
                    references.append(target)
        if len(c.problems) != problems_before:
            references = None  # unknown: not compared with what is stored
    if scope_id is None:
        return None
    return ScopeSpec(
        file=c.file, path=path, scope_id=scope_id, title=title, references=references, references_path=references_path
    )


def _check_api_key(c: _Checker, value: object, path: str) -> ApiKeySpec | None:
    obj = c.obj(value, path, required=("name", "key"), optional=("grants",))
    if obj is None:
        return None
    name = c.identifier(obj.get("name"), _child(path, "name")) if "name" in obj else None
    key = None
    if "key" in obj:
        key_path = _child(path, "key")
        if not isinstance(obj["key"], str):
            c.problem(key_path, f"must be a string, not {_json_type(obj['key'])}")
        else:
            problem = _api_key_problem(obj["key"])
            if problem:
                c.problem(key_path, problem)  # never echo the key itself
            else:
                key = obj["key"]
    grants: list[GrantSpec] = []
    if "grants" in obj:
        grants_path = _child(path, "grants")
        items = c.array(obj["grants"], grants_path)
        seen: dict[str, int] = {}
        for i, item in enumerate(items or ()):
            grant_path = _item(grants_path, i)
            grant = c.obj(item, grant_path, required=("scope", "read", "write"))
            if grant is None:
                continue
            scope_id = c.identifier(grant["scope"], _child(grant_path, "scope")) if "scope" in grant else None
            read = c.boolean(grant["read"], _child(grant_path, "read")) if "read" in grant else None
            write = c.boolean(grant["write"], _child(grant_path, "write")) if "write" in grant else None
            if scope_id is not None and scope_id in seen:
                c.problem(
                    _child(grant_path, "scope"),
                    f"scope {show(scope_id)} is already granted at grants[{seen[scope_id]}]",
                )
                continue
            if read is False and write is False:
                c.problem(grant_path, "a grant must allow read or write (omit it to grant nothing)")
                continue
            if scope_id is not None and read is not None and write is not None:
                seen[scope_id] = i
                grants.append(GrantSpec(path=grant_path, scope_id=scope_id, read=read, write=write))
    if name is None or key is None:
        return None
    return ApiKeySpec(file=c.file, path=path, name=name, key=key, grants=grants)


def _check_memory_revisions(c: _Checker, items: list, path: str, spec: ArtifactSpec) -> None:
    """Check memory revisions and diff each against the previous one.

    Every revision's structure is checked; once a revision is broken, the history of the later
    ones (diffs, reuse of versions) is no longer checked, as it would only produce follow-up noise.
    """
    history_ok = True
    previous: RevisionSpec | None = None
    previous_sha = ""
    owners: dict[str, str] = {}  # version id -> entry id
    retired_in: dict[str, int] = {}  # version id -> fixture revision it stopped being live in
    for k, item in enumerate(items):
        revision_path = _item(path, k)
        number = k + 1
        problems_before = len(c.problems)
        live: dict[str, EntrySpec] = {}
        obj = c.obj(item, revision_path, required=("entries",))
        entries = None
        if obj is not None and "entries" in obj:
            entries = c.array(obj["entries"], _child(revision_path, "entries"))
        for j, entry in enumerate(entries or ()):
            entry_path = _item(_child(revision_path, "entries"), j)
            e = c.obj(entry, entry_path, required=("id", "version"), optional=("body",))
            if e is None:
                continue
            entry_id = c.identifier(e["id"], _child(entry_path, "id")) if "id" in e else None
            version_id = c.identifier(e["version"], _child(entry_path, "version")) if "version" in e else None
            body = c.body(e["body"], _child(entry_path, "body")) if "body" in e else None
            if entry_id is None or version_id is None or ("body" in e and body is None):
                continue
            if entry_id in live:
                c.problem(_child(entry_path, "id"), f"entry {show(entry_id)} is listed twice in this revision")
                continue
            if not history_ok:
                continue
            version_path = _child(entry_path, "version")
            first = spec.versions.get(version_id)
            if first is None:
                if body is None:
                    c.problem(
                        _child(entry_path, "body"),
                        f"is required: version {show(version_id)} appears here for the first time",
                    )
                    continue
                owners[version_id] = entry_id
                first = spec.versions[version_id] = EntrySpec(
                    path=entry_path, entry_id=entry_id, version_id=version_id, body=body
                )
            elif owners[version_id] != entry_id:
                c.problem(
                    version_path,
                    f"version {show(version_id)} belongs to entry {show(owners[version_id])} ({first.path}); "
                    "a version id cannot be reused for another entry",
                )
                continue
            elif version_id in retired_in:
                c.problem(
                    version_path,
                    f"version {show(version_id)} stopped being live in revision {retired_in[version_id]}; "
                    "a retired version cannot come back (give the entry a new version)",
                )
                continue
            elif body is not None and body != first.body:
                c.problem(
                    _child(entry_path, "body"),
                    f"differs from the body of version {show(version_id)} given at {first.path}.body; "
                    "a version is immutable (give the changed entry a new version)",
                )
                continue
            live[entry_id] = first
        if len(c.problems) != problems_before or entries is None:
            history_ok = False
        if not history_ok:
            continue
        before = previous.live if previous else {}
        added = [v for entry_id, v in live.items() if before.get(entry_id) is not v]
        retired = [v for entry_id, v in before.items() if live.get(entry_id) is not v]
        removed = [entry_id for entry_id in before if entry_id not in live]
        if not added and not retired:
            c.problem(
                revision_path,
                "changes nothing: the first memory revision must list at least one entry"
                if previous is None
                else "changes nothing: it lists the same entry versions as the previous revision",
            )
            history_ok = False
            continue
        for version in retired:
            retired_in[version.version_id] = number
        previous_sha = services.memory_revision_sha256(
            previous_sha,
            [_VersionRef(v.entry_id, v.version_id, sha256_text(v.body)) for v in added],
            [_VersionRef(v.entry_id, v.version_id, "") for v in retired],
        )
        previous = RevisionSpec(
            path=revision_path, number=number, content_sha256=previous_sha, live=live, added=added, removed=removed
        )
        spec.revisions.append(previous)


def _check_text_revisions(c: _Checker, items: list, path: str, spec: ArtifactSpec) -> None:
    topic = spec.family == Family.TOPIC_MEMORY
    history_ok = True
    previous_sha = None
    for k, item in enumerate(items):
        revision_path = _item(path, k)
        problems_before = len(c.problems)
        if topic:
            obj = c.obj(item, revision_path, required=("title", "summary"), optional=("body",))
        else:
            obj = c.obj(item, revision_path, required=("body",))
        if obj is None:
            history_ok = False
            continue
        title = summary = body = None
        if topic:
            if "title" in obj:
                title = c.text(obj["title"], _child(revision_path, "title"), max_length=MAX_TOPIC_TITLE_CHARACTERS)
            if "summary" in obj:
                summary = c.body(obj["summary"], _child(revision_path, "summary"))
            if obj.get("body") is not None:
                body = c.body(obj["body"], _child(revision_path, "body"))
        elif "body" in obj:
            body = c.body(obj["body"], _child(revision_path, "body"))
        if len(c.problems) != problems_before or not history_ok:
            history_ok = False
            continue
        sha = services.topic_memory_sha256(title=title, summary=summary, body=body) if topic else sha256_text(body)
        if sha == previous_sha:
            c.problem(revision_path, "changes nothing: it is identical to the previous revision")
            history_ok = False
            continue
        previous_sha = sha
        spec.revisions.append(
            RevisionSpec(path=revision_path, number=k + 1, content_sha256=sha, body=body, title=title, summary=summary)
        )


def _check_artifact(c: _Checker, value: object, path: str) -> ArtifactSpec | None:
    obj = c.obj(value, path, required=("scope", "family", "id", "revisions"), optional=("candidates",))
    if obj is None:
        return None
    problems_before = len(c.problems)
    scope_id = c.identifier(obj["scope"], _child(path, "scope")) if "scope" in obj else None
    artifact_id = c.identifier(obj["id"], _child(path, "id")) if "id" in obj else None
    family = None
    if "family" in obj:
        family_path = _child(path, "family")
        if not isinstance(obj["family"], str):
            c.problem(family_path, f"must be a string, not {_json_type(obj['family'])}")
        elif obj["family"] not in STORED_FAMILIES:
            c.problem(family_path, f"must be one of {', '.join(STORED_FAMILIES)}, not {show(obj['family'])}")
        else:
            family = obj["family"]
    if scope_id is None or artifact_id is None or family is None:
        return None
    spec = ArtifactSpec(
        file=c.file,
        path=path,
        scope_id=scope_id,
        family=family,
        artifact_id=artifact_id,
        revisions=[],
        candidates=[],
    )
    if "revisions" in obj:
        revisions_path = _child(path, "revisions")
        items = c.array(obj["revisions"], revisions_path)
        if items is not None:
            if not items and "candidates" not in obj:
                c.problem(revisions_path, "must not be empty")
            if family == Family.MEMORY:
                _check_memory_revisions(c, items, revisions_path, spec)
            else:
                _check_text_revisions(c, items, revisions_path, spec)
    if "candidates" in obj:
        candidates_path = _child(path, "candidates")
        if family != Family.PROFILE:
            c.problem(candidates_path, "only profile artifacts have candidates")
        else:
            for i, item in enumerate(c.array(obj["candidates"], candidates_path) or ()):
                candidate_path = _item(candidates_path, i)
                candidate = c.obj(item, candidate_path, required=("body", "status"))
                if candidate is None:
                    continue
                body = c.body(candidate["body"], _child(candidate_path, "body")) if "body" in candidate else None
                status = candidate.get("status")
                if "status" in candidate and status not in CANDIDATE_STATUSES:
                    c.problem(
                        _child(candidate_path, "status"),
                        f"must be {' or '.join(CANDIDATE_STATUSES)}, not {show(status)}",
                    )
                    continue
                if body is not None and status is not None:
                    spec.candidates.append(CandidateSpec(path=candidate_path, body=body, status=status))
    spec.intact = len(c.problems) == problems_before
    return spec


def _top_level_items(c: _Checker, root: dict, key: str) -> list:
    if key not in root:
        return []
    return c.array(root[key], key) or []


def fixture_documents_check(
    documents: Sequence[FixtureDocument], problems: list[FixtureProblem], *, several: bool = False
) -> FixtureInput:
    """Check the structure of every document (no database); append problems, return what is valid.

    ``several``: problems name their file (when more than one file is loaded).
    """
    result = FixtureInput()
    scopes_at: dict[str, ScopeSpec] = {}
    key_names_at: dict[str, ApiKeySpec] = {}
    key_values_at: dict[str, ApiKeySpec] = {}
    artifacts_at: dict[tuple[str, str, str], ArtifactSpec] = {}

    def where(spec) -> str:
        return f"{spec.file}: {spec.path}" if several else spec.path

    for document in documents:
        c = _Checker(document.name if several else "", problems)
        root = c.obj(document.data, "", required=(), optional=_TOP_LEVEL_KEYS)
        if root is None:
            continue
        for i, item in enumerate(_top_level_items(c, root, "scopes")):
            scope = _check_scope(c, item, _item("scopes", i))
            if scope is None:
                continue
            if scope.scope_id in scopes_at:
                c.problem(
                    _child(scope.path, "id"),
                    f"scope {show(scope.scope_id)} is already defined at {where(scopes_at[scope.scope_id])}",
                )
                continue
            scopes_at[scope.scope_id] = scope
            result.scopes.append(scope)
        for i, item in enumerate(_top_level_items(c, root, "api_keys")):
            api_key = _check_api_key(c, item, _item("api_keys", i))
            if api_key is None:
                continue
            if api_key.name in key_names_at:
                c.problem(
                    _child(api_key.path, "name"),
                    f"API key {show(api_key.name)} is already defined at {where(key_names_at[api_key.name])}",
                )
                continue
            if api_key.key in key_values_at:
                c.problem(_child(api_key.path, "key"), f"is the same key as {where(key_values_at[api_key.key])}.key")
                continue
            key_names_at[api_key.name] = key_values_at[api_key.key] = api_key
            result.api_keys.append(api_key)
        for i, item in enumerate(_top_level_items(c, root, "artifacts")):
            artifact = _check_artifact(c, item, _item("artifacts", i))
            if artifact is None:
                continue
            identity = (artifact.scope_id, artifact.family, artifact.artifact_id)
            if identity in artifacts_at:
                c.problem(
                    artifact.path,
                    f"duplicate artifact: scope {show(artifact.scope_id)}, {artifact.family} "
                    f"{show(artifact.artifact_id)} is already defined at {where(artifacts_at[identity])}",
                )
                continue
            artifacts_at[identity] = artifact
            result.artifacts.append(artifact)
    return result


# --- step 2: comparison with what is stored ---------------------------------------------------


@dataclass
class _Plan:
    """What step 3 writes, decided by step 2."""

    scopes: dict[str, Scope] = field(default_factory=dict)  # every scope the input names, stored ones
    new_scopes: set[str] = field(default_factory=set)
    existing_keys: dict[str, object] = field(default_factory=dict)  # name -> ApiKey
    new_grants: dict[str, list[GrantSpec]] = field(default_factory=dict)  # key name -> grants to add
    stored_revisions: dict[int, int] = field(default_factory=dict)  # id(ArtifactSpec) -> stored head
    stored_candidates: dict[int, int] = field(default_factory=dict)  # id(ArtifactSpec) -> matched candidates


def _problem(problems: list[FixtureProblem], spec, path: str, message: str, several: bool) -> None:
    problems.append(FixtureProblem(path, message, spec.file if several else ""))


def _compare_with_storage(data: FixtureInput, problems: list[FixtureProblem], *, several: bool) -> _Plan:
    plan = _Plan()
    defined = {scope.scope_id for scope in data.scopes}
    named = set(defined)
    for scope in data.scopes:
        named.update(scope.references or ())
    for api_key in data.api_keys:
        named.update(grant.scope_id for grant in api_key.grants)
    named.update(artifact.scope_id for artifact in data.artifacts)
    plan.scopes = selectors.scope_get_many(scope_ids=named)

    def require_scope(spec, path: str, scope_id: str) -> None:
        if scope_id not in defined and scope_id not in plan.scopes:
            _problem(
                problems,
                spec,
                path,
                f"scope {show(scope_id)} does not exist (neither in the input nor stored)",
                several,
            )

    for scope in data.scopes:
        for i, target in enumerate(scope.references or ()):
            require_scope(scope, _item(scope.references_path, i), target)
        stored = plan.scopes.get(scope.scope_id)
        if stored is None:
            plan.new_scopes.add(scope.scope_id)
            continue
        if scope.title is not None and scope.title != stored.title:
            _problem(
                problems,
                scope,
                _child(scope.path, "title"),
                f"scope {show(scope.scope_id)} is stored with the title {show(stored.title)}",
                several,
            )
        if scope.references is not None:
            stored_references = [target.scope_id for target in selectors.scope_references_list(scope=stored)]
            if stored_references != scope.references:
                _problem(
                    problems,
                    scope,
                    scope.references_path,
                    f"scope {show(scope.scope_id)} is stored with the references {show(stored_references)}; "
                    "a fixture does not change the references of an existing scope",
                    several,
                )

    for api_key in data.api_keys:
        for grant in api_key.grants:
            require_scope(api_key, _child(grant.path, "scope"), grant.scope_id)
        key_sha256 = sha256_text(api_key.key)
        stored = selectors.api_key_find_by_name(name=api_key.name)
        holder = selectors.api_key_find_by_sha256(key_sha256=key_sha256)
        if holder is not None and holder.name != api_key.name:
            _problem(
                problems,
                api_key,
                _child(api_key.path, "key"),
                f"this key is stored as API key {show(holder.name)}",
                several,
            )
        if stored is None:
            continue
        plan.existing_keys[api_key.name] = stored
        if stored.key_sha256 != key_sha256:
            _problem(
                problems,
                api_key,
                _child(api_key.path, "key"),
                f"API key {show(api_key.name)} is stored with a different key; a stored key never changes "
                "(revoke it and load the fixture under another name)",
                several,
            )
            continue
        stored_grants = {g.scope.scope_id: g for g in selectors.api_key_grant_list(api_key=stored)}
        for grant in api_key.grants:
            existing = stored_grants.get(grant.scope_id)
            if existing is None:
                plan.new_grants.setdefault(api_key.name, []).append(grant)
            elif (existing.can_read, existing.can_write) != (grant.read, grant.write):
                _problem(
                    problems,
                    api_key,
                    grant.path,
                    f"API key {show(api_key.name)} is stored with read={str(existing.can_read).lower()}, "
                    f"write={str(existing.can_write).lower()} on scope {show(grant.scope_id)}",
                    several,
                )

    for artifact in data.artifacts:
        require_scope(artifact, _child(artifact.path, "scope"), artifact.scope_id)
        scope = plan.scopes.get(artifact.scope_id)
        if scope is None or not artifact.intact:
            continue
        try:
            stored = selectors.artifact_get(scope=scope, family=artifact.family, artifact_id=artifact.artifact_id)
        except NotFound:
            continue
        before = len(problems)
        if artifact.family == Family.MEMORY:
            _compare_memory(artifact, stored, problems, several)
        else:
            _compare_text_revisions(artifact, stored, problems, several)
        if artifact.family == Family.PROFILE:
            plan.stored_candidates[id(artifact)] = _compare_candidates(artifact, stored, problems, several)
        if len(problems) == before:
            plan.stored_revisions[id(artifact)] = stored.head_revision
    return plan


def _compare_memory(artifact: ArtifactSpec, stored, problems: list[FixtureProblem], several: bool) -> None:
    revisions = selectors.artifact_revision_list_all(artifact=stored)
    versions = {v.version_id: v for v in selectors.memory_entry_version_list_all(artifact=stored)}
    found = False
    born_in = {v.version_id: r.number for r in artifact.revisions for v in r.added}
    for version_id, first in artifact.versions.items():
        version = versions.get(version_id)
        if version is None:
            continue
        if version.entry_id != first.entry_id:
            message = f"version {show(version_id)} is stored for entry {show(version.entry_id)}"
            path = _child(first.path, "version")
        elif version.body != first.body:
            message = (
                f"differs from the stored body of version {show(version_id)} "
                f"(born in revision {version.born_in_revision}); a version is immutable"
            )
            path = _child(first.path, "body")
        elif version.born_in_revision != born_in.get(version_id):
            message = (
                f"version {show(version_id)} is stored as born in revision {version.born_in_revision}, "
                f"the fixture adds it in revision {born_in.get(version_id)}"
            )
            path = _child(first.path, "version")
        else:
            continue
        found = True
        _problem(problems, artifact, path, message, several)
    if found:
        return
    for spec, revision in zip(artifact.revisions, revisions, strict=False):
        if spec.content_sha256 == revision.content_sha256:
            continue
        stored_live = {(v.entry_id, v.version_id) for v in versions.values() if v.is_live_at(revision.revision)}
        fixture_live = {(e.entry_id, e.version_id) for e in spec.live.values()}
        details = []
        if stored_live - fixture_live:
            details.append(f"stored only: {_pairs(stored_live - fixture_live)}")
        if fixture_live - stored_live:
            details.append(f"fixture only: {_pairs(fixture_live - stored_live)}")
        _problem(
            problems,
            artifact,
            spec.path,
            f"differs from stored revision {revision.revision}"
            + (f" ({'; '.join(details)})" if details else " (its history differs)"),
            several,
        )
        return  # later revisions chain from this one: one message is enough


def _pairs(pairs: set[tuple[str, str]], limit: int = 5) -> str:
    shown = sorted(pairs)[:limit]
    text = ", ".join(f"{show(entry)}@{show(version)}" for entry, version in shown)
    return text + (f" and {len(pairs) - limit} more" if len(pairs) > limit else "")


def _compare_text_revisions(artifact: ArtifactSpec, stored, problems: list[FixtureProblem], several: bool) -> None:
    revisions = selectors.artifact_revision_list_all(artifact=stored)
    for spec, revision in zip(artifact.revisions, revisions, strict=False):
        if spec.content_sha256 == revision.content_sha256:
            continue
        differing = [
            name
            for name in (("title", "summary", "body") if artifact.family == Family.TOPIC_MEMORY else ("body",))
            if getattr(spec, name) != getattr(revision, name)
        ] or ["body"]
        for name in differing:
            _problem(
                problems,
                artifact,
                _child(spec.path, name),
                f"differs from stored revision {revision.revision}; a revision is immutable",
                several,
            )


def _compare_candidates(artifact: ArtifactSpec, stored, problems: list[FixtureProblem], several: bool) -> int:
    """Fixture candidates are matched in order with the stored candidates a fixture proposed."""
    stored_candidates = [
        c for c in selectors.profile_candidate_list_all(artifact=stored) if c.proposed_by == FIXTURE_AUTHOR
    ]
    for spec, candidate in zip(artifact.candidates, stored_candidates, strict=False):
        if spec.body != candidate.body:
            _problem(
                problems,
                artifact,
                _child(spec.path, "body"),
                f"differs from stored candidate #{candidate.pk} (candidates are matched in order)",
                several,
            )
        elif spec.status == ProfileCandidate.Status.REJECTED and candidate.status != spec.status:
            # A pending candidate may since have been committed or rejected; a rejected one never changes.
            _problem(
                problems,
                artifact,
                _child(spec.path, "status"),
                f"stored candidate #{candidate.pk} is {candidate.status}, not rejected",
                several,
            )
    return min(len(artifact.candidates), len(stored_candidates))


# --- step 3: writing --------------------------------------------------------------------------


def _write(data: FixtureInput, plan: _Plan, progress: Progress, author: str) -> FixtureLoadSummary:
    summary = FixtureLoadSummary(
        scopes=len(data.scopes),
        api_keys=len(data.api_keys),
        artifacts=len(data.artifacts),
        revisions=sum(len(a.revisions) for a in data.artifacts),
        candidates=sum(len(a.candidates) for a in data.artifacts),
    )
    scopes = plan.scopes
    for scope in data.scopes:
        if scope.scope_id in plan.new_scopes:
            scopes[scope.scope_id] = services.scope_create(scope_id=scope.scope_id, title=scope.title or "")
    for i, scope in enumerate(data.scopes, start=1):
        if scope.scope_id in plan.new_scopes:
            summary.scopes_created += 1
            references = scope.references or []
            if references:
                services.scope_references_set(scope=scopes[scope.scope_id], targets=[scopes[t] for t in references])
                summary.references_set += 1
            state = "created" + (f", references {' → '.join(label(t) for t in references)}" if references else "")
        else:
            state = "unchanged"
        progress(f"scope {i}/{len(data.scopes)} {label(scope.scope_id)} — {state}")

    for i, api_key in enumerate(data.api_keys, start=1):
        stored = plan.existing_keys.get(api_key.name)
        if stored is None:
            services.api_key_create(
                name=api_key.name,
                key=api_key.key,
                read_scopes=[scopes[g.scope_id] for g in api_key.grants if g.read],
                write_scopes=[scopes[g.scope_id] for g in api_key.grants if g.write],
            )
            summary.api_keys_created += 1
            state = f"created with {_count(len(api_key.grants), 'grant')}"
        else:
            added = plan.new_grants.get(api_key.name, [])
            for grant in added:
                services.api_key_grant_set(
                    api_key=stored, scope=scopes[grant.scope_id], can_read=grant.read, can_write=grant.write
                )
            summary.grants_created += len(added)
            state = f"{_count(len(added), 'grant')} added" if added else "unchanged"
            if stored.revoked_at is not None:
                state += " (revoked: stays revoked)"
        progress(f"api key {i}/{len(data.api_keys)} {label(api_key.name)} — {state}")

    for i, artifact in enumerate(data.artifacts, start=1):
        scope = scopes[artifact.scope_id]
        head = plan.stored_revisions.get(id(artifact), 0)
        created = 0
        for spec in artifact.revisions[head:]:
            _revision_write(artifact, spec, scope=scope, head=head + created, author=author)
            created += 1
        summary.revisions_created += created
        parts = [f"{_count(len(artifact.revisions), 'revision')}, {created} new"]
        if head > len(artifact.revisions):
            parts[0] += f" ({head} stored)"
        if artifact.family == Family.PROFILE and artifact.candidates:
            matched = plan.stored_candidates.get(id(artifact), 0)
            for candidate in artifact.candidates[matched:]:
                services.profile_candidate_propose(
                    scope=scope,
                    artifact_id=artifact.artifact_id,
                    body=candidate.body,
                    status=candidate.status,
                    proposed_by=author,
                )
            new_candidates = len(artifact.candidates) - matched
            summary.candidates_created += new_candidates
            parts.append(f"{_count(len(artifact.candidates), 'candidate')}, {new_candidates} new")
        progress(
            f"artifact {i}/{len(data.artifacts)} {label(artifact.scope_id)} "
            f"{artifact.family}:{label(artifact.artifact_id)} — {'; '.join(parts)}"
        )
    return summary


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _revision_write(artifact: ArtifactSpec, spec: RevisionSpec, *, scope: Scope, head: int, author: str) -> None:
    common = {"scope": scope, "artifact_id": artifact.artifact_id, "author": author, "expected_head_revision": head}
    family = artifact.family
    if family == Family.MEMORY:
        services.memory_revision_create(
            writes=[
                services.EntryVersionWrite(entry_id=e.entry_id, version_id=e.version_id, body=e.body)
                for e in spec.added
            ],
            removals=spec.removed,
            **common,
        )
    elif family == Family.EXPERIENCE:
        services.experience_revision_create(body=spec.body, **common)
    elif family == Family.PROFILE:
        services.profile_revision_create(body=spec.body, **common)
    elif family == Family.TOPIC_MEMORY:
        services.topic_memory_revision_create(title=spec.title, summary=spec.summary, body=spec.body, **common)
    else:
        services.artifact_body_revision_create(family=family, body=spec.body, **common)


# --- entry point ------------------------------------------------------------------------------


def _ignore(line: str) -> None:
    pass


def fixture_files_load(
    paths: Sequence[str | Path], *, progress: Progress = _ignore, author: str = FIXTURE_AUTHOR
) -> FixtureLoadSummary:
    """Validate every file completely, then load them all in one transaction.

    Raises FixtureInvalid (nothing written) listing every problem. Idempotent: what is already
    stored is skipped; stored immutable content that the input contradicts is a problem.
    ``progress`` receives one line per scope, API key and artifact.
    """
    several = len(paths) > 1
    documents, problems = fixture_files_read(paths)
    data = fixture_documents_check(documents, problems, several=several)
    with transaction.atomic():
        # Compare and write in one transaction: what was compared is what gets written on.
        plan = _compare_with_storage(data, problems, several=several)
        if problems:
            raise FixtureInvalid(problems)
        return _write(data, plan, progress, author)
