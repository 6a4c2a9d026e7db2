"""The pure citation parser: every form prepared content uses, escaped identities, malformed input.

Round trips go through the real renderers (``assembly.rendering``), so the parser reads exactly what
prepare writes.
"""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assembly.rendering import legacy_entry, markdown_entry
from tests.conftest import GOLDEN
from tests.unit.assembly.helpers import ref_json_literal
from vocabulary.citation import Citation
from vocabulary.citation_text import CitationSyntaxError, citation_from_fields, parse_citation_text
from vocabulary.escaping import artifact_label, json_literal, short_identity, visible_json
from vocabulary.families import STORED_FAMILIES as FAMILIES
from vocabulary.limits import MAX_REVISION
from vocabulary.text import stored_text_problem

MEMORY = Citation("project:demo", "memory", "memory", 3, "entry-1", "entry-1-v2")
EXPERIENCE = Citation("project:demo", "experience", "experience-1", 1)

MARKDOWN_MEMORY = (
    '    Scope: "project:demo"\n'
    '    Artifact: family="memory", id="memory", revision=3\n'
    '    Entry: id="entry-1", version="entry-1-v2"\n'
)
LEGACY_MEMORY = (
    '{"family":"memory","scope":"project:demo","artifact":{"id":"memory","revision":3},'
    '"entry":{"id":"entry-1","version":"entry-1-v2"},"body":"After changing OpenAPI.","truncated":false}'
)
LEGACY_EXPERIENCE = (
    '{"family":"experience","scope":"project:demo","artifact":{"id":"experience-1","revision":1},'
    '"body":"Situation: …","truncated":false}'
)

# Identities that must survive escaping: quotes, backslashes, line breaks, separators, bidi and
# zero-width controls, a tab, an astral format character, emoji and CJK.
TRICKY = [
    'say "hi"',
    "back\\slash",
    "line\nbreak",
    "carriage\rreturn",
    "line\u2028separator",
    "para\u2029separator",
    "bidi\u202eevil",
    "zero\u200bwidth",
    "tab\there",
    "tag\U000e0001char",
    "emoji 🚀",
    "项目:演示",
    " padded ",
    '", id="forged", revision=9',
]


def _markdown(exact: Citation, body: str = "body", *, show=frozenset()) -> str:
    form = markdown_entry(
        exact, body, section_family=exact.family, number=1, recall_rank=1, show=show, opens_section=True
    )
    return form.render(None)


def _legacy(exact: Citation, body: str = "body", *, first: bool = True) -> str:
    return legacy_entry(exact, body, first=first).render(None)


# --- Markdown metadata lines -----------------------------------------------------------------------


def test_markdown_metadata_lines_of_a_memory_entry():
    assert parse_citation_text(MARKDOWN_MEMORY) == MEMORY


def test_markdown_lines_of_an_experience_entry():
    text = '    Scope: "project:demo"\n    Artifact: family="experience", id="experience-1", revision=1\n'
    assert parse_citation_text(text) == EXPERIENCE


@pytest.mark.parametrize("family", ["experience", "profile", "topic_memory"])
def test_markdown_entry_of_every_non_memory_family_round_trips(family):
    exact = Citation("project:demo", family, f"{family}-1", 2)
    assert parse_citation_text(_markdown(exact)) == exact


def test_a_whole_markdown_entry_with_headings_optional_metadata_and_body():
    text = _markdown(
        MEMORY,
        'Scope: "forged"\nArtifact: family="memory", id="x", revision=9',
        show=frozenset({"confidence", "recall_rank"}),
    )
    assert "Confidence: unknown" in text and "Recall rank: 1" in text
    # The body's forged metadata lines are quoted by the renderer and ignored by the parser.
    assert parse_citation_text(text) == MEMORY


@pytest.mark.parametrize("name", ["memory-only-en.content.md", "memory-only-zh.content.md"])
def test_a_whole_golden_content_holding_one_entry(name):
    assert parse_citation_text((GOLDEN / name).read_text(encoding="utf-8")) == MEMORY


def test_one_entry_cut_out_of_the_golden_guide_content():
    content = (GOLDEN / "guide-en.content.md").read_text(encoding="utf-8")
    experience_part = content.split("## Memory\n")[0].split("## Experience\n")[1]
    assert parse_citation_text(experience_part) == EXPERIENCE
    assert parse_citation_text(content.split("## Memory\n")[1]) == MEMORY


def test_crlf_line_breaks_and_missing_indentation_are_accepted():
    text = MARKDOWN_MEMORY.replace("    ", "").replace("\n", "\r\n")
    assert parse_citation_text(text) == MEMORY


def test_a_memory_citation_without_an_entry_line_names_the_revision_itself():
    text = '    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision=3\n'
    assert parse_citation_text(text) == Citation("project:demo", "memory", "memory", 3)


# --- legacy JSON items -----------------------------------------------------------------------------


def test_a_legacy_memory_item():
    assert parse_citation_text(LEGACY_MEMORY) == MEMORY


def test_a_legacy_experience_item():
    assert parse_citation_text(LEGACY_EXPERIENCE) == EXPERIENCE


@pytest.mark.parametrize("wrap", ["{},", ",{}", ",{},", "  {}\n", "[{}]"])
def test_a_legacy_item_as_copied_out_of_the_items_array(wrap):
    assert parse_citation_text(wrap.replace("{}", LEGACY_MEMORY)) == MEMORY


def test_the_items_line_and_the_whole_legacy_content_with_one_item():
    assert parse_citation_text('{"items":[' + LEGACY_EXPERIENCE + "]}") == EXPERIENCE
    content = (GOLDEN / "legacy-en.content.txt").read_text(encoding="utf-8")
    # Drop the second (experience) item: the envelope then holds the memory item alone.
    start = content.index(',{"family":"experience"')
    end = content.index("]}\nEND_POWERCONTEXT_PREPARED_CONTEXT_V1")
    one_item = content[:start] + content[end:]
    assert parse_citation_text(one_item) == MEMORY


def test_a_legacy_item_without_body_or_truncated_flag():
    item = json.loads(LEGACY_MEMORY)
    del item["body"], item["truncated"]
    assert parse_citation_text(json.dumps(item)) == MEMORY


# --- escaped identities ----------------------------------------------------------------------------


@pytest.mark.parametrize("identity", TRICKY)
def test_escaped_identities_round_trip_through_both_renderers(identity):
    exact = Citation(identity, "memory", identity, 7, identity, identity + "-v1")
    markdown = _markdown(exact)
    assert parse_citation_text(markdown) == exact
    # The legacy item is the renderer's bytes plus a body and the closing of the array.
    assert parse_citation_text(_legacy(exact)) == exact
    assert parse_citation_text(_legacy(exact, first=False)) == exact


def test_escaped_identity_lines_stay_single_lines():
    exact = Citation("a\u2028b\nc", "experience", "x\u202ey", 1)
    metadata = [line for line in _markdown(exact).split("\n") if line.startswith("    Scope:")]
    assert metadata == ['    Scope: "a\\u2028b\\nc"']
    assert parse_citation_text(_markdown(exact)) == exact


@pytest.mark.parametrize("identity", TRICKY)
def test_identity_literal_matches_the_renderer(identity):
    assert json_literal(identity) == ref_json_literal(identity)


storable_identities = st.text(min_size=1, max_size=40).filter(lambda value: stored_text_problem(value) is None)


@given(scope_id=storable_identities, artifact_id=storable_identities, entry_id=storable_identities)
def test_any_storable_identity_round_trips(scope_id, artifact_id, entry_id):
    exact = Citation(scope_id, "memory", artifact_id, 5, entry_id, entry_id + "-v")
    assert parse_citation_text(_markdown(exact)) == exact
    assert parse_citation_text(_legacy(exact)) == exact
    assert json_literal(scope_id) == ref_json_literal(scope_id)


def test_short_identity_and_artifact_label():
    assert short_identity("entry-2-v1") == "entry-2-v1"
    assert short_identity("a b") == '"a b"'
    assert short_identity("x\u202e") == '"x\\u202e"'
    assert artifact_label("memory", "memory") == "memory:memory"
    assert artifact_label("memory", 'q"') == 'memory:"q\\""'


def test_describe_escapes_identities():
    exact = Citation("s\u202e", "memory", "memory", 3, "e", "e-v1")
    assert exact.describe() == 'revision 3 of memory:memory in scope "s\\u202e", entry e version e-v1'


def test_families_match_the_storage_model():
    from artifacts.models import Family

    assert set(FAMILIES) == set(Family.values)


# --- malformed text --------------------------------------------------------------------------------

SCOPE = '    Scope: "project:demo"\n'
NO_CITATION = (
    "no citation found: paste the Scope and Artifact lines (and the Entry line for memory) of one Markdown entry, "
    "or one legacy JSON item"
)


def assert_refused(text: str, message: str) -> None:
    with pytest.raises(CitationSyntaxError) as excinfo:
        parse_citation_text(text)
    assert_message(excinfo, message)


def assert_message(excinfo, message: str) -> None:
    """The whole message an operator reads; one ending in "…" continues with the json module's own words."""
    if message.endswith("…"):
        assert str(excinfo.value).startswith(message[:-1])
    else:
        assert str(excinfo.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "paste a citation: the Scope / Artifact / Entry lines or one legacy JSON item"),
        ("   \n ", "paste a citation: the Scope / Artifact / Entry lines or one legacy JSON item"),
        (
            "hello world",
            NO_CITATION,
        ),
        (
            "# PowerContext historical context",
            NO_CITATION,
        ),
        ('    Artifact: family="memory", id="memory", revision=3\n', "the Scope line is missing"),
        (SCOPE, "the Artifact line is missing"),
        (
            SCOPE + SCOPE + '    Artifact: family="memory", id="m", revision=3',
            "the text holds 2 Scope lines: paste the citation of one entry only",
        ),
        (
            (GOLDEN / "guide-en.content.md").read_text(encoding="utf-8"),
            "the text holds 2 Scope lines: paste the citation of one entry only",
        ),
        (
            '    Scope: project:demo\n    Artifact: family="memory", id="m", revision=3',
            "Scope line: expected the scope as a JSON string literal (at character 2 of the value)",
        ),
        (
            '    Scope: "bad \\x escape"\n    Artifact: family="memory", id="m", revision=3',
            "Scope line: the scope is not a valid JSON string literal: …",
        ),
        (
            '    Scope: "unterminated\n    Artifact: family="memory", id="m", revision=3',
            "Scope line: the scope is not a valid JSON string literal: …",
        ),
        (
            '    Scope: "raw\ttab"\n    Artifact: family="memory", id="m", revision=3',
            "Scope line: the scope is not a valid JSON string literal: …",
        ),
        (
            '    Scope: "a" trailing\n    Artifact: family="memory", id="m", revision=3',
            'Scope line: unexpected text after the citation: "trailing" (at character 5 of the value)',
        ),
        (
            SCOPE + '    Artifact: family="memory", id="m", revision=0',
            "the Artifact line's revision must be between 1 and 2147483647, got 0",
        ),
        (
            SCOPE + '    Artifact: family="memory", id="m", revision=03',
            "Artifact line: the revision 03 has a leading zero (at character 36 of the value)",
        ),
        (
            SCOPE + '    Artifact: family="memory", id="m", revision=three',
            "Artifact line: expected the revision as a whole number (at character 36 of the value)",
        ),
        (
            SCOPE + '    Artifact: family="memory", id="m", revision=-1',
            "Artifact line: expected the revision as a whole number (at character 36 of the value)",
        ),
        (
            SCOPE + f'    Artifact: family="memory", id="m", revision={MAX_REVISION + 1}',
            f"the Artifact line's revision must be between 1 and {MAX_REVISION}, got {MAX_REVISION + 1}",
        ),
        (
            SCOPE + '    Artifact: family="memory", id="m", revision=3 extra',
            'Artifact line: unexpected text after the citation: "extra" (at character 37 of the value)',
        ),
        (
            SCOPE + '    Artifact: id="m", family="memory", revision=3',
            'Artifact line: expected " family=" (at character 1 of the value)',
        ),
        (
            SCOPE + '    Artifact: family="bogus", id="m", revision=3',
            'the Artifact line\'s family "bogus" is not one of ' + ", ".join(FAMILIES),
        ),
        (
            SCOPE + '    Artifact: family="experience", id="e", revision=1\n    Entry: id="x", version="x-v1"',
            "only memory citations name an entry; this one is experience",
        ),
        (
            SCOPE + '    Artifact: family="memory", id="m", revision=3\n    Entry: id="x"',
            'Entry line: expected ", version=" (at character 8 of the value)',
        ),
        (
            '    Scope: ""\n    Artifact: family="memory", id="m", revision=3',
            "the Scope line's scope must not be empty",
        ),
        (
            '    Scope: "a\\u0000"\n    Artifact: family="memory", id="m", revision=3',
            "the Scope line's scope contains U+0000 (NUL) at character 1",
        ),
        (
            '    Scope: "a\\ud800"\n    Artifact: family="memory", id="m", revision=3',
            "the Scope line's scope contains a lone surrogate U+D800 at character 1",
        ),
        (
            f'    Scope: "{"x" * 201}"\n    Artifact: family="memory", id="m", revision=3',
            "the Scope line's scope is longer than 200 characters",
        ),
    ],
)
def test_malformed_markdown_is_refused_with_a_clear_message(text, message):
    assert_refused(text, message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"family": "memory",', "not a valid JSON item: …"),
        (
            '{"family":"memory","scope":"s","artifact":{"id":"m","revision":1},"extra":1}',
            'unknown field "extra" in the legacy item',
        ),
        ('{"family":"memory","artifact":{"id":"m","revision":1}}', 'the legacy item has no "scope"'),
        ('{"family":"memory","scope":"s"}', 'the legacy item has no "artifact"'),
        ('{"scope":"s","artifact":{"id":"m","revision":1}}', 'the legacy item has no "family"'),
        (
            '{"family":"memory","scope":"s","artifact":{"id":"m"}}',
            '"artifact" must be an object with exactly "id" and "revision"',
        ),
        (
            '{"family":"memory","scope":"s","artifact":{"id":"m","revision":"3"}}',
            "artifact.revision must be an integer",
        ),
        (
            '{"family":"memory","scope":"s","artifact":{"id":"m","revision":true}}',
            "artifact.revision must be an integer",
        ),
        (
            '{"family":"memory","scope":"s","artifact":{"id":"m","revision":0}}',
            "artifact.revision must be between 1 and 2147483647, got 0",
        ),
        (
            '{"family":"memory","scope":"s","artifact":{"id":"m","revision":1.5}}',
            "artifact.revision must be an integer",
        ),
        ('{"family":"memory","scope":7,"artifact":{"id":"m","revision":1}}', "scope must be a string"),
        ('{"family":"memory","scope":"s","artifact":{"id":"","revision":1}}', "artifact.id must not be empty"),
        (
            '{"family":"experience","scope":"s","artifact":{"id":"e","revision":1},"entry":{"id":"x","version":"v"}}',
            "only memory citations name an entry; this one is experience",
        ),
        (
            '{"family":"memory","scope":"s","artifact":{"id":"m","revision":1},"entry":{"id":"x"}}',
            '"entry" must be an object with exactly "id" and "version"',
        ),
        (
            '{"family":"memory","scope":"s","artifact":{"id":"m","revision":1},"entry":{"id":"x","version":null}}',
            "entry.id and entry.version must be strings",
        ),
        ('{"items":[]}', "the envelope holds 0 items: paste a single item"),
        (
            '{"items":[' + LEGACY_MEMORY + "," + LEGACY_EXPERIENCE + "]}",
            "the envelope holds 2 items: paste a single item",
        ),
        ("[1, 2]", "the array holds 2 items: paste a single item"),
        (
            '"just a string"',
            NO_CITATION,
        ),
        ("[42]", "a legacy item must be a JSON object"),
        (
            '{"family":"memory","scope":"\\udc00","artifact":{"id":"m","revision":1}}',
            "scope contains a lone surrogate U+DC00 at character 0",
        ),
    ],
)
def test_malformed_legacy_items_are_refused_with_a_clear_message(text, message):
    assert_refused(text, message)


# --- fields ----------------------------------------------------------------------------------------


def test_fields_are_taken_exactly_as_typed():
    citation = citation_from_fields(
        scope_id=" project:demo ", family="memory", artifact_id="memory", revision="3", entry_id="e", entry_version="v"
    )
    assert citation == Citation(" project:demo ", "memory", "memory", 3, "e", "v")


def test_fields_without_entry_name_the_revision():
    citation = citation_from_fields(scope_id="s", family="experience", artifact_id="x", revision=2)
    assert citation == Citation("s", "experience", "x", 2)


def test_fields_as_json_literals_decode_escapes():
    citation = citation_from_fields(
        scope_id='"a\\"b\\nc\\u2028d\\u202ee"',
        family="memory",
        artifact_id='"memory"',
        revision=1,
        entry_id='"e\\u200b"',
        entry_version='"v"',
        literals=True,
    )
    assert citation == Citation('a"b\nc\u2028d\u202ee', "memory", "memory", 1, "e\u200b", "v")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scope_id": ""}, "scope is required"),
        ({"artifact_id": None}, "artifact id is required"),
        ({"family": ""}, "family is required"),
        (
            {"family": "bogus"},
            'family "bogus" is not one of ' + ", ".join(FAMILIES),
        ),
        ({"revision": ""}, "revision is required"),
        ({"revision": "x"}, "revision must be a whole number"),
        ({"revision": 0}, "revision must be between 1 and 2147483647, got 0"),
        ({"entry_id": "e"}, "entry id and entry version must be given together (or both left out)"),
        ({"entry_version": "v"}, "entry id and entry version must be given together (or both left out)"),
        (
            {"family": "experience", "entry_id": "e", "entry_version": "v"},
            "only memory citations name an entry; this one is experience",
        ),
        ({"scope_id": "not a literal", "literals": True}, 'scope must be one JSON string literal, e.g. "project:demo"'),
        ({"scope_id": '"a" "b"', "literals": True}, 'scope must be one JSON string literal, e.g. "project:demo"'),
        ({"scope_id": '"bad \\q"', "literals": True}, "scope is not a valid JSON string literal: …"),
        ({"scope_id": '""', "artifact_id": '"m"', "literals": True}, "scope must not be empty"),
        ({"scope_id": "a\x00b"}, "scope contains U+0000 (NUL) at character 1"),
    ],
)
def test_malformed_fields_are_refused(fields, message):
    values = {"scope_id": "s", "family": "memory", "artifact_id": "m", "revision": 1, **fields}
    with pytest.raises(CitationSyntaxError) as excinfo:
        citation_from_fields(**values)
    assert_message(excinfo, message)


def test_visible_json_escapes_invisible_characters_inside_strings_only():
    value = {"scope_id": "a\u202eb\nc", "query": "x\u2028y"}
    text = visible_json(value, indent=2)
    assert "\u202e" not in text and "\u2028" not in text
    assert json.loads(text) == value
    assert text.count("\n") == 3


# --- boundaries and the exact wording of the remaining refusals ------------------------------------------


def test_the_largest_revision_and_the_longest_identity_are_accepted():
    longest = "x" * 200
    text = f'    Scope: "{longest}"\n    Artifact: family="memory", id="m", revision={MAX_REVISION}'
    assert parse_citation_text(text) == Citation(longest, "memory", "m", MAX_REVISION)
    legacy = json.dumps({"family": "memory", "scope": longest, "artifact": {"id": "m", "revision": MAX_REVISION}})
    assert parse_citation_text(legacy) == Citation(longest, "memory", "m", MAX_REVISION)
    assert citation_from_fields(scope_id=longest, family="memory", artifact_id="m", revision=str(MAX_REVISION)) == (
        Citation(longest, "memory", "m", MAX_REVISION)
    )


ENTRY = SCOPE + '    Artifact: family="memory", id="m", revision=3\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            ENTRY.rstrip("\n") + "\u00a0",
            'Artifact line: unexpected text after the citation: "\u00a0" (at character 37 of the value)',
        ),
        (
            ENTRY.rstrip("\n") + " " + "y" * 50,
            f'Artifact line: unexpected text after the citation: "{"y" * 40}" (at character 37 of the value)',
        ),
        (
            SCOPE + '    Artifact: family="memory", id="m", revision=0' + "1" * 30,
            "Artifact line: the revision 0" + "1" * 19 + " has a leading zero (at character 36 of the value)",
        ),
        (
            SCOPE + '    Artifact: family="memory", id="m", revision=' + "9" * 11,
            f"the revision must be between 1 and {MAX_REVISION}, got a 11-digit number",
        ),
        (ENTRY + '    Entry: id="", version="v"', "the Entry line's id must not be empty"),
        (ENTRY + '    Entry: id="e", version=""', "the Entry line's version must not be empty"),
        (
            '{"family":3,"scope":"s","artifact":{"id":"m","revision":1}}',
            "family 3 is not one of " + ", ".join(FAMILIES),
        ),
        ("[" * 40 + "]" * 40, "not a valid JSON item: JSON nested deeper than 32 levels is refused"),
        (
            '{"family":"memory","scope":"s","artifact":{"id":"m","revision":' + "9" * 11 + "}}",
            f"artifact.revision must be between 1 and {MAX_REVISION}, got 99999999999",
        ),
        (
            SCOPE + '    Artifact: family=memory, id="m", revision=3',
            "Artifact line: expected the family as a JSON string literal (at character 9 of the value)",
        ),
        (
            SCOPE + '    Artifact: family="memory", id=m, revision=3',
            "Artifact line: expected the artifact id as a JSON string literal (at character 22 of the value)",
        ),
        (
            ENTRY + '    Entry: id=e, version="v"',
            "Entry line: expected the entry id as a JSON string literal (at character 5 of the value)",
        ),
        (
            ENTRY + '    Entry: id="e", version=v',
            "Entry line: expected the entry version as a JSON string literal (at character 18 of the value)",
        ),
        ('{"items": 5}', '"items" must be an array'),
        (
            SCOPE + '    Artifact: family="mémory", id="m", revision=3',
            'the Artifact line\'s family "mémory" is not one of ' + ", ".join(FAMILIES),
        ),
        (
            ENTRY.rstrip("\n") + "X",
            'Artifact line: unexpected text after the citation: "X" (at character 37 of the value)',
        ),
        ("X" + LEGACY_MEMORY + "X", NO_CITATION),
        # An object with a family is an item, even with an "items" key (which an item may not have).
        (
            '{"items":[],"family":"memory","scope":"s","artifact":{"id":"m","revision":1}}',
            'unknown field "items" in the legacy item',
        ),
    ],
)
def test_more_refusals_with_their_whole_message(text, message):
    assert_refused(text, message)


def test_invalid_json_is_located_by_its_one_based_character():
    with pytest.raises(CitationSyntaxError) as excinfo:
        parse_citation_text('{"family": "memory",')
    assert str(excinfo.value).startswith("not a valid JSON item: ")
    assert str(excinfo.value).endswith(" at character 20")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"artifact_id": "m"}, 'artifact id must be one JSON string literal, e.g. "project:demo"'),
        ({"entry_id": "e", "entry_version": '"v"'}, 'entry id must be one JSON string literal, e.g. "project:demo"'),
        (
            {"entry_id": '"e"', "entry_version": "v"},
            'entry version must be one JSON string literal, e.g. "project:demo"',
        ),
        ({"revision": "9" * 11}, f"revision must be between 1 and {MAX_REVISION}, got a 11-digit number"),
        ({"scope_id": '"s"\n'}, 'scope must be one JSON string literal, e.g. "project:demo"'),
        ({"scope_id": 'X"s"X'}, 'scope must be one JSON string literal, e.g. "project:demo"'),
    ],
)
def test_literal_fields_name_the_field_they_refuse(fields, message):
    values = {"scope_id": '"s"', "family": "memory", "artifact_id": '"m"', "revision": 1, "literals": True, **fields}
    with pytest.raises(CitationSyntaxError) as excinfo:
        citation_from_fields(**values)
    assert_message(excinfo, message)


def test_a_pretty_printed_item_and_an_envelope_without_its_end_line_are_read():
    citation = Citation("project:demo", "memory", "memory", 3, "entry-1", "entry-1-v2")
    assert parse_citation_text(json.dumps(json.loads(LEGACY_MEMORY), indent=2)) == citation
    assert parse_citation_text('BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1\n{"items":[' + LEGACY_MEMORY + "]}") == citation
