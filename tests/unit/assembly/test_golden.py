"""Every golden content file in tests/golden rebuilt byte for byte from typed candidates."""

from __future__ import annotations

import pytest

from assembly.options import parse_assembly_options
from assembly.selection import assemble_legacy, assemble_markdown, empty_result
from assembly.types import Candidate, Citation

from .helpers import GOLDEN_DIR, fixture_recalled, golden_json, golden_text

LANGS = ("en", "zh")
MARKDOWN_CASES = ("guide", "defaults", "memory-only")


def _assemble(case: str, lang: str):
    request = golden_json(f"{case}-{lang}.request.json")
    max_bytes = request.get("max_bytes", 8000)
    recalled = fixture_recalled(lang)
    if "assembly" not in request:
        return assemble_legacy(recalled, max_bytes=max_bytes)
    options = parse_assembly_options(request["assembly"], max_total_entries=32)
    return assemble_markdown(recalled, options, max_bytes=max_bytes)


def test_golden_directory_holds_the_cases_these_tests_rebuild():
    contents = sorted(path.name for path in GOLDEN_DIR.glob("*.content.*"))
    expected = sorted(
        [f"{case}-{lang}.content.md" for case in MARKDOWN_CASES for lang in LANGS]
        + [f"legacy-{lang}.content.txt" for lang in LANGS]
    )
    assert contents == expected


def test_fixture_memory_candidate_cites_revision_three_and_the_live_entry_version():
    (hits,) = fixture_recalled("en")["memory"]
    assert hits == [
        Candidate(
            Citation("project:demo", "memory", "memory", 3, "entry-1", "entry-1-v2"),
            "After changing OpenAPI, regenerate the client and run contract tests.",
        )
    ]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("case", MARKDOWN_CASES)
def test_markdown_golden_content_is_rebuilt_byte_for_byte(case, lang):
    result = _assemble(case, lang)
    expected = golden_text(f"{case}-{lang}.content.md")
    assert result.status == "ready"
    assert result.content == expected
    assert result.content.encode("utf-8") == (GOLDEN_DIR / f"{case}-{lang}.content.md").read_bytes()
    assert result.content_bytes == len(expected.encode("utf-8"))


@pytest.mark.parametrize("lang", LANGS)
def test_legacy_golden_content_is_rebuilt_byte_for_byte(lang):
    result = _assemble("legacy", lang)
    assert result.content.encode("utf-8") == (GOLDEN_DIR / f"legacy-{lang}.content.txt").read_bytes()
    assert result.content_bytes == len(result.content.encode("utf-8"))


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("case", [*MARKDOWN_CASES, "legacy", "sections-empty"])
def test_golden_response_fields_match_the_prepared_result(case, lang):
    response = golden_json(f"{case}-{lang}.response.json")
    result = _assemble(case, lang)
    assert (result.status, result.content, result.content_bytes) == (
        response["status"],
        response["content"],
        response["content_bytes"],
    )


@pytest.mark.parametrize("lang", LANGS)
def test_sections_empty_golden_is_the_empty_result(lang):
    result = _assemble("sections-empty", lang)
    assert result == empty_result()
    assert (result.status, result.content, result.content_bytes, result.origins) == ("empty", None, 0, ())


@pytest.mark.parametrize("lang", LANGS)
def test_guide_origins_list_experience_then_memory_with_exact_citations(lang):
    result = _assemble("guide", lang)
    assert [(o.section_family, o.number, o.recall_rank, o.truncated) for o in result.origins] == [
        ("experience", 1, 1, False),
        ("memory", 1, 1, False),
    ]
    memory_citation = Citation("project:demo", "memory", "memory", 3, "entry-1", "entry-1-v2")
    assert result.origins[1].citation == memory_citation
    assert result.origins[0].citation == Citation("project:demo", "experience", "experience-1", 1)


@pytest.mark.parametrize("lang", LANGS)
def test_legacy_origins_number_items_in_envelope_order(lang):
    result = _assemble("legacy", lang)
    assert [(o.section_family, o.number) for o in result.origins] == [("memory", 1), ("experience", 2)]
