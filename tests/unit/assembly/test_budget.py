"""The shared budget engine: exact byte boundaries, the 2000-byte cap, the 64-byte minimum, skips."""

from __future__ import annotations

import json

import pytest

from assembly.budget import BODY_CAP_BYTES, MIN_TRUNCATED_BODY_BYTES, Packer, fit_entry
from assembly.rendering import LegacyBody, MarkdownBody
from assembly.selection import assemble_legacy, assemble_markdown

from .helpers import experience, memory, options, parse_legacy, parse_markdown, utf8

MEMORY = options(("memory", 16))


def md(recalled, max_bytes, opts=MEMORY):
    result = assemble_markdown(recalled, opts, max_bytes=max_bytes)
    if result.content is not None:
        assert result.content_bytes == utf8(result.content) <= max_bytes
        parse_markdown(result.content)
    return result


def legacy(recalled, max_bytes):
    result = assemble_legacy(recalled, max_bytes=max_bytes)
    if result.content is not None:
        assert result.content_bytes == utf8(result.content) <= max_bytes
        parse_legacy(result.content)
    return result


def bodies(result):
    return [entry.body for entry in parse_markdown(result.content)]


def overhead_of_truncated_entry(recalled, opts=MEMORY):
    """Bytes of a one-entry truncated content minus its body text, measured from a real truncation."""
    probe = md(recalled, 1000, opts)
    (body,) = bodies(probe)
    assert body.endswith("\u2026")
    return probe.content_bytes - utf8(body)


def test_content_of_exactly_max_bytes_is_included_and_one_byte_less_drops_the_last_entry():
    recalled = {"memory": [[memory("first body"), memory("second body", entry="entry-2")]]}
    full = md(recalled, 32768)
    size = full.content_bytes
    assert md(recalled, size).content == full.content
    tighter = md(recalled, size - 1)
    assert bodies(tighter) == ["first body"]
    assert [d.reason for d in tighter.decisions] == [None, "budget"]
    first_only = md({"memory": [recalled["memory"][0][:1]]}, size)
    assert tighter.decisions[1].bytes == size - first_only.content_bytes


def test_one_byte_more_than_needed_changes_nothing():
    recalled = {"memory": [[memory("first body"), memory("second body", entry="entry-2")]]}
    size = md(recalled, 32768).content_bytes
    assert md(recalled, size + 1).content == md(recalled, size).content


def test_a_truncated_single_line_ascii_body_fills_the_budget_to_the_last_byte():
    recalled = {"memory": [[memory("x" * 1500)]]}
    full = md(recalled, 32768).content_bytes
    assert md(recalled, full).origins[0].truncated is False
    for max_bytes in (full - 1, full - 2, full - 100, full - 1000):
        result = md(recalled, max_bytes)
        assert result.content_bytes == max_bytes
        (body,) = bodies(result)
        assert body == "x" * (utf8(body) - 3) + "\u2026"
        assert result.origins[0].truncated and "    Truncated: yes\n" in result.content
        assert result.decisions[0].outcome == "included_truncated"
        envelope = full - md(recalled, full).decisions[0].bytes
        assert result.decisions[0].bytes == max_bytes - envelope


def test_the_minimum_truncated_body_of_64_bytes_fits_exactly_and_one_byte_less_skips():
    recalled = {"memory": [[memory("x" * 1000)]]}
    overhead = overhead_of_truncated_entry(recalled)
    at_minimum = md(recalled, overhead + MIN_TRUNCATED_BODY_BYTES)
    assert bodies(at_minimum) == ["x" * 61 + "\u2026"]
    below = md(recalled, overhead + MIN_TRUNCATED_BODY_BYTES - 1)
    assert below.status == "empty" and below.content is None and below.content_bytes == 0
    assert [(d.outcome, d.reason) for d in below.decisions] == [("skipped", "budget")]


def test_a_short_body_that_fits_whole_is_exempt_from_the_64_byte_minimum():
    recalled = {"memory": [[memory("ok")]]}
    size = md(recalled, 32768).content_bytes
    assert bodies(md(recalled, size)) == ["ok"]
    assert md(recalled, size - 1).status == "empty"


def test_later_short_entries_are_included_after_a_skipped_long_one():
    huge_identity = memory("long " * 400, entry="e" * 600)
    short = memory("short", entry="entry-2")
    recalled = {"memory": [[huge_identity, short]]}
    result = md(recalled, 900, opts=options(("memory", 2), show=["recall_rank"]))
    (entry,) = parse_markdown(result.content)
    assert (entry.body, entry.number, entry.recall_rank) == ("short", 1, 2)
    assert [(d.recall_rank, d.reason) for d in result.decisions] == [(1, "budget"), (2, None)]


def test_a_body_whose_line_breaks_keep_its_prefix_below_the_minimum_is_skipped_for_a_later_one():
    broken = memory("a\n" * 300, entry="broken")
    later = memory("one line that fits whole", entry="later")
    recalled = {"memory": [[broken, later]]}
    overhead = overhead_of_truncated_entry({"memory": [[memory("y" * 1000, entry="broken")]]})
    result = md(recalled, overhead + 150)
    assert [(d.citation.entry_id, d.reason) for d in result.decisions] == [
        ("broken", "truncation_below_minimum"),
        ("later", None),
    ]
    assert bodies(result) == ["one line that fits whole"]


def test_escape_sequences_are_never_split_and_a_too_short_cut_is_below_minimum():
    recalled = {"memory": [[memory("\x00" * 100)]]}
    overhead = overhead_of_truncated_entry({"memory": [[memory("z" * 1000)]]})
    seen = set()
    for max_bytes in range(overhead + 64, overhead + 140):
        result = md(recalled, max_bytes)
        if result.status == "empty":
            assert result.decisions[0].reason == "truncation_below_minimum"
            continue
        (body,) = bodies(result)
        prefix = body.removesuffix("\u2026")
        assert prefix == "\\u0000" * (len(prefix) // 6)
        assert utf8(body) >= 64
        assert max_bytes - 6 < result.content_bytes <= max_bytes
        seen.add(len(prefix) // 6)
    assert min(seen) == 11 and max(seen) >= 22
    # 63 bytes of room for the prefix hold ten 6-byte escapes: 60 + 3 < 64.
    skipped = md(recalled, overhead + 63 + 3)
    assert skipped.status == "empty"
    assert skipped.decisions[0].reason == "truncation_below_minimum"
    # A skip reports the bytes the complete entry would have added, as a budget skip does.
    complete = md(recalled, 32768)
    assert skipped.decisions[0].bytes == complete.decisions[0].bytes > 600
    budget_skip = md(recalled, overhead).decisions[0]
    assert (budget_skip.reason, budget_skip.bytes) == ("budget", complete.decisions[0].bytes)


def test_chinese_and_emoji_truncation_never_splits_a_code_point():
    original = "修改契约😀é" * 300
    recalled = {"memory": [[memory(original)]]}
    overhead = overhead_of_truncated_entry({"memory": [[memory("z" * 1000)]]})
    included = 0
    for max_bytes in range(overhead + 64, overhead + 120):
        result = md(recalled, max_bytes)
        if result.status == "empty":
            # 61 bytes of room hold 60 bytes of these characters: 63 < 64.
            assert max_bytes < overhead + 67 and result.decisions[0].reason == "truncation_below_minimum"
            continue
        included += 1
        (body,) = bodies(result)
        assert body.endswith("\u2026") and original.startswith(body[:-1])
        assert max_bytes - 4 < result.content_bytes <= max_bytes
    assert included >= 50


def test_the_per_entry_cap_allows_exactly_2000_bytes_whole():
    assert bodies(md({"memory": [[memory("x" * BODY_CAP_BYTES)]]}, 32768)) == ["x" * 2000]


def test_a_body_over_2000_bytes_is_truncated_with_the_ellipsis_inside_the_cap():
    result = md({"memory": [[memory("x" * 2001)]]}, 32768)
    assert bodies(result) == ["x" * 1997 + "\u2026"]
    assert result.origins[0].truncated


def test_chinese_body_over_the_cap_is_cut_at_a_character_boundary():
    (body,) = bodies(md({"memory": [[memory("中" * 700)]]}, 32768))
    assert body == "中" * 665 + "\u2026" and utf8(body) == 1998


def test_the_cap_counts_the_normalized_and_escaped_body():
    (body,) = bodies(md({"memory": [[memory("\t" * 400)]]}, 32768))
    assert body == "\\u0009" * 332 + "\u2026" and utf8(body) == 1995
    (body,) = bodies(md({"memory": [[memory("\r\n" * 1500)]]}, 32768))
    assert body == "\n" * 1500
    (body,) = bodies(md({"memory": [[memory("\r\n" * 2500)]]}, 32768))
    assert body == "\n" * 1997 + "\u2026"


def test_the_two_digit_entry_number_is_counted_when_fitting():
    hits = [memory("b" * 20, entry=f"e{i}") for i in range(10)]
    recalled = {"memory": [hits]}
    size = md(recalled, 32768).content_bytes
    assert "### Memory 10\n" in md(recalled, size).content
    assert len(md(recalled, size - 1).origins) == 9


def test_the_section_heading_of_a_new_family_is_counted_when_fitting():
    recalled = {"memory": [[memory("m" * 30)]], "experience": [[experience("e" * 30)]]}
    opts = options(("memory", 1), ("experience", 1))
    size = md(recalled, 32768, opts).content_bytes
    assert "## Experience" in md(recalled, size, opts).content
    assert "## Experience" not in md(recalled, size - 1, opts).content


def test_optional_metadata_is_counted_when_fitting():
    recalled = {"memory": [[memory("m" * 30)]]}
    opts = options(("memory", 1), show=["confidence", "recall_rank"])
    size = md(recalled, 32768, opts).content_bytes
    assert size - md(recalled, 32768).content_bytes == len("    Confidence: unknown (not assessed)\n") + len(
        "    Recall rank: 1\n"
    )
    assert md(recalled, size, opts).status == "ready"
    assert md(recalled, size - 1, opts).status == "empty"


def test_earlier_sections_may_consume_the_budget_of_later_ones():
    recalled = {"memory": [[memory("m" * 1900)]], "experience": [[experience("e" * 100)]]}
    result = md(recalled, 2200, options(("memory", 1), ("experience", 1)))
    assert [o.section_family for o in result.origins] == ["memory"]
    result = md(recalled, 2200, options(("experience", 1), ("memory", 1)))
    assert [o.section_family for o in result.origins] == ["experience", "memory"]
    assert result.origins[1].truncated


def test_a_budget_below_the_envelope_gives_the_empty_result():
    result = md({"memory": [[memory("m")]]}, 300)
    assert result.status == "empty" and result.decisions[0].reason == "budget"


# --- legacy ----------------------------------------------------------------------------------------


def test_legacy_counts_json_escaping_in_the_budget_and_fills_it_exactly():
    recalled = {"memory": [[memory('"' * 1000)]]}
    full = legacy(recalled, 32768)
    assert full.content_bytes > 2000 + 300
    for cut in (1, 2, 501):
        result = legacy(recalled, full.content_bytes - cut)
        (item,) = parse_legacy(result.content)
        assert item["truncated"] is True and item["body"] == '"' * (len(item["body"]) - 1) + "\u2026"
        # Each quote costs two bytes; the content is within one byte of the budget.
        assert full.content_bytes - cut - 2 < result.content_bytes <= full.content_bytes - cut


def test_legacy_cap_and_minimum_measure_the_stored_bytes_not_the_escaped_ones():
    (item,) = parse_legacy(legacy({"memory": [[memory('"' * 2500)]]}, 32768).content)
    assert item["body"] == '"' * 1997 + "\u2026" and item["truncated"] is True
    (item,) = parse_legacy(legacy({"memory": [[memory("中" * 700)]]}, 32768).content)
    assert item["body"] == "中" * 665 + "\u2026"


def test_legacy_exact_boundary_and_minimum():
    recalled = {"memory": [[memory("x" * 1000)]], "experience": [[experience("e" * 10)]]}
    full = legacy(recalled, 32768)
    assert legacy(recalled, full.content_bytes).content == full.content
    assert [o.section_family for o in legacy(recalled, full.content_bytes - 1).origins] == ["memory"]
    alone = {"memory": recalled["memory"]}
    probe = legacy(alone, 800)
    (item,) = parse_legacy(probe.content)
    overhead = probe.content_bytes - utf8(item["body"])
    assert parse_legacy(legacy(alone, overhead + 64).content)[0]["body"] == "x" * 61 + "\u2026"
    assert legacy(alone, overhead + 63).status == "empty"


def test_legacy_control_characters_are_json_escapes_on_one_line():
    body = "a\u2028b\u2029c\x85d\u202ee\U000e0001f\tg\x00"
    (item,) = parse_legacy(legacy({"experience": [[experience(body)]]}, 8000).content)
    assert item["body"] == body
    line = legacy({"experience": [[experience(body)]]}, 8000).content.split("\n")[4]
    assert '"body":"a\\u2028b\\u2029c\\u0085d\\u202ee\\udb40\\udc01f\\tg\\u0000"' in line
    assert json.loads(line)["items"][0]["body"] == body


# --- engine ----------------------------------------------------------------------------------------


def test_fit_entry_prefers_the_complete_body_and_reports_its_bytes():
    body = MarkdownBody("hello")
    fit = fit_entry(body, complete_overhead=10, truncated_overhead=11, room=10 + body.complete_cost)
    assert (fit.cut, fit.bytes, fit.reason) == (None, 10 + body.complete_cost, None)


@pytest.mark.parametrize("factory", [MarkdownBody, LegacyBody])
def test_fit_entry_returns_the_longest_prefix_within_both_limits(factory):
    body = factory("abcdefghij" * 30)
    fit = fit_entry(body, complete_overhead=0, truncated_overhead=0, room=100)
    assert fit.cut is not None and fit.bytes <= 100
    assert body.cost(fit.cut + 1) + 3 > 100
    assert fit.bytes == body.cost(fit.cut) + 3


def test_packer_tracks_size_arithmetically_and_checks_it_at_the_end():
    packer = Packer("ab", "é", 100)
    assert packer.size == 4 and packer.content() is None
    packer.append("中", 3)
    assert packer.content() == "ab中é" and packer.room == 100 - 7
    packer.append("x", 5)
    with pytest.raises(AssertionError):
        packer.content()


def test_legacy_keeps_all_but_the_last_character_when_only_that_one_does_not_fit():
    # "\x01" costs six bytes in JSON ("\\u0001") but is one stored byte: one byte short of the complete
    # item, the body loses that character alone ("…" is three bytes, "true" one less than "false").
    body = "zeta " + "x" * 100 + "\x01"
    complete = assemble_legacy({"experience": [[experience(body)]]}, max_bytes=8000)
    shorter = assemble_legacy({"experience": [[experience(body)]]}, max_bytes=complete.content_bytes - 1)
    [item] = parse_legacy(shorter.content)
    assert item["truncated"] is True
    assert item["body"] == body[:-1] + "…"
    assert shorter.content_bytes == complete.content_bytes - 6 + 3 - 1
