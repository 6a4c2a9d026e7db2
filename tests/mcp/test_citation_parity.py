"""powercontext-mcp's citation reader (``citations.py``) and the server's parser (``vocabulary/citation_text.py``)
read pasted text alike, compared on generated text down every path of the reader.

Each package carries its parser: the server installs neither the client nor the MCP package, and an installed host
has no server to import. The reader leaves the checks of values to the API (a family that is not stored, an empty
or over-long identity, a revision past the largest, an entry on a family without entries): the API refuses those
citations when the tool reads them. So for every text, either both refuse it, or both read the same citation, or
the reader reads one whose values the server's own field checks (``citation_from_fields``) refuse."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

from powercontext_mcp import citations  # noqa: E402
from powercontext_mcp.citations import CitationTextError, parse_pasted_citation  # noqa: E402

from vocabulary import envelope  # noqa: E402
from vocabulary.citation_text import CitationSyntaxError, citation_from_fields, parse_citation_text  # noqa: E402
from vocabulary.escaping import json_literal  # noqa: E402

FIELDS = ("scope_id", "family", "artifact_id", "revision", "entry_id", "entry_version")
IDENTITIES = ("project:demo", "é", 'q"uote', "line\nbreak", "a\u202eb", "", "x" * 201)
FAMILIES = ("memory", "experience", "profile", "nope", "")
REVISIONS = ("3", "0", "01", "2147483647", "2147483648", "99999999999", "-1", "3.0", " 3")
SEPARATORS = ("\n", "\r\n", "\r")


def outcome(text: str) -> str:
    """How the two parsers took ``text`` (the assertions are the module docstring's rule)."""
    try:
        read = tuple(getattr(parse_pasted_citation(text), name) for name in FIELDS)
    except CitationTextError:
        read = None
    try:
        parsed = tuple(getattr(parse_citation_text(text), name) for name in FIELDS)
    except CitationSyntaxError:
        parsed = None
    if parsed is not None:
        assert read == parsed, text
        return "read alike"
    if read is None:
        return "refused by both"
    values = dict(zip(FIELDS, read, strict=True))
    identities = {
        name: json_literal(value) if isinstance(value, str) and name != "family" else value
        for name, value in values.items()
    }
    with pytest.raises(CitationSyntaxError):  # identities as literals: an empty one is empty, not left out
        citation_from_fields(**identities, literals=True)
    return "values left to the API"


def refusal(text: str) -> str | None:
    """The reader's refusal of ``text`` in its fixed words: the line it names and anything after a colon left out."""
    try:
        parse_pasted_citation(text)
    except CitationTextError as exc:
        message = (
            str(exc).split(": ", 1)[1]
            if str(exc).startswith(("Scope line", "Artifact line", "Entry line"))
            else str(exc)
        )
        return message.split(":")[0].split(" as ")[0]
    return None


def markdown_texts() -> list[str]:
    """Metadata lines: each line right or wrong in one way, with or without an Entry line, alone or among the lines
    of an entry (heading, quoted body), repeated or missing, with each line ending."""
    scopes = [f"Scope: {json_literal(value)}" for value in IDENTITIES] + [
        'Scope:"a"',
        "Scope: a",
        'Scope: "a" x',
        'Scope: "a"\t',
        'Scope:  "a"',
        'Scope: "a\\x"',
        '    Scope: "project:demo"',
    ]
    artifacts = [
        f"Artifact: family={json_literal(family)}, id={json_literal(artifact)}, revision={revision}"
        for family, artifact, revision in itertools.product(FAMILIES, IDENTITIES[:2] + IDENTITIES[-2:], REVISIONS)
    ] + [
        'Artifact: family="memory",id="m", revision=3',
        'Artifact:family="memory", id="m", revision=3',
        'Artifact: family="memory", id="m", revision=3, x',
        'Artifact: family=memory, id="m", revision=3',
        'Artifact: family="memory", id="m", revision=',
    ]
    entries = (
        [None]
        + [
            f"Entry: id={json_literal(entry)}, version={json_literal(version)}"
            for entry, version in itertools.product(IDENTITIES[:3] + IDENTITIES[-2:], repeat=2)
        ]
        + ['Entry: id="e"', 'Entry: id="e", version="v" x', 'Entry: id=e, version="v"']
    )
    texts = []
    for scope, artifact, entry in itertools.product(scopes[::2], artifacts, entries[::4]):
        texts.append("\n".join(line for line in (scope, artifact, entry) if line))
    for scope, artifact, entry in itertools.product(
        scopes[::3] + scopes[7:], artifacts[::18] + artifacts[-5:], entries[::3] + entries[-3:]
    ):
        lines = [line for line in (scope, artifact, entry) if line]
        for separator in SEPARATORS:
            texts.append(separator.join(lines))
        texts += [
            "\n".join(["### Memory 1", "", *["    " + line for line in lines], "", ">     body"]),
            "\n".join([*lines, '>     Scope: "other"', "# Scope: x"]),
            "\n".join([*lines, lines[0]]),
            "\n".join(lines[1:]),
            "\n".join(lines[:1] + lines[2:]),
            "\n".join(lines[::-1]),
        ]
    return texts


def legacy_texts() -> list[str]:
    """Legacy items: right, or with a field missing, unknown, of the wrong type or shape; alone, in an array, in the
    ``{"items":…}`` line, with the commas around it, or between the legacy content's markers."""
    entry = {"id": "entry-1", "version": "entry-1-v1"}
    good = {"family": "memory", "scope": "project:demo", "artifact": {"id": "memory", "revision": 3}}
    items: list[object] = [good, good | {"entry": entry}, good | {"entry": entry, "body": "b", "truncated": False}]
    items += [{key: value for key, value in good.items() if key != missing} for missing in good]
    items += [good | {"extra": 1}, good | {"artifact": {"id": "m", "revision": 3, "more": 1}}]
    items += [good | {"artifact": {"id": "m"}}, good | {"artifact": "m"}, good | {"entry": None}]
    items += [good | {"entry": {"id": "e"}}, good | {"entry": "e"}, good | {"entry": entry | {"more": 1}}]
    items += [good | {"entry": {"id": 5, "version": "v"}}, good | {"entry": {"id": "e", "version": None}}]
    items += [good | {name: value} for name in ("family", "scope") for value in (5, None, "", "x" * 201, "nope")]
    items += [good | {"family": "profile", "entry": entry}]
    items += [
        good | {"artifact": {"id": artifact, "revision": revision}}
        for artifact in ("m", 5, "")
        for revision in (3, 0, -1, 2**31, "3", 3.0, True, None)
    ]
    items += [5, "item", None, []]
    texts = []
    for item in items:
        for ascii_only in (False, True):
            text = json.dumps(item, ensure_ascii=ascii_only)
            texts += [
                text,
                f"[{text}]",
                f"[{text},{text}]",
                f'{{"items":[{text}]}}',
                f'{{"items":{text}}}',
                f'{{"items":[{text},{text}]}}',
                f",{text},",
                f"  \n{text}\n  ",
                f"{envelope.LEGACY_BEGIN}\n{text}\n{envelope.LEGACY_END}",
                f"{envelope.LEGACY_BEGIN}\r\n{text},\r\n",
            ]
    return texts + ["{", "[1,", '{"items": [}', "[" * 5000 + "]" * 5000]


OTHER_TEXTS = ["", " \n\t", "Scope", "no citation here", "x" * 100_001]
TEXTS = markdown_texts() + legacy_texts() + OTHER_TEXTS


def test_the_reader_has_the_servers_legacy_markers():
    assert (citations.LEGACY_BEGIN, citations.LEGACY_END) == (envelope.LEGACY_BEGIN, envelope.LEGACY_END)


def test_every_generated_text_is_read_as_the_server_parses_it_or_refused_by_both():
    outcomes = [outcome(text) for text in TEXTS if len(text) <= 100_000]
    counts = {kind: outcomes.count(kind) for kind in ("read alike", "refused by both", "values left to the API")}
    assert all(counts.values()), counts


def test_the_generated_texts_reach_every_refusal_of_the_reader():
    reached = {refusal(text) for text in TEXTS}
    assert reached >= {
        "expected the scope",
        "expected the family",
        "expected the entry id",
        "the scope is not a valid JSON string literal",
        'expected ", id="',
        'expected ""',
        'expected "family="',
        'expected ", version="',
        "expected the revision",
        "unexpected text after the citation",
        "the text holds 2 Scope lines",
        "the Scope line is missing",
        "the Artifact line is missing",
        "not a valid JSON item",
        '"items" must be an array',
        "the text holds 2 items",
        "the text holds 0 items",
        'a legacy item needs "family", "scope", "artifact"',
        'unknown field "extra" in the legacy item',
        'unknown field "artifact.more" in the legacy item',
        'a legacy item\'s "entry" is {"id", "version"}',
        "a legacy item's scope, family and artifact id are strings, its revision from 1",
        "a legacy item's entry id and version are strings",
        "paste a citation",
        "the pasted text is longer than 100000 characters",
    }, sorted(filter(None, reached))


identities = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=8)


@given(
    scope=identities,
    family=st.sampled_from(FAMILIES),
    artifact=identities,
    revision=st.sampled_from(REVISIONS),
    entry=st.none() | st.tuples(identities, identities),
    separator=st.sampled_from(SEPARATORS),
    noise=st.sampled_from(["", "### Memory 1", '>     Scope: "x"', "    ", ",", "{"]),
)
def test_generated_metadata_lines_are_read_as_the_server_parses_them(
    scope, family, artifact, revision, entry, separator, noise
):
    lines = [
        noise,
        f"Scope: {json_literal(scope)}",
        f"Artifact: family={json_literal(family)}, id={json_literal(artifact)}, revision={revision}",
    ]
    if entry is not None:
        lines.append(f"Entry: id={json_literal(entry[0])}, version={json_literal(entry[1])}")
    outcome(separator.join(lines))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2**31) | st.sampled_from(IDENTITIES),
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(st.sampled_from(["id", "revision", "version", "x"]), inner, max_size=3)
    ),
    max_leaves=6,
)


@given(
    item=st.dictionaries(
        st.sampled_from(["family", "scope", "artifact", "entry", "body", "truncated", "items", "x"]),
        json_values,
        max_size=6,
    ),
    wrap=st.sampled_from(
        ["{}", "[{}]", '{{"items":[{}]}}', ",{},", envelope.LEGACY_BEGIN + "\n{}\n" + envelope.LEGACY_END]
    ),
)
def test_generated_legacy_items_are_read_as_the_server_parses_them(item, wrap):
    outcome(wrap.format(json.dumps(item, ensure_ascii=False)))
