"""Citations as an agent pastes them from prepared content: the Markdown metadata lines or one legacy item.

Prepared content prints every citation as JSON string literals (DESIGN §6)::

    Scope: "project:demo"
    Artifact: family="memory", id="memory", revision=3
    Entry: id="entry-1", version="entry-1-v2"

or, in the legacy envelope, as one item ``{"family":…,"scope":…,"artifact":{"id":…,"revision":…},"entry":{…}}``.
Identities are decoded with ``json`` (a quote or line break in an identity decodes to exactly the stored
character). The server's operator tools have their own parser, ``vocabulary/citation_text.py`` (the server installs
neither this package nor the client, and an installed host has no server to import). This one accepts what that one
accepts (also a whole entry, the ``{"items":…}`` line or a whole legacy content) and reads it alike, but leaves the
checks of values to the API, which refuses a citation naming nothing stored: tests/mcp/test_citation_parity.py
compares the two on generated text, down every path of this one.
"""

from __future__ import annotations

import json
import re

from powercontext_client import Citation

_DECODER = json.JSONDecoder()
_LABEL_RE = re.compile(r"\s*(Scope|Artifact|Entry):(.*)\Z")
_MAX_PASTE_CHARACTERS = 100_000
# The legacy content's markers (the server's ``vocabulary/envelope.py``; tests/mcp/test_citations.py holds them equal).
LEGACY_BEGIN = "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1"
LEGACY_END = "END_POWERCONTEXT_PREPARED_CONTEXT_V1"
_LEGACY_ITEM_KEYS = frozenset(("family", "scope", "artifact", "entry", "body", "truncated"))


class CitationTextError(ValueError):
    """The pasted text does not hold exactly one citation; the message says what is wrong."""


class _Cursor:
    def __init__(self, label: str, text: str) -> None:
        self.label, self.text, self.position = label, text, 0

    def fail(self, problem: str) -> CitationTextError:
        return CitationTextError(f"{self.label} line: {problem}")

    def literal(self, what: str) -> str:
        if not self.text.startswith('"', self.position):
            raise self.fail(f"expected {what} as a JSON string literal")
        value: str  # a JSON string literal starts at position, so the decoded value is a str
        try:
            value, self.position = _DECODER.raw_decode(self.text, self.position)
        except json.JSONDecodeError as exc:
            raise self.fail(f"{what} is not a valid JSON string literal: {exc.msg}") from None
        return value

    def expect(self, token: str) -> None:
        if not self.text.startswith(token, self.position):
            raise self.fail(f'expected "{token.strip()}"')
        self.position += len(token)

    def integer(self, what: str) -> int:
        match = re.compile(r"[1-9][0-9]{0,9}").match(self.text, self.position)
        if match is None:
            raise self.fail(f"expected {what} as a whole number from 1")
        self.position = match.end()
        return int(match.group())

    def end(self) -> None:
        if self.text[self.position :].strip(" \t\r"):
            raise self.fail("unexpected text after the citation")


def _citation(
    scope_id: str,
    family: str,
    artifact_id: str,
    revision: int,
    entry_id: str | None = None,
    entry_version: str | None = None,
) -> Citation:
    return Citation(
        scope_id=scope_id,
        family=family,
        artifact_id=artifact_id,
        revision=revision,
        entry_id=entry_id,
        entry_version=entry_version,
    )


def _markdown(lines: list[str]) -> Citation:
    found: dict[str, list[str]] = {"Scope": [], "Artifact": [], "Entry": []}
    for line in lines:
        if line.lstrip().startswith((">", "#")):
            continue  # a quoted body line or a heading: never a citation
        match = _LABEL_RE.match(line)
        if match:
            found[match.group(1)].append(match.group(2))
    for label, values in found.items():
        if len(values) > 1:
            raise CitationTextError(f"the text holds {len(values)} {label} lines: paste the citation of one entry")
    for label in ("Scope", "Artifact"):
        if not found[label]:
            raise CitationTextError(
                f"the {label} line is missing: paste the Scope and Artifact lines (and the Entry line for memory) "
                "of one entry, or one legacy JSON item"
            )
    scope = _Cursor("Scope", found["Scope"][0])
    scope.expect(" ")
    scope_id = scope.literal("the scope")
    scope.end()
    artifact = _Cursor("Artifact", found["Artifact"][0])
    artifact.expect(" family=")
    family = artifact.literal("the family")
    artifact.expect(", id=")
    artifact_id = artifact.literal("the artifact id")
    artifact.expect(", revision=")
    revision = artifact.integer("the revision")
    artifact.end()
    if not found["Entry"]:
        return _citation(scope_id, family, artifact_id, revision)
    entry = _Cursor("Entry", found["Entry"][0])
    entry.expect(" id=")
    entry_id = entry.literal("the entry id")
    entry.expect(", version=")
    entry_version = entry.literal("the entry version")
    entry.end()
    return _citation(scope_id, family, artifact_id, revision, entry_id, entry_version)


def _legacy_json_text(lines: list[str]) -> str | None:
    """The JSON part of a pasted legacy item, the ``{"items":…}`` line, or a whole legacy content (between its
    markers); None when the text is not JSON (Markdown lines then)."""
    stripped = [line.strip() for line in lines if line.strip()]
    if LEGACY_BEGIN in stripped:
        start = stripped.index(LEGACY_BEGIN) + 1
        end = stripped.index(LEGACY_END) if LEGACY_END in stripped else len(stripped)
        stripped = stripped[start:end]
    text = "\n".join(stripped).strip(" \t\n,")
    return text if text.startswith(("{", "[")) else None


def _legacy(text: str) -> Citation:
    try:
        item = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise CitationTextError(f"not a valid JSON item: {getattr(exc, 'msg', exc)}") from None
    if isinstance(item, dict) and "items" in item and "family" not in item:
        item = item["items"]
        if not isinstance(item, list):
            raise CitationTextError('"items" must be an array')
    if isinstance(item, list):
        if len(item) != 1:
            raise CitationTextError(f"the text holds {len(item)} items: paste a single item")
        item = item[0]
    artifact = item.get("artifact") if isinstance(item, dict) else None
    if (
        not isinstance(artifact, dict)
        or not {"family", "scope"} <= set(item)
        or not {"id", "revision"} <= set(artifact)
    ):
        raise CitationTextError('a legacy item needs "family", "scope", "artifact": {"id", "revision"}')
    unknown = (set(item) - _LEGACY_ITEM_KEYS) | {f"artifact.{key}" for key in set(artifact) - {"id", "revision"}}
    if unknown:
        raise CitationTextError(f"unknown field {json.dumps(min(unknown), ensure_ascii=False)} in the legacy item")
    entry = item.get("entry")
    if "entry" in item and (not isinstance(entry, dict) or set(entry) != {"id", "version"}):
        raise CitationTextError('a legacy item\'s "entry" is {"id", "version"}')
    values = (item["scope"], item["family"], artifact["id"], artifact["revision"])
    entry_values = (entry["id"], entry["version"]) if entry is not None else (None, None)
    if not all(isinstance(value, str) for value in values[:3]) or type(values[3]) is not int or values[3] < 1:
        raise CitationTextError("a legacy item's scope, family and artifact id are strings, its revision from 1")
    if entry is not None and not all(isinstance(value, str) for value in entry_values):
        raise CitationTextError("a legacy item's entry id and version are strings")
    return _citation(*values, *entry_values)


def parse_pasted_citation(text: str) -> Citation:
    """The one citation in ``text``: Markdown metadata lines (a whole entry is fine) or one legacy JSON item (with the
    commas around it, the ``{"items":[…]}`` line, or a whole legacy content holding one item)."""
    if not text.strip():
        raise CitationTextError("paste a citation: the Scope / Artifact / Entry lines or one legacy JSON item")
    if len(text) > _MAX_PASTE_CHARACTERS:
        raise CitationTextError(f"the pasted text is longer than {_MAX_PASTE_CHARACTERS} characters")
    lines = re.split("\r\n|\r|\n", text)
    legacy = _legacy_json_text(lines)
    if legacy is not None:
        return _legacy(legacy)
    return _markdown(lines)
