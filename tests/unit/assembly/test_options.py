"""Validation of the `assembly` request object: one test per rule, and all problems reported together."""

from __future__ import annotations

import re

import pytest

from assembly.options import DEFAULT_SECTION_SPECS, parse_assembly_options
from assembly.types import AssemblyOptions, AssemblyValidationError, FieldError, SectionSpec
from vocabulary.families import FAMILY_LIMIT_MAX, POOL_CAP


def parse(raw, max_total_entries=32):
    return parse_assembly_options(raw, max_total_entries=max_total_entries)


def errors_of(raw, max_total_entries=32) -> tuple[FieldError, ...]:
    with pytest.raises(AssemblyValidationError) as caught:
        parse(raw, max_total_entries)
    assert caught.value.errors, "a validation error always names at least one field"
    return caught.value.errors


def paths_of(raw, max_total_entries=32) -> list[str]:
    return [error.path for error in errors_of(raw, max_total_entries)]


def test_empty_object_means_memory_six_then_experience_two_without_optional_metadata():
    assert parse({}) == AssemblyOptions("markdown", DEFAULT_SECTION_SPECS, frozenset())
    assert (SectionSpec("memory", 6), SectionSpec("experience", 2)) == DEFAULT_SECTION_SPECS


def test_empty_sections_are_legal_and_select_no_family():
    assert parse({"sections": []}).sections == ()


def test_the_guide_request_parses_in_its_section_order():
    raw = {
        "format": "markdown",
        "sections": [{"family": "experience", "limit": 2}, {"family": "memory", "limit": 5}],
        "show": ["confidence", "recall_rank"],
    }
    assert parse(raw) == AssemblyOptions(
        "markdown",
        (SectionSpec("experience", 2), SectionSpec("memory", 5)),
        frozenset({"confidence", "recall_rank"}),
    )


def test_every_family_accepts_its_maximum_limit():
    raw = {"sections": [{"family": f, "limit": n} for f, n in FAMILY_LIMIT_MAX.items()]}
    assert sum(section.limit for section in parse(raw, max_total_entries=40).sections) == 40


def test_pool_caps_match_the_rfc_search_bounds():
    assert POOL_CAP == {"memory": 16, "experience": 8, "topic_memory": 8, "profile": None}


def test_null_assembly_is_rejected():
    assert errors_of(None) == (FieldError("assembly", "must not be null"),)


@pytest.mark.parametrize("raw", [[], "markdown", 1, True])
def test_non_object_assembly_is_rejected(raw):
    assert paths_of(raw) == ["assembly"]


def test_unknown_family_is_rejected():
    errors = errors_of({"sections": [{"family": "skill", "limit": 1}]})
    assert [e.path for e in errors] == ["assembly.sections[0].family"]
    assert "memory" in errors[0].message and "topic_memory" in errors[0].message


def test_duplicate_family_is_reported_on_the_later_occurrence():
    errors = errors_of({"sections": [{"family": "memory", "limit": 1}, {"family": "memory", "limit": 2}]})
    assert [e.path for e in errors] == ["assembly.sections[1].family"]
    assert "duplicate" in errors[0].message


def test_limit_zero_is_rejected():
    assert paths_of({"sections": [{"family": "memory", "limit": 0}]}) == ["assembly.sections[0].limit"]


def test_limit_seventeen_for_memory_is_rejected():
    errors = errors_of({"sections": [{"family": "memory", "limit": 17}]})
    assert errors == (FieldError("assembly.sections[0].limit", "must be between 1 and 16 for memory"),)


def test_limit_nine_for_experience_is_rejected():
    errors = errors_of({"sections": [{"family": "experience", "limit": 9}]})
    assert errors == (FieldError("assembly.sections[0].limit", "must be between 1 and 8 for experience"),)


@pytest.mark.parametrize("family", ["topic_memory", "profile"])
def test_limit_nine_for_topic_memory_and_profile_is_rejected(family):
    assert paths_of({"sections": [{"family": family, "limit": 9}]}) == ["assembly.sections[0].limit"]


@pytest.mark.parametrize("limit", [True, False])
def test_boolean_limit_is_rejected_although_bool_is_an_int(limit):
    errors = errors_of({"sections": [{"family": "memory", "limit": limit}]})
    assert errors == (FieldError("assembly.sections[0].limit", "must be an integer"),)


@pytest.mark.parametrize("limit", [2.0, "2", None, [2]])
def test_non_integer_limit_is_rejected(limit):
    assert paths_of({"sections": [{"family": "memory", "limit": limit}]}) == ["assembly.sections[0].limit"]


def test_missing_family_and_limit_are_both_required():
    assert paths_of({"sections": [{}]}) == ["assembly.sections[0].family", "assembly.sections[0].limit"]


def test_unknown_section_field_is_rejected():
    raw = {"sections": [{"family": "memory", "limit": 1, "weight": 2}]}
    assert paths_of(raw) == ["assembly.sections[0].weight"]


@pytest.mark.parametrize("raw", [{"sections": {}}, {"sections": None}, {"sections": [1]}])
def test_sections_must_be_an_array_of_objects(raw):
    assert paths_of(raw)[0].startswith("assembly.sections")


def test_unknown_show_value_is_rejected():
    errors = errors_of({"show": ["confidence", "score"]})
    assert [e.path for e in errors] == ["assembly.show[1]"]


def test_duplicate_show_value_is_rejected():
    assert paths_of({"show": ["recall_rank", "recall_rank"]}) == ["assembly.show[1]"]


@pytest.mark.parametrize("show", [None, "confidence", [["confidence"]], [{"x": 1}]])
def test_show_must_be_an_array_of_known_strings(show):
    assert paths_of({"show": show})[0].startswith("assembly.show")


def test_sort_by_is_rejected_as_an_unknown_field():
    assert errors_of({"sort_by": "score"}) == (FieldError("assembly.sort_by", "unknown field"),)


def test_min_confidence_is_rejected_as_an_unknown_field():
    assert errors_of({"min_confidence": 0.5}) == (FieldError("assembly.min_confidence", "unknown field"),)


@pytest.mark.parametrize("fmt", ["html", "Markdown", "", None, 1])
def test_unknown_format_is_rejected(fmt):
    assert paths_of({"format": fmt}) == ["assembly.format"]


def test_total_limit_over_the_policy_is_rejected_naming_the_policy():
    raw = {"sections": [{"family": "memory", "limit": 16}, {"family": "experience", "limit": 8}]}
    assert parse(raw, max_total_entries=24).sections[0].limit == 16
    errors = errors_of(raw, max_total_entries=23)
    assert [e.path for e in errors] == ["assembly.sections"]
    assert "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES" in errors[0].message
    assert "24" in errors[0].message and "23" in errors[0].message


def test_default_sections_also_count_against_the_policy():
    assert paths_of({}, max_total_entries=7) == ["assembly.sections"]
    assert parse({}, max_total_entries=8).sections == DEFAULT_SECTION_SPECS


@pytest.mark.parametrize("policy", [0, -1, True, 2.5])
def test_an_invalid_policy_is_a_configuration_error_not_a_field_error(policy):
    with pytest.raises(ValueError) as caught:
        parse({}, max_total_entries=policy)
    assert not isinstance(caught.value, AssemblyValidationError)


def test_multiple_errors_are_reported_together_in_document_order():
    raw = {
        "format": "html",
        "sort_by": "score",
        "sections": [
            {"family": "memory", "limit": 17},
            {"family": "skill", "limit": 1},
            {"family": "memory", "limit": True, "weight": 1},
        ],
        "show": ["score", "score"],
        "min_confidence": 0.2,
    }
    assert paths_of(raw) == [
        "assembly.sort_by",
        "assembly.min_confidence",
        "assembly.format",
        "assembly.sections[0].limit",
        "assembly.sections[1].family",
        "assembly.sections[2].weight",
        "assembly.sections[2].family",
        "assembly.sections[2].limit",
        "assembly.show[0]",
        "assembly.show[1]",
    ]


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ({"sections": [{"family": "memory", "limit": 1}] * 5}, ("assembly.sections", "must have at most 4 sections")),
        ({"show": ["confidence", "confidence", "score"]}, ("assembly.show", "must have at most 2 values, got 3")),
    ],
)
def test_arrays_longer_than_their_maximum_are_one_error_whatever_their_items(raw, error):
    errors = errors_of(raw)
    assert [(e.path, e.message[: len(error[1])]) for e in errors] == [error]


def test_the_error_message_lists_every_problem():
    with pytest.raises(AssemblyValidationError) as caught:
        parse({"sort_by": 1, "show": ["x"]})
    assert isinstance(caught.value, ValueError)
    assert "assembly.sort_by" in str(caught.value) and "assembly.show[0]" in str(caught.value)


def test_a_custom_path_prefixes_every_error():
    with pytest.raises(AssemblyValidationError) as caught:
        parse_assembly_options({"show": [1]}, max_total_entries=32, path="body.assembly")
    assert caught.value.errors[0].path == "body.assembly.show[0]"


# --- the messages a host reads (each field's whole message, in the order reported) ------------------------

FAMILY_CHOICES = 'must be one of "memory", "experience", "profile", "topic_memory"'
MAX_ENTRIES = "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, [("assembly", "must not be null")]),
        ([], [("assembly", "must be an object")]),
        ({"format": "html"}, [("assembly.format", 'must be one of "markdown"')]),
        ({"colour": 1}, [("assembly.colour", "unknown field")]),
        ({"sections": None}, [("assembly.sections", "must be an array")]),
        ({"sections": {}}, [("assembly.sections", "must be an array")]),
        ({"sections": [1]}, [("assembly.sections[0]", "must be an object with family and limit")]),
        (
            {"sections": [{}]},
            [("assembly.sections[0].family", "is required"), ("assembly.sections[0].limit", "is required")],
        ),
        ({"sections": [{"family": "skill", "limit": 1}]}, [("assembly.sections[0].family", FAMILY_CHOICES)]),
        ({"sections": [{"family": 3, "limit": 1}]}, [("assembly.sections[0].family", FAMILY_CHOICES)]),
        (
            {"sections": [{"family": "memory", "limit": 1}, {"family": "memory", "limit": 2}]},
            [("assembly.sections[1].family", 'duplicate family "memory"')],
        ),
        (
            {"sections": [{"family": "memory", "limit": 0}]},
            [("assembly.sections[0].limit", "must be between 1 and 16 for memory")],
        ),
        (
            {"sections": [{"family": "memory", "limit": 17}]},
            [("assembly.sections[0].limit", "must be between 1 and 16 for memory")],
        ),
        (
            {"sections": [{"family": "experience", "limit": 9}]},
            [("assembly.sections[0].limit", "must be between 1 and 8 for experience")],
        ),
        ({"sections": [{"family": "memory", "limit": True}]}, [("assembly.sections[0].limit", "must be an integer")]),
        ({"sections": [{"family": "memory", "limit": 1.0}]}, [("assembly.sections[0].limit", "must be an integer")]),
        ({"sections": [{"family": "memory", "limit": "1"}]}, [("assembly.sections[0].limit", "must be an integer")]),
        (
            {"sections": [{"family": "memory", "limit": 1, "weight": 2}]},
            [("assembly.sections[0].weight", "unknown field")],
        ),
        ({"show": None}, [("assembly.show", "must be an array")]),
        ({"show": "confidence"}, [("assembly.show", "must be an array")]),
        ({"show": ["x"]}, [("assembly.show[0]", 'must be one of "confidence", "recall_rank"')]),
        ({"show": [1]}, [("assembly.show[0]", 'must be one of "confidence", "recall_rank"')]),
        ({"show": ["recall_rank", "recall_rank"]}, [("assembly.show[1]", 'duplicate value "recall_rank"')]),
        (
            {"sections": [{"family": f, "limit": FAMILY_LIMIT_MAX[f]} for f in ("memory", "experience", "profile")]},
            [("assembly.sections", f"the limits add up to 32 entries; {MAX_ENTRIES} allows at most 31")],
        ),
    ],
)
def test_every_refusal_names_its_field_with_the_whole_message(raw, expected):
    assert [(e.path, e.message) for e in errors_of(raw, max_total_entries=31)] == expected


def test_the_default_limits_are_named_when_they_exceed_the_server_policy():
    assert [(e.path, e.message) for e in errors_of({}, max_total_entries=7)] == [
        ("assembly.sections", f"the default limits add up to 8 entries; {MAX_ENTRIES} allows at most 7")
    ]


def test_all_problems_are_reported_together_in_field_order():
    raw = {
        "colour": 1,
        "format": "html",
        "sections": [1, {"family": "skill", "limit": 0}, {"family": "memory", "limit": 99}],
        "show": ["x"],
    }
    with pytest.raises(AssemblyValidationError) as caught:
        parse(raw)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        ("assembly.colour", "unknown field"),
        ("assembly.format", 'must be one of "markdown"'),
        ("assembly.sections[0]", "must be an object with family and limit"),
        ("assembly.sections[1].family", FAMILY_CHOICES),
        # An unknown family has no limit of its own: the widest range is named.
        ("assembly.sections[1].limit", "must be between 1 and 16"),
        ("assembly.sections[2].limit", "must be between 1 and 16 for memory"),
        ("assembly.show[0]", 'must be one of "confidence", "recall_rank"'),
    ]
    assert str(caught.value) == "; ".join(f"{e.path}: {e.message}" for e in caught.value.errors)


@pytest.mark.parametrize("policy", [0, -1, True, 1.5, "32"])
def test_a_server_policy_that_is_not_a_positive_integer_is_a_configuration_error(policy):
    with pytest.raises(ValueError, match=f"^{MAX_ENTRIES} must be a positive integer, got {re.escape(repr(policy))}$"):
        parse({}, max_total_entries=policy)


def test_a_policy_of_one_entry_is_valid():
    assert parse({"sections": [{"family": "memory", "limit": 1}]}, max_total_entries=1).sections == (
        SectionSpec("memory", 1),
    )
