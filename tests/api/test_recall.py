"""DESIGN §5 recall, observed through POST /v1/context/prepare: which items a query finds, which
revision and version each cites, and how profile and topic memory are projected."""

import pytest

from artifacts import services
from tests.api.factories import (
    EMPTY_RESPONSE,
    add_experience,
    add_memory,
    add_profile,
    add_topic,
    legacy_of,
    make_key,
    make_scope,
    markdown_of,
    ok_json,
    prepare,
    propose_profile,
    remove_memory,
    set_references,
    update_memory,
)


@pytest.fixture
def demo(db):
    return make_scope("project:demo")


@pytest.fixture
def key(demo):
    return make_key(read=[demo])


def md(client, key, query, *families, limit=8, scope_id="project:demo", show=None):
    assembly = {"sections": [{"family": f, "limit": min(limit, 16 if f == "memory" else 8)} for f in families]}
    if show:
        assembly["show"] = show
    return prepare(client, key, {"scope_id": scope_id, "query": query, "max_bytes": 32768, "assembly": assembly})


# --- lexical matching ---------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query",
    ["契约测试", "如何运行契约测试？", "客户端契约", "契约"],
)
def test_chinese_query_without_spaces_finds_chinese_entries(client, demo, key, query):
    add_memory(
        demo,
        {
            "zh-contract": "修改接口后需要重新生成客户端并运行契约测试。",
            "zh-weather": "今天天气很好，适合出去散步。",
            "en": "Run the contract tests after changing the API.",
        },
    )

    doc = markdown_of(md(client, key, query, "memory"))

    assert doc.entry_ids == ["zh-contract"]


@pytest.mark.django_db
def test_chinese_experience_and_topic_memory_are_found_too(client, demo, key):
    add_experience(demo, "经验", "部署之前先备份数据库。")
    add_experience(demo, "other", "代码评审需要两个人。")
    add_topic(demo, "主题", title="数据库备份", summary="每天凌晨自动备份。")

    doc = markdown_of(md(client, key, "怎么备份数据库", "experience", "topic_memory"))

    assert [(e.family, e.artifact_id) for e in doc.entries] == [("experience", "经验"), ("topic_memory", "主题")]


@pytest.mark.django_db
def test_japanese_text_without_spaces_is_found(client, demo, key):
    add_memory(demo, {"ja": "デプロイの前にテストを実行する。", "other": "天気がいい。"})

    doc = markdown_of(md(client, key, "テストを実行", "memory"))

    assert doc.entry_ids == ["ja"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "stored, query",
    [
        ("Deploy with the blue-green strategy", "DEPLOY"),
        ("deploying to staging first", "deployed"),
        ("The API contract lives in openapi", "ＡＰＩ"),  # fullwidth letters, NFKC
        ("ﬁle handles must be closed", "file"),  # ligature, NFKC
        ("Straße closures", "STRASSE"),  # case folding
    ],
)
def test_matching_is_case_insensitive_normalized_and_stemmed(client, demo, key, stored, query):
    add_memory(demo, {"hit": stored, "miss": "completely unrelated words"})

    doc = markdown_of(md(client, key, query, "memory"))

    assert doc.entry_ids == ["hit"]


@pytest.mark.django_db
def test_rare_query_terms_weigh_more_than_common_ones(client, demo, key):
    # "common" is in every document, "rare" in one: IDF puts the rare match first although the
    # common-term document was written first and repeats its term.
    add_memory(demo, {"has-common": "common common words here"})
    add_memory(demo, {f"filler-{i}": f"common filler {i}" for i in range(6)})
    add_memory(demo, {"has-rare": "rare words here too"})

    doc = markdown_of(md(client, key, "common rare", "memory", limit=16))

    assert doc.entry_ids[0] == "has-rare"
    assert doc.entry_ids[1] == "has-common"


@pytest.mark.django_db
def test_shorter_documents_rank_above_longer_ones_with_the_same_matches(client, demo, key):
    add_memory(demo, {"long": "alpha " + " ".join(f"word{i}" for i in range(40))})
    add_memory(demo, {"short": "alpha word"})
    add_memory(demo, {"medium": "alpha " + " ".join(f"word{i}" for i in range(8))})

    assert markdown_of(md(client, key, "alpha", "memory")).entry_ids == ["short", "medium", "long"]


@pytest.mark.django_db
def test_repeated_query_terms_in_a_document_raise_its_rank(client, demo, key):
    add_memory(demo, {"once": "alpha beta gamma delta"})
    add_memory(demo, {"thrice": "alpha alpha alpha delta"})

    assert markdown_of(md(client, key, "alpha", "memory")).entry_ids == ["thrice", "once"]


@pytest.mark.django_db
def test_ranking_is_stable_across_requests_for_tied_scores(client, demo, key):
    add_memory(demo, {f"tie-{i}": "alpha same words" for i in range(10)})

    first = markdown_of(md(client, key, "alpha", "memory", limit=16)).entry_ids
    second = markdown_of(md(client, key, "alpha words", "memory", limit=16)).entry_ids

    assert len(first) == 10
    assert first == second


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["zebra quokka", "？！。", "...", "不相关的问题"])
def test_query_matching_nothing_gives_the_empty_response(client, demo, key, query):
    add_memory(demo, {"entry-1": "alpha memory"})
    add_experience(demo, "e", "alpha lesson")
    add_topic(demo, "t", title="alpha topic", summary="alpha summary")

    assert ok_json(md(client, key, query, "memory", "experience", "topic_memory")) == EMPTY_RESPONSE
    assert ok_json(prepare(client, key, {"query": query})) == EMPTY_RESPONSE
    assert ok_json(prepare(client, key, {"query": query, "assembly": {}})) == EMPTY_RESPONSE


@pytest.mark.django_db
def test_scope_without_any_items_gives_the_empty_response(client, demo, key):
    assert ok_json(prepare(client, key, {"query": "alpha", "assembly": {}})) == EMPTY_RESPONSE
    assert ok_json(prepare(client, key, {"query": "alpha"})) == EMPTY_RESPONSE


@pytest.mark.django_db
def test_items_of_other_scopes_are_not_recalled(client, demo, key):
    other = make_scope("project:other")
    add_memory(other, {"foreign": "alpha foreign memory"})
    add_experience(other, "foreign", "alpha foreign lesson")

    assert ok_json(prepare(client, key, {"query": "alpha", "assembly": {}})) == EMPTY_RESPONSE


# --- only live heads are recalled ---------------------------------------------------------------


@pytest.mark.django_db
def test_superseded_entry_versions_are_never_recalled(client, demo, key):
    add_memory(demo, {"entry-1": "alpha original wording"})
    update_memory(demo, "entry-1", "beta replacement wording")

    assert ok_json(md(client, key, "alpha original", "memory")) == EMPTY_RESPONSE
    [entry] = markdown_of(md(client, key, "beta", "memory")).entries
    assert (entry.revision, entry.entry_id, entry.version, entry.body) == (
        2,
        "entry-1",
        "entry-1-v2",
        "beta replacement wording",
    )


@pytest.mark.django_db
def test_removed_entries_are_never_recalled(client, demo, key):
    add_memory(demo, {"gone": "alpha removed entry", "kept": "alpha kept entry"})
    remove_memory(demo, "gone")

    doc = markdown_of(md(client, key, "alpha removed", "memory"))

    assert [(e.entry_id, e.revision) for e in doc.entries] == [("kept", 2)]
    assert ok_json(md(client, key, "removed", "memory")) == EMPTY_RESPONSE
    assert "removed" not in str(legacy_of(prepare(client, key, {"query": "alpha removed"})))


@pytest.mark.django_db
def test_entries_removed_and_re_added_cite_the_new_version(client, demo, key):
    add_memory(demo, {"entry-1": "alpha first life"})
    remove_memory(demo, "entry-1")
    add_memory(demo, {"entry-1": "alpha second life"})

    [entry] = markdown_of(md(client, key, "alpha life", "memory")).entries

    assert (entry.revision, entry.version, entry.body) == (3, "entry-1-v2", "alpha second life")


@pytest.mark.django_db
def test_recalled_entry_cites_the_head_revision_of_its_artifact(client, demo, key):
    add_memory(demo, {"entry-1": "alpha stable entry"})
    add_memory(demo, {"entry-2": "beta other entry"})
    remove_memory(demo, "entry-2")

    [entry] = markdown_of(md(client, key, "alpha", "memory")).entries

    assert entry.citation == ("project:demo", "memory", "memory", 3, "entry-1", "entry-1-v1")


@pytest.mark.django_db
def test_every_memory_artifact_of_the_scope_is_searched(client, demo, key):
    add_memory(demo, {"a": "alpha in the default memory"})
    add_memory(demo, {"b": "alpha in the notes memory"}, artifact_id="notes")
    add_memory(demo, {"c": "alpha second notes revision"}, artifact_id="notes")

    doc = markdown_of(md(client, key, "alpha", "memory"))

    assert sorted((e.artifact_id, e.revision, e.entry_id) for e in doc.entries) == [
        ("memory", 1, "a"),
        ("notes", 2, "b"),
        ("notes", 2, "c"),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("family", ["experience", "topic_memory"])
def test_superseded_revisions_are_never_recalled(client, demo, key, family):
    def write(text):
        if family == "experience":
            return add_experience(demo, "item", text)
        return add_topic(demo, "item", title=text, summary="summary")

    write("alpha first revision")
    write("beta second revision")

    assert ok_json(md(client, key, "alpha", family)) == EMPTY_RESPONSE
    [entry] = markdown_of(md(client, key, "beta", family)).entries
    assert (entry.artifact_id, entry.revision) == ("item", 2)


@pytest.mark.django_db
@pytest.mark.parametrize("family, pool", [("memory", 16), ("experience", 8), ("topic_memory", 8)])
def test_each_scope_contributes_at_most_its_candidate_pool(client, demo, key, family, pool):
    for i in range(pool + 4):
        if family == "memory":
            add_memory(demo, {f"n{i:02d}": f"alpha note {i}"})
        elif family == "experience":
            add_experience(demo, f"n{i:02d}", f"alpha lesson {i}")
        else:
            add_topic(demo, f"n{i:02d}", title=f"alpha topic {i}", summary="s")

    doc = markdown_of(md(client, key, "alpha", family, limit=pool, show=["recall_rank"]))

    assert len(doc.entries) == pool
    assert [e.recall_rank for e in doc.entries] == list(range(1, pool + 1))


# --- profile ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_profile_is_the_latest_committed_revision_per_scope_in_scope_order(client, demo):
    second, first = make_scope("alpha:second"), make_scope("zeta:first")
    set_references(demo, first, second)
    add_profile(demo, "demo profile v1")
    add_profile(demo, "demo profile v2")
    add_profile(second, "second profile v1")
    add_profile(first, "first profile v1")
    key = make_key(read=[demo, first, second])

    doc = markdown_of(md(client, key, "alpha", "profile", show=["recall_rank"]))

    assert [(e.scope, e.artifact_id, e.revision, e.body, e.recall_rank) for e in doc.entries] == [
        ("project:demo", "profile", 2, "demo profile v2", 1),
        ("zeta:first", "profile", 1, "first profile v1", 2),
        ("alpha:second", "profile", 1, "second profile v1", 3),
    ]
    assert all(e.section == "Profile" and e.entry_id is None for e in doc.entries)


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["alpha", "unrelated words", "资料"])
def test_profile_does_not_depend_on_the_query(client, demo, key, query):
    add_profile(demo, "Prefers concise answers.")

    [entry] = markdown_of(md(client, key, query, "profile")).entries

    assert entry.body == "Prefers concise answers."


@pytest.mark.django_db
def test_profile_reads_one_profile_snapshot_per_scope(client, demo):
    ref = make_scope("team:platform")
    set_references(demo, ref)
    add_profile(demo, "demo profile")
    add_profile(demo, "another profile-family artifact", artifact_id="travel-notes")
    add_profile(ref, "team profile")
    key = make_key(read=[demo, ref])

    doc = markdown_of(md(client, key, "alpha", "profile", limit=8))

    assert [(e.scope, e.artifact_id, e.body) for e in doc.entries] == [
        ("project:demo", "profile", "demo profile"),
        ("team:platform", "profile", "team profile"),
    ]


@pytest.mark.django_db
def test_profile_limit_counts_scope_snapshots(client, demo):
    ref = make_scope("team:platform")
    set_references(demo, ref)
    add_profile(demo, "demo profile")
    add_profile(ref, "team profile")
    key = make_key(read=[demo, ref])

    doc = markdown_of(md(client, key, "alpha", "profile", limit=1))

    assert [(e.scope, e.body) for e in doc.entries] == [("project:demo", "demo profile")]


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["pending", "rejected"])
def test_uncommitted_profile_candidates_never_appear(client, demo, key, status):
    propose_profile(demo, "uncommitted candidate body", status=status)

    assert ok_json(md(client, key, "alpha", "profile")) == EMPTY_RESPONSE


@pytest.mark.django_db
def test_pending_replacement_leaves_the_committed_head_eligible(client, demo, key):
    first = propose_profile(demo, "committed profile body")
    services.profile_candidate_commit(candidate=first, committed_by="tests")
    propose_profile(demo, "pending replacement body")
    rejected = propose_profile(demo, "rejected replacement body")
    services.profile_candidate_reject(candidate=rejected)

    doc = markdown_of(md(client, key, "alpha", "profile"))

    assert [(e.revision, e.body) for e in doc.entries] == [(1, "committed profile body")]


@pytest.mark.django_db
def test_committing_a_candidate_makes_it_the_recalled_snapshot(client, demo, key):
    add_profile(demo, "old profile")
    candidate = propose_profile(demo, "new profile")
    services.profile_candidate_commit(candidate=candidate, committed_by="tests")

    [entry] = markdown_of(md(client, key, "alpha", "profile")).entries

    assert (entry.revision, entry.body) == (2, "new profile")


@pytest.mark.django_db
def test_scopes_without_a_profile_contribute_nothing(client, demo):
    ref = make_scope("team:platform")
    set_references(demo, ref)
    add_profile(ref, "team profile")
    key = make_key(read=[demo, ref])

    doc = markdown_of(md(client, key, "alpha", "profile"))

    assert [(e.scope, e.number) for e in doc.entries] == [("team:platform", 1)]


@pytest.mark.django_db
def test_profile_is_not_part_of_the_defaults_or_legacy(client, demo, key):
    add_profile(demo, "profile body")
    add_memory(demo, {"entry-1": "alpha memory"})

    defaults = markdown_of(prepare(client, key, {"query": "alpha", "assembly": {}}))
    legacy = legacy_of(prepare(client, key, {"query": "alpha"}))

    assert defaults.sections == ["Memory"]
    assert [item["family"] for item in legacy] == ["memory"]


# --- topic memory projection --------------------------------------------------------------------


@pytest.fixture
def checklist(demo):
    return add_topic(
        demo,
        "release-checklist",
        title="Release checklist",
        summary="Steps before every production release.",
        body="Freeze the branch.\n   Run the database migration script first.   \nTag the release.",
    )


@pytest.mark.django_db
def test_topic_memory_shows_title_summary_and_the_matching_detail_line(client, demo, key, checklist):
    [entry] = markdown_of(md(client, key, "migration", "topic_memory")).entries

    assert entry.section == "Topic Memory"
    assert entry.citation == ("project:demo", "topic_memory", "release-checklist", 1, None, None)
    assert entry.body_lines == [
        ">     Title: Release checklist",
        ">     Summary: Steps before every production release.",
        ">     Match: Run the database migration script first.",
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["checklist", "production"])
def test_topic_memory_has_no_match_line_when_the_detail_did_not_match(client, demo, key, checklist, query):
    [entry] = markdown_of(md(client, key, query, "topic_memory")).entries

    assert entry.body == "Title: Release checklist\nSummary: Steps before every production release."


@pytest.mark.django_db
def test_topic_memory_match_is_the_first_matching_detail_line(client, demo, key, checklist):
    [entry] = markdown_of(md(client, key, "release tag", "topic_memory")).entries

    # The title and summary match "release"; the detail matches only in its third line ("Tag the release.").
    assert entry.body.split("\n")[2] == "Match: Tag the release."


@pytest.mark.django_db
def test_topic_memory_without_detail_has_no_match_line(client, demo, key):
    add_topic(demo, "bare", title="alpha topic", summary="alpha summary")

    [entry] = markdown_of(md(client, key, "alpha", "topic_memory")).entries

    assert entry.body == "Title: alpha topic\nSummary: alpha summary"


@pytest.mark.django_db
def test_topic_memory_projection_is_used_by_legacy_too(client, demo, key, checklist):
    [item] = legacy_of(prepare(client, key, {"query": "migration"}))

    assert item == {
        "family": "topic_memory",
        "scope": "project:demo",
        "artifact": {"id": "release-checklist", "revision": 1},
        "body": "Title: Release checklist\nSummary: Steps before every production release.\n"
        "Match: Run the database migration script first.",
        "truncated": False,
    }
