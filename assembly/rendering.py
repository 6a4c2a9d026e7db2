"""Text layout for the two prepared-context formats (pure Python, no Django).

Markdown V1 (assembly given) and the legacy JSON envelope V1 (assembly omitted) share one budget engine
(`assembly.budget`). This module owns every byte of layout: headings, metadata, quoting and the
envelope around the entries; the notice and markers (`vocabulary.envelope`) and the escaping rules
(`vocabulary.escaping`) are shared with the citation parser and the operator tools. For each entry it
offers an `EntryForm`: the bytes the entry adds around its body (complete and truncated) and a `Body`
whose prefixes the budget engine can measure without rendering.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from vocabulary.citation import Citation
from vocabulary.envelope import LEGACY_BEGIN, LEGACY_END, MARKDOWN_BEGIN, MARKDOWN_END, MARKDOWN_TITLE, NOTICE
from vocabulary.escaping import (
    BODY_ESCAPES,
    JSON_ESCAPES,
    CharClass,
    body_escape,
    escape_body_controls,
    json_escape,
    json_literal,
)
from vocabulary.families import SECTION_TITLES

from .budget import ELLIPSIS, Body
from .memo import remembered

METADATA_INDENT = "    "
BODY_PREFIX = ">     "
CONFIDENCE_UNKNOWN = "unknown (not assessed)"

MARKDOWN_PREFIX = f"{MARKDOWN_TITLE}\n\n{NOTICE}\n\n{MARKDOWN_BEGIN}\n"
MARKDOWN_SUFFIX = f"\n{MARKDOWN_END}"
LEGACY_PREFIX = f'{NOTICE}\n\n{LEGACY_BEGIN}\n{{"items":['
LEGACY_SUFFIX = f"]}}\n{LEGACY_END}"


def normalize_line_breaks(body: str) -> str:
    """CRLF, CR, U+2028 and U+2029 become LF."""
    if "\r" in body:
        body = body.replace("\r\n", "\n").replace("\r", "\n")
    if "\u2028" in body:
        body = body.replace("\u2028", "\n")
    if "\u2029" in body:
        body = body.replace("\u2029", "\n")
    return body


def normalize_body(body: str) -> str:
    """The Markdown presentation of a body: line breaks normalized, controls made visible."""
    return escape_body_controls(normalize_line_breaks(body))


def quote_body(text: str) -> str:
    """Prefix every line, empty ones too, with '>' and five spaces; LF-terminated."""
    return BODY_PREFIX + text.replace("\n", "\n" + BODY_PREFIX) + "\n"


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


# --- Bodies as the budget engine sees them -------------------------------------------------------


class _Escaped:
    """A text, its UTF-8 bytes, and its escaped form (a class of characters replaced by ASCII escapes).

    Cuts are UTF-8 byte offsets into the text. Any prefix can be measured (bytes before and after
    escaping, line breaks) in C-speed steps without escaping again, and its escaped form is sliced out
    of `escaped`; the escapes before a cut are found by bisection.
    """

    __slots__ = ("text", "data", "escaped", "_ascii", "_starts", "_extra_bytes", "_extra_chars")

    def __init__(self, text: str, escapes: CharClass, escape: Callable[[str], str]) -> None:
        self.text = text
        self.data = text.encode("utf-8")
        self._ascii = len(self.data) == len(text)
        self._starts: list[int] = []  # byte offset of each escaped character
        self._extra_bytes = [0]  # bytes the first k escapes add
        self._extra_chars = [0]  # characters the first k escapes add
        pieces = escapes.split(text)  # plain, character, plain, character, ..., plain
        if len(pieces) == 1:
            self.escaped = text
            return
        offset = extra_bytes = extra_chars = 0
        for index in range(1, len(pieces), 2):
            plain, char = pieces[index - 1], pieces[index]
            offset += len(plain) if self._ascii else len(plain.encode("utf-8"))
            self._starts.append(offset)
            size = len(char.encode("utf-8"))
            offset += size
            escaped = escape(char)
            extra_bytes += len(escaped) - size
            extra_chars += len(escaped) - 1
            self._extra_bytes.append(extra_bytes)
            self._extra_chars.append(extra_chars)
            pieces[index] = escaped
        self.escaped = "".join(pieces)

    def boundary(self, cut: int) -> int:
        """The largest code point boundary at or before byte offset `cut`."""
        data = self.data
        while 0 < cut < len(data) and data[cut] & 0xC0 == 0x80:
            cut -= 1
        return cut

    def escaped_bytes(self, cut: int) -> int:
        """UTF-8 bytes of the escaped form of the first `cut` bytes."""
        return cut + self._extra_bytes[bisect_left(self._starts, cut)]

    def line_breaks(self, cut: int) -> int:
        return self.data.count(b"\n", 0, cut)

    def escaped_prefix(self, cut: int) -> str:
        """The escaped form of the first `cut` bytes (`cut` on a code point boundary)."""
        chars = cut if self._ascii else len(self.data[:cut].decode("utf-8"))
        return self.escaped[: chars + self._extra_chars[bisect_left(self._starts, cut)]]


class MarkdownBody:
    """A quoted body, cut on code point boundaries of its line-normalized text: no escape is split.

    cap(cut): UTF-8 bytes of the escaped prefix (what the 2000-byte cap and 64-byte minimum measure).
    cost(cut): bytes of the quoted prefix: cap plus one quote prefix per line, plus the final LF.
    """

    __slots__ = ("_body", "units", "complete_cap", "complete_cost")

    fixed_cost = len(BODY_PREFIX) + 1

    def __init__(self, body: str) -> None:
        self._body = _Escaped(normalize_line_breaks(body), BODY_ESCAPES, body_escape)
        self.units = len(self._body.data)
        self.complete_cap = self.cap(self.units)
        self.complete_cost = self.cost(self.units)

    def boundary(self, cut: int) -> int:
        return self._body.boundary(cut)

    def cap(self, cut: int) -> int:
        return self._body.escaped_bytes(cut)

    def cost(self, cut: int) -> int:
        quotes = len(BODY_PREFIX) * self._body.line_breaks(cut)
        return self._body.escaped_bytes(cut) + quotes + self.fixed_cost

    def render(self, cut: int | None) -> str:
        if cut is None:
            return quote_body(self._body.escaped)
        return quote_body(self._body.escaped_prefix(cut) + ELLIPSIS)

    def unquoted(self, cut: int | None) -> str:
        """The text ``render`` quotes: the escaped body or its prefix with the ellipsis (the complete one is the
        stored body itself when nothing needed escaping or normalizing)."""
        return self._body.escaped if cut is None else self._body.escaped_prefix(cut) + ELLIPSIS


class LegacyBody:
    """A JSON string body (without its quotes), cut on code point boundaries of the stored text.

    cap(cut): UTF-8 bytes of the stored prefix; cost(cut): bytes of its JSON-escaped form.
    """

    __slots__ = ("_body", "units", "complete_cap", "complete_cost")

    fixed_cost = 0

    def __init__(self, body: str) -> None:
        self._body = _Escaped(body, JSON_ESCAPES, json_escape)
        self.units = len(self._body.data)
        self.complete_cap = self.units
        self.complete_cost = self.cost(self.units)

    def boundary(self, cut: int) -> int:
        return self._body.boundary(cut)

    def cap(self, cut: int) -> int:
        return cut

    def cost(self, cut: int) -> int:
        return self._body.escaped_bytes(cut)

    def render(self, cut: int | None) -> str:
        if cut is None:
            return self._body.escaped
        return self._body.escaped_prefix(cut) + ELLIPSIS

    def unquoted(self, cut: int | None) -> str:
        """What ``render`` writes: a JSON string body has no quote prefixes."""
        return self.render(cut)


# --- Entries -------------------------------------------------------------------------------------


Wrap = tuple[str, str]
"""Text between metadata and body, and text after the body, for one form (complete or truncated)."""


class EntryForm:
    """An entry ready for fitting.

    The entry appends `before` + mid + body + after, where (mid, after) is `complete` or `truncated`
    (they carry the truncation flag). The overheads are those parts' UTF-8 bytes.
    """

    __slots__ = ("before", "before_parts", "complete", "truncated", "body", "complete_overhead", "truncated_overhead")

    def __init__(self, before_parts: tuple[str, ...], complete: Wrap, truncated: Wrap, body: Body) -> None:
        # `before` in parts that each end on a line break (a heading that depends on the entry's number, the
        # metadata that depends on its citation): a token estimate of the parts adds up, and each part recurs.
        self.before_parts = before_parts
        self.before = before = "".join(before_parts)
        self.complete = complete
        self.truncated = truncated
        self.body = body
        before_bytes = _utf8_len(before)
        self.complete_overhead = before_bytes + len(complete[0]) + len(complete[1])
        self.truncated_overhead = before_bytes + len(truncated[0]) + len(truncated[1])

    def render(self, cut: int | None) -> str:
        mid, after = self.complete if cut is None else self.truncated
        return self.before + mid + self.body.render(cut) + after


def markdown_section_header(family: str) -> str:
    return f"\n## {SECTION_TITLES[family]}\n"


def markdown_metadata(citation: Citation, *, recall_rank: int, show: frozenset[str]) -> str:
    """Metadata lines before `Truncated:`, in their fixed order, each indented and LF-terminated."""
    return "".join(_metadata_parts(citation, recall_rank=recall_rank, show=show))


RENDERED_MEMO_SIZE = 4096
"""How many citations' identity lines a process keeps (emptied when full): the same entries come back prepare after
prepare, and escaping four identities costs ten times a lookup. The kept text is the same object each time, so the
token budget's memo of it (``assembly.token_budget``) finds it by identity, without hashing it again."""
_identity_lines: dict[Citation, str] = {}


def _citation_lines(citation: Citation) -> str:
    """The Scope, Artifact and (memory) Entry lines of a citation."""
    if (known := _identity_lines.get(citation)) is not None:
        return known
    indent = METADATA_INDENT
    lines = (
        f"{indent}Scope: {json_literal(citation.scope_id)}\n"
        f"{indent}Artifact: family={json_literal(citation.family)}, id={json_literal(citation.artifact_id)}, "
        f"revision={citation.revision}\n"
    )
    if citation.entry_id is not None and citation.entry_version is not None:  # memory: a candidate's names its entry
        entry_id, version = json_literal(citation.entry_id), json_literal(citation.entry_version)
        lines += f"{indent}Entry: id={entry_id}, version={version}\n"
    return remembered(_identity_lines, RENDERED_MEMO_SIZE, citation, lines)


_CONFIDENCE_LINE = f"{METADATA_INDENT}Confidence: {CONFIDENCE_UNKNOWN}\n"


def _metadata_parts(citation: Citation, *, recall_rank: int, show: frozenset[str]) -> tuple[str, ...]:
    """``markdown_metadata`` in parts that each end on a line break (the citation's lines, then each shown one)."""
    if not show:
        return (_citation_lines(citation),)
    parts = [_citation_lines(citation)]
    if "confidence" in show:
        parts.append(_CONFIDENCE_LINE)
    if "recall_rank" in show:
        parts.append(f"{METADATA_INDENT}Recall rank: {recall_rank}\n")
    return tuple(parts)


_headings: dict[tuple[str, int, bool], str] = {}
"""Entry headings by (family, number, opens section), kept for the same reason as the identity lines (a prepare
numbers at most 32 entries, so a few hundred at most; emptied when full like them)."""


def _heading(family: str, number: int, opens_section: bool) -> str:
    if (known := _headings.get(key := (family, number, opens_section))) is not None:
        return known
    header = markdown_section_header(family) if opens_section else ""
    return remembered(_headings, RENDERED_MEMO_SIZE, key, f"{header}\n### {SECTION_TITLES[family]} {number}\n\n")


_MARKDOWN_COMPLETE = (f"{METADATA_INDENT}Truncated: no\n\n", "")
_MARKDOWN_TRUNCATED = (f"{METADATA_INDENT}Truncated: yes\n\n", "")


def markdown_entry(
    citation: Citation,
    body: str,
    *,
    section_family: str,
    number: int,
    recall_rank: int,
    show: frozenset[str],
    opens_section: bool,
) -> EntryForm:
    """Entry `number` of its section; `opens_section` adds the section heading before it."""
    parts = (
        _heading(section_family, number, opens_section),
        *_metadata_parts(citation, recall_rank=recall_rank, show=show),
    )
    return EntryForm(parts, _MARKDOWN_COMPLETE, _MARKDOWN_TRUNCATED, MarkdownBody(body))


_LEGACY_COMPLETE = ("", '","truncated":false}')
_LEGACY_TRUNCATED = ("", '","truncated":true}')


def legacy_entry(citation: Citation, body: str, *, first: bool) -> EntryForm:
    """One item of the legacy `items` array; items after the first start with a comma."""
    parts = [
        "" if first else ",",
        '{"family":',
        json_literal(citation.family),
        ',"scope":',
        json_literal(citation.scope_id),
        ',"artifact":{"id":',
        json_literal(citation.artifact_id),
        f',"revision":{citation.revision}}}',
    ]
    if citation.entry_id is not None and citation.entry_version is not None:  # memory: a candidate's names its entry
        parts += [
            ',"entry":{"id":',
            json_literal(citation.entry_id),
            ',"version":',
            json_literal(citation.entry_version),
            "}",
        ]
    parts.append(',"body":"')
    return EntryForm(("".join(parts),), _LEGACY_COMPLETE, _LEGACY_TRUNCATED, LegacyBody(body))
