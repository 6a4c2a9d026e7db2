"""Exact citations as operators paste them: parsing (pure Python, no ORM, no Django).

Prepared content carries every citation in one of two forms (DESIGN §6):

- Markdown V1 metadata lines, indented four spaces::

      Scope: "project:demo"
      Artifact: family="memory", id="memory", revision=3
      Entry: id="entry-1", version="entry-1-v2"

- one item of the legacy envelope's ``items`` array::

      {"family":"memory","scope":"project:demo","artifact":{"id":"memory","revision":3},
       "entry":{"id":"entry-1","version":"entry-1-v2"},"body":"…","truncated":false}

Identity strings are JSON string literals in both forms (``json.dumps(ensure_ascii=False)`` plus
``\\uXXXX`` escapes for the remaining Cc, Cf, U+2028 and U+2029 characters), so they are decoded with
``json``, never with regular expressions: a quote, newline or bidi control in an identity decodes to
exactly the stored character. ``parse_citation_text`` accepts either form (also a whole entry or a
whole one-item content; body lines are ignored because the renderer quotes every one of them), and
``citation_from_fields`` builds a citation from separate form fields. Both raise ``CitationSyntaxError``
with a message naming what is wrong; neither guesses (no head, no nearest match).

powercontext-mcp reads pasted citations with its own parser (``powercontext_mcp/citations.py``: the server installs
neither the MCP package nor the client, and this package imports nothing outside the standard library); it accepts
what this one accepts and leaves the checks of values to the API. tests/mcp/test_citation_parity.py compares the two
on generated text.
"""

from __future__ import annotations

import json
import re

from .citation import Citation
from .envelope import LEGACY_BEGIN, LEGACY_END
from .escaping import json_literal
from .families import STORED_FAMILIES
from .json_input import json_depth_problem
from .limits import MAX_IDENTIFIER_CHARACTERS, MAX_REVISION
from .text import stored_text_problem

MARKDOWN_LABELS = ("Scope", "Artifact", "Entry")
LEGACY_ITEM_KEYS = ("family", "scope", "artifact", "entry", "body", "truncated")

_LINE_SPLIT_RE = re.compile("\r\n|\r|\n")
_LABEL_RE = re.compile(r"\s*(Scope|Artifact|Entry):(.*)\Z", re.DOTALL)
_DIGITS_RE = re.compile(r"[0-9]+")
_DECODER = json.JSONDecoder()


class CitationSyntaxError(ValueError):
    """The text or the fields do not form one exact citation; the message says what is wrong."""


# --- validation of decoded values -----------------------------------------------------------------


def _check_identity(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise CitationSyntaxError(f"{what} must be a string")
    if not value:
        raise CitationSyntaxError(f"{what} must not be empty")
    if len(value) > MAX_IDENTIFIER_CHARACTERS:
        raise CitationSyntaxError(f"{what} is longer than {MAX_IDENTIFIER_CHARACTERS} characters")
    problem = stored_text_problem(value)
    if problem:
        raise CitationSyntaxError(f"{what} {problem}")
    return value


def _check_family(value: object, what: str = "family") -> str:
    if not isinstance(value, str) or value not in STORED_FAMILIES:
        shown = json_literal(value) if isinstance(value, str) else json.dumps(value)
        raise CitationSyntaxError(f"{what} {shown} is not one of " + ", ".join(STORED_FAMILIES))
    return value


def _check_revision(value: object, what: str = "revision") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CitationSyntaxError(f"{what} must be an integer")
    if not 1 <= value <= MAX_REVISION:
        raise CitationSyntaxError(f"{what} must be between 1 and {MAX_REVISION}, got {value}")
    return value


def _build(
    scope_id: object,
    family: object,
    artifact_id: object,
    revision: object,
    entry_id: object = None,
    entry_version: object = None,
    *,
    names: dict[str, str],
) -> Citation:
    """Validate decoded parts; ``names`` maps part → how the input calls it (for messages)."""
    family = _check_family(family, names["family"])
    scope_id = _check_identity(scope_id, names["scope_id"])
    artifact_id = _check_identity(artifact_id, names["artifact_id"])
    revision = _check_revision(revision, names["revision"])
    if (entry_id is None) != (entry_version is None):
        raise CitationSyntaxError(
            f"{names['entry_id']} and {names['entry_version']} must be given together (or both left out)"
        )
    checked_entry_id: str | None = None
    checked_entry_version: str | None = None
    if entry_id is not None:
        if family != "memory":
            raise CitationSyntaxError(f"only memory citations name an entry; this one is {family}")
        checked_entry_id = _check_identity(entry_id, names["entry_id"])
        checked_entry_version = _check_identity(entry_version, names["entry_version"])
    return Citation(scope_id, family, artifact_id, revision, checked_entry_id, checked_entry_version)


# --- Markdown metadata lines ----------------------------------------------------------------------


class _Cursor:
    """Reads one metadata line's value: JSON string literals, ``name=`` labels, integers."""

    def __init__(self, label: str, text: str) -> None:
        self.label = label
        self.text = text
        self.position = 0

    def fail(self, problem: str) -> CitationSyntaxError:
        return CitationSyntaxError(f"{self.label} line: {problem} (at character {self.position + 1} of the value)")

    def literal(self, what: str) -> str:
        if not self.text.startswith('"', self.position):
            raise self.fail(f"expected {what} as a JSON string literal")
        value: str  # a JSON string literal starts at position, so the decoded value is a str
        try:
            value, end = _DECODER.raw_decode(self.text, self.position)
        except json.JSONDecodeError as exc:
            raise CitationSyntaxError(
                f"{self.label} line: {what} is not a valid JSON string literal: {exc.msg}"
            ) from None
        self.position = end
        return value

    def expect(self, token: str) -> None:
        if not self.text.startswith(token, self.position):
            raise self.fail(f'expected "{token}"')
        self.position += len(token)

    def integer(self, what: str) -> int:
        match = _DIGITS_RE.match(self.text, self.position)
        if match is None:
            raise self.fail(f"expected {what} as a whole number")
        digits = match.group()
        if len(digits) > 1 and digits.startswith("0"):
            raise self.fail(f"{what} {digits[:20]} has a leading zero")
        self.position = match.end()
        return _whole_number(digits, what)

    def end(self) -> None:
        rest = self.text[self.position :].strip(" \t")
        if rest:
            raise self.fail(f"unexpected text after the citation: {json_literal(rest[:40])}")


_MARKDOWN_NAMES = {
    "scope_id": "the Scope line's scope",
    "family": "the Artifact line's family",
    "artifact_id": "the Artifact line's id",
    "revision": "the Artifact line's revision",
    "entry_id": "the Entry line's id",
    "entry_version": "the Entry line's version",
}


def _parse_markdown(lines: list[str]) -> Citation:
    found: dict[str, list[str]] = {label: [] for label in MARKDOWN_LABELS}
    for line in lines:
        if line.lstrip().startswith((">", "#")):
            continue  # a quoted body line or a heading: never a citation
        match = _LABEL_RE.match(line)
        if match:
            found[match.group(1)].append(match.group(2))
    if not found["Scope"] and not found["Artifact"] and not found["Entry"]:
        raise CitationSyntaxError(
            "no citation found: paste the Scope and Artifact lines (and the Entry line for memory) of one "
            "Markdown entry, or one legacy JSON item"
        )
    for label in MARKDOWN_LABELS:
        if len(found[label]) > 1:
            raise CitationSyntaxError(
                f"the text holds {len(found[label])} {label} lines: paste the citation of one entry only"
            )
    for label in ("Scope", "Artifact"):
        if not found[label]:
            raise CitationSyntaxError(f"the {label} line is missing")

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

    entry_id = entry_version = None
    if found["Entry"]:
        entry = _Cursor("Entry", found["Entry"][0])
        entry.expect(" id=")
        entry_id = entry.literal("the entry id")
        entry.expect(", version=")
        entry_version = entry.literal("the entry version")
        entry.end()
    return _build(scope_id, family, artifact_id, revision, entry_id, entry_version, names=_MARKDOWN_NAMES)


# --- legacy JSON items ----------------------------------------------------------------------------

_LEGACY_NAMES = {
    "scope_id": "scope",
    "family": "family",
    "artifact_id": "artifact.id",
    "revision": "artifact.revision",
    "entry_id": "entry.id",
    "entry_version": "entry.version",
}


def _legacy_item(item: object) -> Citation:
    if not isinstance(item, dict):
        raise CitationSyntaxError("a legacy item must be a JSON object")
    for key in item:
        if key not in LEGACY_ITEM_KEYS:
            raise CitationSyntaxError(f"unknown field {json_literal(key)} in the legacy item")
    for key in ("family", "scope", "artifact"):
        if key not in item:
            raise CitationSyntaxError(f'the legacy item has no "{key}"')
    artifact = item["artifact"]
    if not isinstance(artifact, dict) or set(artifact) != {"id", "revision"}:
        raise CitationSyntaxError('"artifact" must be an object with exactly "id" and "revision"')
    entry_id = entry_version = None
    if "entry" in item:
        entry = item["entry"]
        if not isinstance(entry, dict) or set(entry) != {"id", "version"}:
            raise CitationSyntaxError('"entry" must be an object with exactly "id" and "version"')
        entry_id, entry_version = entry["id"], entry["version"]
        if entry_id is None or entry_version is None:
            raise CitationSyntaxError("entry.id and entry.version must be strings")
    return _build(
        item["scope"],
        item["family"],
        artifact["id"],
        artifact["revision"],
        entry_id,
        entry_version,
        names=_LEGACY_NAMES,
    )


def _whole_number(digits: str, what: str) -> int:
    # int() of thousands of digits is refused by Python itself (and costly before that): no revision has them.
    if len(digits) > len(str(MAX_REVISION)):
        raise CitationSyntaxError(f"{what} must be between 1 and {MAX_REVISION}, got a {len(digits)}-digit number")
    return int(digits)


def _parse_legacy(text: str) -> Citation:
    problem = json_depth_problem(text)
    if problem:
        raise CitationSyntaxError(f"not a valid JSON item: {problem}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CitationSyntaxError(f"not a valid JSON item: {exc.msg} at character {exc.pos + 1}") from None
    if isinstance(value, dict) and "items" in value and "family" not in value:
        items = value["items"]
        if not isinstance(items, list):
            raise CitationSyntaxError('"items" must be an array')
        if len(items) != 1:
            raise CitationSyntaxError(f"the envelope holds {len(items)} items: paste a single item")
        value = items[0]
    elif isinstance(value, list):
        if len(value) != 1:
            raise CitationSyntaxError(f"the array holds {len(value)} items: paste a single item")
        value = value[0]
    return _legacy_item(value)


def _legacy_json_text(lines: list[str]) -> str | None:
    """The JSON part of a pasted legacy item, the ``{"items":…}`` line, or a whole legacy envelope."""
    stripped = [line.strip() for line in lines if line.strip()]
    if LEGACY_BEGIN in stripped:
        start = stripped.index(LEGACY_BEGIN) + 1
        end = stripped.index(LEGACY_END) if LEGACY_END in stripped else len(stripped)
        stripped = stripped[start:end]
    text = "\n".join(stripped).strip(" \t\n,")
    return text if text.startswith(("{", "[")) else None


# --- entry points ---------------------------------------------------------------------------------


def parse_citation_text(text: str) -> Citation:
    """The one citation in pasted prepared-content text (Markdown metadata lines or a legacy item).

    Accepts the metadata lines alone, a whole Markdown entry or content holding one entry, a legacy
    item (with or without the separating commas around it), the ``{"items":[…]}`` line or a whole
    legacy content holding one item. Lines may end in LF or CRLF (browsers submit CRLF).
    """
    if not isinstance(text, str) or not text.strip():
        raise CitationSyntaxError("paste a citation: the Scope / Artifact / Entry lines or one legacy JSON item")
    lines = _LINE_SPLIT_RE.split(text)
    legacy = _legacy_json_text(lines)
    if legacy is not None:
        return _parse_legacy(legacy)
    return _parse_markdown(lines)


_FIELD_NAMES = {
    "scope_id": "scope",
    "family": "family",
    "artifact_id": "artifact id",
    "revision": "revision",
    "entry_id": "entry id",
    "entry_version": "entry version",
}


def _field_value(value: str | None, name: str, *, literals: bool) -> str | None:
    if value is None or value == "":
        return None
    if not literals:
        return value
    text = value.strip(" \t")
    try:
        decoded, end = _DECODER.raw_decode(text) if text.startswith('"') else (None, 0)
    except json.JSONDecodeError as exc:
        raise CitationSyntaxError(f"{name} is not a valid JSON string literal: {exc.msg}") from None
    if not isinstance(decoded, str) or end != len(text):
        raise CitationSyntaxError(f'{name} must be one JSON string literal, e.g. "project:demo"')
    return decoded


def identity_from_field(value: str, what: str, *, literals: bool = False) -> str:
    """One identity typed into a form field (a scope id, a key name): exactly as typed, or with ``literals`` a JSON
    string literal; checked as a citation's identities are (``CitationSyntaxError`` says what is wrong)."""
    decoded = _field_value(value, what, literals=literals)
    if decoded is None:
        raise CitationSyntaxError(f"{what} is required")
    return _check_identity(decoded, what)


def citation_from_fields(
    *,
    scope_id: str | None,
    family: str | None,
    artifact_id: str | None,
    revision: int | str | None,
    entry_id: str | None = None,
    entry_version: str | None = None,
    literals: bool = False,
) -> Citation:
    """A citation from separate fields, taken exactly as typed (no trimming).

    With ``literals`` each identity field holds a JSON string literal as prepared content prints it
    (``"a\\u202eb"``), so identities with quotes, line breaks or invisible characters can be entered.
    Both entry fields empty: the revision itself (for memory, the revision page listing its entries).
    """
    values = {
        "scope_id": _field_value(scope_id, "scope", literals=literals),
        "artifact_id": _field_value(artifact_id, "artifact id", literals=literals),
        "entry_id": _field_value(entry_id, "entry id", literals=literals),
        "entry_version": _field_value(entry_version, "entry version", literals=literals),
    }
    for key in ("scope_id", "artifact_id"):
        if values[key] is None:
            raise CitationSyntaxError(f"{_FIELD_NAMES[key]} is required")
    if family in (None, ""):
        raise CitationSyntaxError("family is required")
    if revision in (None, ""):
        raise CitationSyntaxError("revision is required")
    if isinstance(revision, str):
        if not re.fullmatch(r"[0-9]+", revision.strip()):
            raise CitationSyntaxError("revision must be a whole number")
        revision = _whole_number(revision.strip(), "revision")
    return _build(
        values["scope_id"],
        family,
        values["artifact_id"],
        revision,
        values["entry_id"],
        values["entry_version"],
        names=_FIELD_NAMES,
    )
