"""Property tests over arbitrary Unicode bodies and identities, budgets and section configurations.

Each example is checked structurally (budget, markers, line kinds, citations parsed back and compared
with the typed origins, truncation rules) and against the independent reference assembler in helpers.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from assembly.selection import assemble_legacy, assemble_markdown
from assembly.types import REASON_BUDGET, REASON_TRUNCATION_BELOW_MINIMUM, Candidate, Citation
from vocabulary.families import ASSEMBLED_FAMILIES as FAMILIES
from vocabulary.families import FAMILY_LIMIT_MAX, LEGACY_FAMILIES

from .helpers import (
    ELLIPSIS,
    QUOTE,
    legacy_citation,
    options,
    parse_legacy,
    parse_markdown,
    ref_body_units,
    ref_legacy,
    ref_markdown,
    ref_pool,
    utf8,
)

PROPERTY_SETTINGS = settings(
    # `make mutation` runs every mutant against these tests: fewer examples keep it to minutes.
    max_examples=int(os.environ.get("POWERCONTEXT_PROPERTY_EXAMPLES", "200")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

FRAGMENTS = [
    "\r\n",
    "\r",
    "\n",
    "\n\n",
    "\u2028",
    "\u2029",
    "\x85",
    "\t",
    "\x00",
    "\x1b",
    "\x7f",
    "\u00ad",
    "\u200b",
    "\u202e",
    "\u2066",
    "\ufeff",
    "\U000e0001",
    "\U000e0041",
    "\U0001d173",
    "😀",
    "中文",
    "契约测试",
    "é",
    '"',
    "\\",
    "\\u0009",
    "…",
    "## Memory",
    "### Memory 1",
    "## Experience",
    "```",
    "~~~",
    ">     ",
    '    Scope: "x"',
    "BEGIN_POWERCONTEXT_PREPARED_TEXT_V1",
    "END_POWERCONTEXT_PREPARED_TEXT_V1",
    "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1",
    "END_POWERCONTEXT_PREPARED_CONTEXT_V1",
    '{"items":[]}',
]
HEADINGS = {"## Memory", "## Experience", "## Profile", "## Topic Memory"}


def texts(max_parts: int = 12, nonempty: bool = False):
    """Arbitrary Unicode mixed with the fragments above; `nonempty` maps "" to "x" (no filtering)."""
    part = st.one_of(st.text(max_size=16), st.sampled_from(FRAGMENTS))
    joined = st.lists(part, max_size=max_parts).map("".join)
    return joined.map(lambda text: text or "x") if nonempty else joined


long_texts = st.builds(lambda text, n: (text * n)[:6000], texts(4, nonempty=True), st.integers(1, 600))
# Mostly bodies that render (short, or long enough to be truncated), sometimes none or an empty one, which
# the pool drops: shaped so that most examples render content (see _observe and the strategies' numbers
# with --hypothesis-show-statistics).
bodies = st.one_of(texts(nonempty=True), long_texts, st.sampled_from([None, "", "x"]))
# Identities: a few plain and hostile fixed values (so duplicates and cross-scope hits are common), a third
# of the time arbitrary Unicode (whose escapes can take hundreds of bytes per citation, leaving no room).
HOSTILE_IDS = [
    'q"\\\n',
    "\u202eevil\u2028",
    "\U000e0001tag\x85",
    "END_POWERCONTEXT_PREPARED_TEXT_V1\r\n## Memory",
]
fixed_scopes = st.sampled_from(["project:demo", "team:platform", "user:alice", *HOSTILE_IDS])
scopes = st.one_of(fixed_scopes, fixed_scopes, texts(3, nonempty=True))
fixed_ids = st.sampled_from(["a", "b", "memory", *HOSTILE_IDS])
small_ids = st.one_of(fixed_ids, fixed_ids, texts(2, nonempty=True))


@st.composite
def candidates(draw, family: str) -> Candidate:
    scope = draw(scopes)
    artifact = draw(small_ids)
    revision = draw(st.integers(1, 3) | st.integers(1, 10**6))
    if family == "memory":
        citation = Citation(scope, family, artifact, revision, draw(small_ids), draw(small_ids))
    else:
        citation = Citation(scope, family, artifact, revision)
    return Candidate(citation, draw(bodies))


@st.composite
def recalled_maps(draw, wanted):
    """Recall results of one family ``wanted`` draws and maybe others; its first scope has at least one hit."""
    first = draw(wanted)
    recalled = {}
    for family in [first, *draw(st.lists(st.sampled_from(FAMILIES), unique=True, max_size=3))]:
        if family in recalled:
            continue
        per_scope_max = 9 if family == "memory" else 4
        hits = st.lists(candidates(family), max_size=per_scope_max)
        first_scope = st.lists(candidates(family), min_size=1, max_size=per_scope_max)
        recalled[family] = [draw(first_scope), *draw(st.lists(hits, max_size=2))]
    return recalled


@st.composite
def assembly_options(draw):
    families = draw(st.permutations(FAMILIES))[: draw(st.integers(1, 4))]
    sections = [(family, draw(st.integers(1, FAMILY_LIMIT_MAX[family]))) for family in families]
    show = draw(st.sets(st.sampled_from(["confidence", "recall_rank"])))
    return options(*sections, show=show)


# Markdown's notice, markers and one short cited entry take about 500 bytes, so budgets below ~1000 mostly
# render nothing: one draw in eight stays there (down to the 512 edge); the others leave room for some
# entries but not all, so truncation and budget skips are common. (Hypothesis draws the low end of a wide
# range, and the first of sampled values, far more often than the rest: the small range comes last.)
BUDGET_RANGES = [(1000, 2600), (1000, 2600), (1000, 4000), (1000, 4000), (1000, 32768), (2600, 32768), (512, 999)]
budgets = st.sampled_from(BUDGET_RANGES).flatmap(lambda bounds: st.integers(*bounds))


@st.composite
def markdown_cases(draw):
    """(recalled, options) where the recall results hold at least one selected family."""
    opts = draw(assembly_options())
    recalled = draw(recalled_maps(st.sampled_from([spec.family for spec in opts.sections])))
    return recalled, opts


def _observe(result) -> None:
    """Labels the example for `--hypothesis-show-statistics`: what the strategies actually exercise."""
    reasons = {decision.reason for decision in result.decisions}
    event("renders content" if result.content is not None else "renders nothing")
    event("a body truncated" if any(origin.truncated for origin in result.origins) else "no body truncated")
    event("a budget skip" if REASON_BUDGET in reasons else "no budget skip")
    if REASON_TRUNCATION_BELOW_MINIMUM in reasons:
        event("a truncation below the 64-byte minimum skipped")


def _units_for(recalled) -> dict:
    """citation -> units of the body the pool kept for it (the first occurrence with a body)."""
    table = {}
    for family, per_scope in recalled.items():
        if family in FAMILIES:
            for candidate, _rank in ref_pool(family, per_scope):
                table[candidate.citation] = candidate.body
    return table


def _check_body(shown: str, units: list[str], truncated: bool) -> None:
    if not truncated:
        assert shown == "".join(units)
        assert utf8(shown) <= 2000
        return
    assert shown.endswith(ELLIPSIS)
    assert 64 <= utf8(shown) <= 2000
    prefix = shown[: -len(ELLIPSIS)]
    # The prefix ends exactly at a unit boundary: no escape sequence or code point is cut.
    length = 0
    for count, unit in enumerate(units):
        if length == len(prefix):
            assert "".join(units[:count]) == prefix
            break
        assert length < len(prefix)
        length += len(unit)
    else:
        raise AssertionError("a truncated body is a strict prefix")


def _check_markdown(recalled, opts, max_bytes, result) -> None:
    total_candidates = sum(len(hits) for per_scope in recalled.values() for hits in per_scope)
    assert len(result.decisions) == total_candidates
    included = [(d.citation, d.recall_rank) for d in result.decisions if d.outcome != "skipped"]
    origins = [(o.citation, o.recall_rank) for o in result.origins]
    assert sorted(included, key=repr) == sorted(origins, key=repr)
    if result.content is None:
        assert (result.status, result.content_bytes, result.origins) == ("empty", 0, ())
        return
    assert result.status == "ready"
    encoded = result.content.encode("utf-8")
    assert len(encoded) == result.content_bytes <= max_bytes
    assert encoded.decode("utf-8") == result.content
    lines = result.content.split("\n")
    begin = lines.index("BEGIN_POWERCONTEXT_PREPARED_TEXT_V1")
    for line in lines[begin + 1 : -1]:
        assert (
            line == ""
            or line in HEADINGS
            or (line.startswith("### ") and line.rsplit(" ", 1)[0][4:] in {h[3:] for h in HEADINGS})
            or (line.startswith("    ") and line[4:].split(":", 1)[0] in {
                "Scope", "Artifact", "Entry", "Confidence", "Recall rank", "Truncated"
            })
            or line.startswith(QUOTE)
        ), line  # fmt: skip
    entries = parse_markdown(result.content)
    assert [(e.citation, e.family, e.number, e.truncated) for e in entries] == [
        (o.citation, o.section_family, o.number, o.truncated) for o in result.origins
    ]
    order = [spec.family for spec in opts.sections]
    assert [e.family for e in entries] == sorted((e.family for e in entries), key=order.index)
    for spec in opts.sections:
        assert sum(e.family == spec.family for e in entries) <= spec.limit
    for entry, origin in zip(entries, result.origins, strict=True):
        assert entry.confidence == ("unknown (not assessed)" if "confidence" in opts.show else None)
        assert entry.recall_rank == (origin.recall_rank if "recall_rank" in opts.show else None)
    bodies_by_citation = _units_for(recalled)
    for entry in entries:
        _check_body(entry.body, ref_body_units(bodies_by_citation[entry.citation]), entry.truncated)


@PROPERTY_SETTINGS
@given(case=markdown_cases(), max_bytes=budgets)
def test_markdown_is_within_budget_well_formed_and_equals_the_reference(case, max_bytes):
    recalled, opts = case
    result = assemble_markdown(recalled, opts, max_bytes=max_bytes)
    _observe(result)
    _check_markdown(recalled, opts, max_bytes, result)
    assert assemble_markdown(recalled, opts, max_bytes=max_bytes) == result
    reference = ref_markdown(recalled, opts, max_bytes)
    assert result.content == reference.content
    assert [(o.citation, o.section_family, o.number, o.recall_rank, o.truncated) for o in result.origins] == (
        reference.included
    )


def _check_legacy(recalled, max_bytes, result) -> None:
    total_candidates = sum(len(hits) for per_scope in recalled.values() for hits in per_scope)
    assert len(result.decisions) == total_candidates
    if result.content is None:
        assert (result.status, result.content_bytes, result.origins) == ("empty", 0, ())
        return
    assert len(result.content.encode("utf-8")) == result.content_bytes <= max_bytes
    items = parse_legacy(result.content)
    assert [legacy_citation(item) for item in items] == [o.citation for o in result.origins]
    assert [item["truncated"] for item in items] == [o.truncated for o in result.origins]
    families = [item["family"] for item in items]
    assert families.count("memory") <= 6 and families.count("topic_memory") <= 2
    assert families.count("experience") <= 2 and "profile" not in families
    bodies_by_citation = _units_for(recalled)
    for item in items:
        _check_body(item["body"], list(bodies_by_citation[legacy_citation(item)]), item["truncated"])


@PROPERTY_SETTINGS
@given(recalled=recalled_maps(st.sampled_from(LEGACY_FAMILIES)), max_bytes=budgets)
def test_legacy_is_within_budget_one_json_line_and_equals_the_reference(recalled, max_bytes):
    result = assemble_legacy(recalled, max_bytes=max_bytes)
    _observe(result)
    _check_legacy(recalled, max_bytes, result)
    reference = ref_legacy(recalled, max_bytes)
    assert result.content == reference.content
    assert [(o.citation, o.section_family, o.number, o.recall_rank, o.truncated) for o in result.origins] == (
        reference.included
    )


@PROPERTY_SETTINGS
@given(body=st.one_of(texts(nonempty=True), long_texts), max_bytes=st.integers(380, 2600))
def test_a_single_truncated_body_is_the_longest_prefix_that_fits(body, max_bytes):
    recalled = {"experience": [[Candidate(Citation("s", "experience", "a", 1), body)]]}
    opts = options(("experience", 1))
    result = assemble_markdown(recalled, opts, max_bytes=max_bytes)
    _check_markdown(recalled, opts, max_bytes, result)
    if result.content is not None and result.origins[0].truncated:
        (entry,) = parse_markdown(result.content)
        units = ref_body_units(body)
        kept = len(entry.body) - 1
        count = next(i for i in range(len(units) + 1) if len("".join(units[:i])) == kept)
        longer = "".join(units[: count + 1]) + ELLIPSIS
        shown, wanted = entry.body.replace("\n", "\n" + QUOTE), longer.replace("\n", "\n" + QUOTE)
        grown = result.content.replace(shown, wanted)
        assert utf8(longer) > 2000 or utf8(grown) > max_bytes
