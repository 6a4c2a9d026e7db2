"""Selection and ordering (RFC steps 4-8): sections, limits, retrieval order, scopes, pool cap, dedupe."""

from __future__ import annotations

import pytest

from assembly.selection import assemble_legacy, assemble_markdown, build_pool, empty_result, interleave
from assembly.types import Decision

from .helpers import experience, memory, options, parse_legacy, parse_markdown, profile, topic


def md(recalled, opts, max_bytes=32768):
    result = assemble_markdown(recalled, opts, max_bytes=max_bytes)
    if result.content is not None:
        parsed = parse_markdown(result.content)
        assert [(e.citation, e.family, e.number, e.truncated) for e in parsed] == [
            (o.citation, o.section_family, o.number, o.truncated) for o in result.origins
        ]
    return result


def included_bodies(result):
    return [entry.body for entry in parse_markdown(result.content)]


def test_experience_first_sections_render_experience_before_memory():
    recalled = {"memory": [[memory("m1"), memory("m2", entry="entry-2")]], "experience": [[experience("e1")]]}
    result = md(recalled, options(("experience", 2), ("memory", 5)))
    assert [(o.section_family, o.number) for o in result.origins] == [
        ("experience", 1),
        ("memory", 1),
        ("memory", 2),
    ]
    content = result.content
    assert content.index("## Experience") < content.index("### Experience 1") < content.index("## Memory")
    assert content.index("### Memory 1") < content.index("### Memory 2")


def test_memory_first_sections_render_memory_before_experience():
    recalled = {"memory": [[memory("m1")]], "experience": [[experience("e1")]]}
    content = md(recalled, options(("memory", 1), ("experience", 1))).content
    assert content.index("## Memory") < content.index("## Experience")


def test_all_four_families_render_in_sections_order_with_their_headings():
    recalled = {
        "memory": [[memory("m")]],
        "experience": [[experience("e")]],
        "profile": [[profile("p")]],
        "topic_memory": [[topic("Title: t\nSummary: s")]],
    }
    opts = options(("topic_memory", 1), ("profile", 1), ("experience", 1), ("memory", 1))
    parsed = parse_markdown(md(recalled, opts).content)
    assert [entry.family for entry in parsed] == ["topic_memory", "profile", "experience", "memory"]
    assert "## Topic Memory\n\n### Topic Memory 1\n" in md(recalled, opts).content
    assert ">     Title: t\n>     Summary: s\n" in md(recalled, opts).content


def test_per_family_limit_caps_included_entries_and_logs_the_rest():
    hits = [memory(f"body {i}", entry=f"e{i}") for i in range(5)]
    result = md({"memory": [hits]}, options(("memory", 2)))
    assert [o.citation.entry_id for o in result.origins] == ["e0", "e1"]
    assert [(d.recall_rank, d.outcome, d.reason) for d in result.decisions] == [
        (1, "included", None),
        (2, "included", None),
        (3, "skipped", "family_limit_reached"),
        (4, "skipped", "family_limit_reached"),
        (5, "skipped", "family_limit_reached"),
    ]


def test_within_family_retrieval_order_is_preserved_not_re_sorted():
    bodies = ["zeta", "alpha", "mu", "beta"]
    hits = [memory(body, entry=f"e{i}") for i, body in enumerate(bodies)]
    result = md({"memory": [hits]}, options(("memory", 16), show=["recall_rank"]))
    assert included_bodies(result) == bodies
    assert [entry.recall_rank for entry in parse_markdown(result.content)] == [1, 2, 3, 4]


def test_reranker_order_is_input_order_even_when_revisions_or_ids_suggest_another():
    hits = [experience("x", artifact="b", revision=9), experience("y", artifact="a", revision=1)]
    result = md({"experience": [hits]}, options(("experience", 8)))
    assert [o.citation.artifact_id for o in result.origins] == ["b", "a"]


def test_scopes_are_interleaved_round_robin_in_scope_order_with_cross_scope_citations():
    current = [memory(f"a{i}", scope="project:demo", entry=f"a{i}") for i in range(3)]
    referenced = [memory(f"b{i}", scope="team:platform", entry=f"b{i}") for i in range(2)]
    other = [memory("c0", scope="user:alice", entry="c0")]
    result = md({"memory": [current, referenced, other]}, options(("memory", 16), show=["recall_rank"]))
    parsed = parse_markdown(result.content)
    assert [e.body for e in parsed] == ["a0", "b0", "c0", "a1", "b1", "a2"]
    assert [e.citation.scope_id for e in parsed] == [
        "project:demo",
        "team:platform",
        "user:alice",
        "project:demo",
        "team:platform",
        "project:demo",
    ]
    assert [e.recall_rank for e in parsed] == [1, 2, 3, 4, 5, 6]
    assert '    Scope: "team:platform"\n' in result.content


def test_interleave_handles_uneven_and_empty_scope_lists():
    assert interleave([[1, 2, 3], [], [4], [5, 6]]) == [1, 4, 5, 2, 6, 3]
    assert interleave([]) == []
    assert interleave([[1, 2]]) == [1, 2]


def test_memory_pool_is_capped_at_sixteen_after_interleaving_scopes():
    scopes = [[memory(f"{s}-{i}", scope=f"s{s}", entry=f"e{i}") for i in range(16)] for s in range(2)]
    pool = build_pool("memory", scopes)
    assert len(pool.ranked) == 16
    assert [item.candidate.body for item in pool.ranked[:4]] == ["0-0", "1-0", "0-1", "1-1"]
    assert pool.ranked[-1].candidate.body == "1-7"
    result = md({"memory": scopes}, options(("memory", 16)))
    assert len(result.origins) == 16
    assert [d.reason for d in result.decisions[16:]] == ["pool_cap"] * 16
    assert all(d.recall_rank is None for d in result.decisions[16:])
    assert result.decisions[16].citation == scopes[0][8].citation


@pytest.mark.parametrize(("family", "make"), [("experience", experience), ("topic_memory", topic)])
def test_experience_and_topic_memory_pools_are_capped_at_eight(family, make):
    hits = [make(f"b{i}", artifact=f"a{i}") for i in range(12)]
    result = md({family: [hits]}, options((family, 8)))
    assert len(result.origins) == 8
    assert [d.reason for d in result.decisions] == [None] * 8 + ["pool_cap"] * 4


def test_profile_pool_has_no_cap_and_one_snapshot_per_scope_counts_against_the_limit():
    scopes = [[profile(f"profile of s{i}", scope=f"s{i}")] for i in range(20)]
    result = md({"profile": scopes}, options(("profile", 8)))
    assert [o.citation.scope_id for o in result.origins] == [f"s{i}" for i in range(8)]
    assert [d.reason for d in result.decisions] == [None] * 8 + ["family_limit_reached"] * 12
    assert result.decisions[-1].recall_rank == 20


def test_the_cap_applies_before_bodiless_entries_are_removed():
    hits = [memory(None, entry="e0")] + [memory(f"b{i}", entry=f"e{i}") for i in range(1, 17)]
    pool = build_pool("memory", [hits])
    assert [item.candidate.citation.entry_id for item in pool.ranked] == [f"e{i}" for i in range(1, 16)]
    result = md({"memory": [hits]}, options(("memory", 16)))
    assert [d.reason for d in result.decisions] == ["no_body"] + [None] * 15 + ["pool_cap"]


@pytest.mark.parametrize("body", [None, ""])
def test_entries_without_a_body_are_dropped_before_ranking(body):
    hits = [experience(body, artifact="x"), experience("kept", artifact="y")]
    result = md({"experience": [hits]}, options(("experience", 8)))
    assert [o.citation.artifact_id for o in result.origins] == ["y"]
    assert result.origins[0].recall_rank == 1
    dropped = Decision(experience("", artifact="x").citation, None, "skipped", "no_body", None)
    assert result.decisions[0] == dropped


def test_exact_duplicate_identities_keep_the_first_occurrence():
    first = memory("first text", scope="s1", entry="e", version="v1")
    again = memory("other text, same identity", scope="s1", entry="e", version="v1")
    result = md({"memory": [[first], [again]]}, options(("memory", 16)))
    assert included_bodies(result) == ["first text"]
    assert [(d.recall_rank, d.reason) for d in result.decisions] == [(1, None), (None, "duplicate")]


def test_same_text_with_a_different_identity_is_not_deduplicated():
    hits = [
        memory("same", scope="s1", entry="e", version="v1"),
        memory("same", scope="s2", entry="e", version="v1"),
        memory("same", scope="s1", entry="e", version="v2"),
        memory("same", scope="s1", entry="f", version="v1"),
        memory("same", scope="s1", entry="e", version="v1", revision=4),
        memory("same", scope="s1", entry="e", version="v1", artifact="memory-2"),
    ]
    result = md({"memory": [hits]}, options(("memory", 16)))
    assert included_bodies(result) == ["same"] * 6
    assert len({o.citation for o in result.origins}) == 6


def test_families_not_in_sections_contribute_no_content_and_are_logged_as_not_selected():
    recalled = {
        "memory": [[memory("m")]],
        "experience": [[experience("secret experience")]],
        "skill": [],
    }
    result = md(recalled, options(("memory", 6)))
    assert "secret experience" not in result.content and "experience" not in result.content
    assert [(d.citation.family, d.reason, d.recall_rank) for d in result.decisions] == [
        ("memory", None, 1),
        ("experience", "family_not_selected", None),
    ]


def test_empty_sections_return_the_empty_result_without_reading_recalled():
    class Exploding(dict):
        def __getitem__(self, key):
            raise AssertionError("recalled must not be read")

        get = __getitem__

        def __iter__(self):
            raise AssertionError("recalled must not be read")

    assert assemble_markdown(Exploding(), options(), max_bytes=8000) == empty_result()


def test_no_candidates_at_all_is_the_empty_result():
    result = md({}, options(("memory", 6), ("experience", 2)))
    assert (result.status, result.content, result.content_bytes, result.origins, result.decisions) == (
        "empty",
        None,
        0,
        (),
        (),
    )


def test_only_bodiless_candidates_give_an_empty_result_with_their_decisions():
    result = md({"memory": [[memory(None)]]}, options(("memory", 6)))
    assert result.status == "empty" and result.content is None
    assert [d.reason for d in result.decisions] == ["no_body"]


def test_sections_with_no_included_entries_are_omitted():
    recalled = {"memory": [[memory("m")]], "experience": [[]]}
    content = md(recalled, options(("experience", 2), ("memory", 6))).content
    assert "## Experience" not in content and "## Memory" in content


def test_a_candidate_recalled_under_the_wrong_family_is_a_programming_error():
    with pytest.raises(ValueError, match="^a memory candidate was recalled as experience$"):
        assemble_markdown({"experience": [[memory("m")]]}, options(("experience", 2)), max_bytes=8000)


def test_families_not_selected_are_logged_in_the_families_order_whatever_the_recall_order():
    recalled = {
        "topic_memory": [[topic("t")]],
        "experience": [[experience("e")]],
        "memory": [[memory("m1"), memory("m2", entry="entry-2")]],
        "profile": [[profile("p")]],
    }
    result = assemble_markdown(recalled, options(("profile", 1)), max_bytes=8000)
    skipped = [(d.citation.family, d.reason) for d in result.decisions if d.reason == "family_not_selected"]
    assert [family for family, _ in skipped] == ["memory", "memory", "experience", "topic_memory"]


def test_decision_log_covers_every_candidate_with_one_reason_each():
    recalled = {
        "memory": [
            [memory("kept", entry="a"), memory(None, entry="b"), memory("dup", entry="a")]
            + [memory("over limit", entry="c")]
            + [memory(f"filler {i}", entry=f"f{i}") for i in range(13)],
            [memory("capped", scope="s2", entry="z"), memory("capped too", scope="s2", entry="y")],
        ],
        "experience": [[experience("x" * 5000, artifact="long"), experience("short", artifact="short")]],
        "profile": [[profile("not asked for")]],
    }
    opts = options(("memory", 1), ("experience", 2))
    # Room for memory 1 in full and then nothing but a sliver for experience.
    probe = md(recalled, options(("memory", 1)))
    sliver = probe.content_bytes + 40
    result = md(recalled, opts, max_bytes=sliver)
    decisions = result.decisions
    reasons = [(d.citation.family, d.citation.artifact_id, d.citation.entry_id, d.reason) for d in decisions]
    assert reasons[:5] == [
        ("memory", "memory", "a", None),
        ("memory", "memory", "z", "family_limit_reached"),
        ("memory", "memory", "b", "no_body"),
        ("memory", "memory", "y", "family_limit_reached"),
        ("memory", "memory", "a", "duplicate"),
    ]
    assert [r[3] for r in reasons].count("pool_cap") == 3
    assert ("experience", "long", None, "budget") in reasons
    assert ("experience", "short", None, "budget") in reasons
    assert reasons[-1] == ("profile", "profile", None, "family_not_selected")
    assert len(result.decisions) == 19 + 2 + 1
    by_outcome = {d.outcome for d in result.decisions}
    assert by_outcome == {"included", "skipped"}
    budget = [d for d in result.decisions if d.reason == "budget"]
    assert all(d.bytes is not None and d.bytes > 40 for d in budget)
    assert all(d.bytes is None for d in result.decisions if d.reason not in (None, "budget"))
    assert result.content == probe.content


def test_included_decision_bytes_add_up_to_the_content_between_the_markers():
    recalled = {"memory": [[memory("a" * 3000), memory("b", entry="e2")]], "experience": [[experience("c")]]}
    result = md(recalled, options(("memory", 6), ("experience", 2)), max_bytes=4000)
    begin = "BEGIN_POWERCONTEXT_PREPARED_TEXT_V1\n"
    head = result.content.index(begin) + len(begin)
    tail = len("\nEND_POWERCONTEXT_PREPARED_TEXT_V1")
    inner = result.content.encode()[len(result.content[:head].encode()) : -tail]
    assert sum(d.bytes for d in result.decisions if d.bytes is not None and d.reason is None) == len(inner)
    assert result.decisions[0].outcome == "included_truncated"


# --- legacy ----------------------------------------------------------------------------------------


def test_legacy_interleaves_memory_topic_memory_experience_by_recall_rank():
    recalled = {
        "memory": [[memory(f"m{i}", entry=f"m{i}") for i in range(1, 4)]],
        "topic_memory": [[topic(f"t{i}", artifact=f"t{i}") for i in range(1, 4)]],
        "experience": [[experience(f"e{i}", artifact=f"e{i}") for i in range(1, 4)]],
    }
    result = assemble_legacy(recalled, max_bytes=32768)
    items = parse_legacy(result.content)
    assert [item["body"] for item in items] == ["m1", "t1", "e1", "m2", "t2", "e2", "m3"]
    assert [o.number for o in result.origins] == list(range(1, 8))
    assert [(d.citation.artifact_id, d.reason) for d in result.decisions if d.reason] == [
        ("t3", "family_limit_reached"),
        ("e3", "family_limit_reached"),
    ]


def test_legacy_output_limits_are_memory_six_topic_two_experience_two():
    recalled = {
        "memory": [[memory(f"m{i}", entry=f"m{i}") for i in range(10)]],
        "topic_memory": [[topic(f"t{i}", artifact=f"t{i}") for i in range(5)]],
        "experience": [[experience(f"e{i}", artifact=f"e{i}") for i in range(5)]],
    }
    result = assemble_legacy(recalled, max_bytes=32768)
    families = [o.section_family for o in result.origins]
    assert (families.count("memory"), families.count("topic_memory"), families.count("experience")) == (
        6,
        2,
        2,
    )
    bodies = [item["body"] for item in parse_legacy(result.content)]
    assert bodies == ["m0", "t0", "e0", "m1", "t1", "e1", "m2", "m3", "m4", "m5"]


def test_legacy_ignores_profile_and_logs_it_as_not_selected():
    recalled = {"memory": [[memory("m")]], "profile": [[profile("p")]]}
    result = assemble_legacy(recalled, max_bytes=8000)
    assert [item["family"] for item in parse_legacy(result.content)] == ["memory"]
    assert result.decisions[-1].reason == "family_not_selected"


def test_legacy_uses_the_same_pools_across_scopes_cap_and_dedupe():
    a = [memory(f"a{i}", scope="a", entry=f"e{i}") for i in range(3)]
    b = [memory("b0", scope="b", entry="e0"), memory("a0 again", scope="a", entry="e0")]
    result = assemble_legacy({"memory": [a, b]}, max_bytes=32768)
    assert [item["body"] for item in parse_legacy(result.content)] == ["a0", "b0", "a1", "a2"]
    assert "duplicate" in [d.reason for d in result.decisions]


def test_legacy_with_nothing_to_include_is_empty():
    assert assemble_legacy({}, max_bytes=8000) == empty_result()
