"""The LangGraph store as a real client: a compiled LangGraph graph puts, gets and searches through
``PowerContextStore`` against gunicorn serving PowerContext on the run's engine, and every value it put is
readable back through PowerContext's own API as the exact cited entry version, byte for byte. Entries other
writers stored in a shared namespace (plain text, JSON that is not an object) are left out of reads, logged once;
docs/hosts.md's LangGraph example runs as written against a live server.
"""

import asyncio
import logging
import os
import re
import sys
from typing import TypedDict

import pytest

pytest.importorskip("langgraph", reason="LangGraph (pinned in requirements-dev.txt) is not installed")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402
from langgraph_powercontext import PowerContextStore, artifact_id_for, canonical_json  # noqa: E402
from langgraph_powercontext.store import hit_score, stored_value  # noqa: E402
from powercontext_client import Conflict, PowerContextClient  # noqa: E402

from tests import waits  # noqa: E402
from tests.conftest import GOLDEN, GOLDEN_KEY, PROJECT_ROOT  # noqa: E402
from tests.integration.conftest import environment, served  # noqa: E402
from vocabulary.limits import REVISION_ENTRIES_PAGE_DEFAULT  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "project:demo"
NAMESPACE = ("users", "alice")
PREFERENCES = {"tone": "terse", "language": "en", "note": "Grüße"}


class State(TypedDict, total=False):
    preferences: dict
    read: dict
    found: list


def remember(state: State, *, store: BaseStore) -> State:
    store.put(NAMESPACE, "preferences", state["preferences"])
    return {}


def recall(state: State, *, store: BaseStore) -> State:
    item = store.get(NAMESPACE, "preferences")
    found = store.search(NAMESPACE, filter={"tone": "terse"})
    return {"read": item.value, "found": [hit.key for hit in found]}


def graph(store: PowerContextStore):
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


@pytest.fixture
def live(tmp_path):
    """A PowerContext client and the store over it, against gunicorn serving the English golden fixture."""
    with served(tmp_path, GOLDEN / "fixture-en.json") as base, PowerContextClient(base, GOLDEN_KEY) as client:
        yield client, PowerContextStore(client, SCOPE)


def test_a_graph_puts_and_reads_back_through_powercontext_and_the_value_is_an_exact_cited_entry_version(live):
    client, store = live
    final = graph(store).invoke({"preferences": PREFERENCES})
    assert final["read"] == PREFERENCES
    assert final["found"] == ["preferences"]

    item = store.get(NAMESPACE, "preferences")
    citation = item.citation
    assert (citation.scope_id, citation.family, citation.artifact_id) == (SCOPE, "memory", "users.alice")
    exact = client.read_exact_entry_version(
        SCOPE, citation.artifact_id, citation.revision, "preferences", citation.entry_version
    )
    assert exact.entry.body == canonical_json(PREFERENCES) == '{"language":"en","note":"Grüße","tone":"terse"}'


def test_update_and_delete_are_new_revisions_and_the_old_citation_still_reads_the_old_bytes(live):
    client, store = live
    store.put(NAMESPACE, "preferences", PREFERENCES)
    first = store.get(NAMESPACE, "preferences").citation
    store.put(NAMESPACE, "preferences", PREFERENCES | {"tone": "warm"})
    second = store.get(NAMESPACE, "preferences")
    assert second.value["tone"] == "warm"
    assert second.citation.revision == first.revision + 1
    assert store.search(NAMESPACE, filter={"tone": "terse"}) == []

    store.delete(NAMESPACE, "preferences")
    assert store.get(NAMESPACE, "preferences") is None
    history = client.artifact_history(SCOPE, "memory", "users.alice")
    assert [entry.citation.revision for entry in history.revisions] == [
        first.revision + 2,
        first.revision + 1,
        first.revision,
    ]
    old = client.read_exact_entry_version(SCOPE, "users.alice", first.revision, "preferences", first.entry_version)
    assert old.entry.body == canonical_json(PREFERENCES)


def test_a_namespace_never_written_reads_as_empty(live):
    _, store = live
    assert store.get(("nobody",), "preferences") is None
    assert store.search(("nobody",)) == []


def test_what_does_not_map_is_refused_not_faked(live):
    _, store = live
    with pytest.raises(NotImplementedError, match="listing"):
        store.list_namespaces()
    with pytest.raises(NotImplementedError, match="ttl"):
        store.put(NAMESPACE, "preferences", PREFERENCES, ttl=5)


def test_namespaces_map_one_to_one_onto_artifact_ids():
    assert artifact_id_for(("users", "alice")) == "users.alice"
    with pytest.raises(ValueError, match="must not contain"):
        artifact_id_for(("users.alice",))


def test_a_put_racing_another_writer_is_refused_with_a_conflict_not_a_lost_update(live):
    client, store = live
    store.put(NAMESPACE, "preferences", PREFERENCES)

    class Raced(PowerContextStore):
        def head(self, namespace):
            seen = super().head(namespace)
            client.update_memory_entry(SCOPE, "preferences", '{"tone":"other"}', artifact_id="users.alice")
            return seen

    with pytest.raises(Conflict):
        Raced(client, SCOPE).put(NAMESPACE, "preferences", PREFERENCES | {"tone": "warm"})
    assert store.get(NAMESPACE, "preferences").value == {"tone": "other"}


def test_the_async_api_reads_what_it_put(live):
    _, store = live

    async def roundtrip():
        await store.aput(NAMESPACE, "preferences", PREFERENCES)
        return await store.aget(NAMESPACE, "preferences")

    assert asyncio.run(roundtrip()).value == PREFERENCES


def test_search_reads_only_the_artifact_its_prefix_names(live):
    _, store = live
    store.put(NAMESPACE, "preferences", PREFERENCES)
    store.put(("users",), "count", {"n": 1})
    assert [item.key for item in store.search(("users",))] == ["count"]


def test_a_namespace_of_more_entries_than_an_exact_read_page_lists_them_all(live):
    # The API lists a memory revision's entries a page at a time; the store reads every page of the head.
    client, store = live
    namespace = ("users", "many")
    count = REVISION_ENTRIES_PAGE_DEFAULT + 2
    for i in range(count):
        store.put(namespace, f"key-{i:03}", {"n": i})
    head = client.artifact_history(SCOPE, "memory", artifact_id_for(namespace), limit=1).revisions[0]
    assert client.read_exact_revision(
        SCOPE, "memory", artifact_id_for(namespace), head.citation.revision
    ).next_entries_after

    found = store.search(namespace, limit=count + 10)

    assert [hit.key for hit in found] == [f"key-{i:03}" for i in range(count)]
    assert store.get(namespace, f"key-{count - 1:03}").value == {"n": count - 1}


NOTES = {
    "deploys": {"note": "Deploys happen on Tuesdays after the release review."},
    "reviews": {"note": "The release review needs two approvals.", "team": "payments"},
    "lunch": {"note": "Lunch is served at noon on Fridays."},
}
QUERY = "release review deploys"


def test_a_query_search_ranks_the_namespaces_own_values_and_scores_and_cites_each(live, caplog):
    client, store = live
    for key, value in NOTES.items():
        store.put(NAMESPACE, key, value)
    store.put(("users", "bob"), "deploys", {"note": "Deploys happen on Tuesdays after the release review, too."})
    client.create_memory_entry(SCOPE, "plain", "Deploys follow the release review.", artifact_id="users.alice")
    caplog.set_level(logging.WARNING, logger="langgraph_powercontext")

    found = store.search(NAMESPACE, query=QUERY)

    keys = [item.key for item in found]
    assert {"deploys", "reviews"} <= set(keys) <= set(NOTES)  # not bob's, not the plain text
    assert all(item.namespace == NAMESPACE and item.value == NOTES[item.key] for item in found)
    scores = [item.score for item in found]
    assert None not in scores and scores == sorted(scores, reverse=True)  # in recall's order, best first
    for item in found:
        cited = item.citation
        assert (cited.scope_id, cited.artifact_id, cited.entry_id) == (SCOPE, "users.alice", item.key)
        exact = client.read_exact_entry_version(SCOPE, "users.alice", cited.revision, item.key, cited.entry_version)
        assert exact.entry.body == canonical_json(item.value)
        revision = client.read_exact_revision(SCOPE, "memory", "users.alice", cited.revision, entries_limit=1)
        assert item.created_at == item.updated_at == revision.created_at
    assert sum("skipping entry plain (version " in warning for warning in skipped_warnings(caplog)) == 1

    # The hits as the API ranks them, restricted to the namespace's JSON objects: the same keys, in the same order.
    api = client.search_memories(SCOPE, QUERY, families=["memory"], limit=16)
    own = [hit for hit in api.hits if hit.citation.artifact_id == "users.alice" and stored_value(hit.body)]
    assert [hit.citation.entry_id for hit in own] == keys
    assert {hit.scores.ranked_by for hit in own} <= {"bm25", "fused", "learned"} and all(map(hit_score, own))

    assert [item.key for item in store.search(NAMESPACE, query=QUERY, filter={"team": "payments"})] == ["reviews"]
    assert [item.key for item in store.search(NAMESPACE, query=QUERY, limit=1)] == keys[:1]
    assert [item.key for item in store.search(NAMESPACE, query=QUERY, offset=1, limit=1)] == keys[1:2]
    assert [item.key for item in asyncio.run(store.asearch(NAMESPACE, query=QUERY))] == keys
    assert store.search(NAMESPACE, query="What is the boiling point of tungsten?") == []
    assert store.search(("nobody",), query=QUERY) == []


def test_an_empty_or_blank_query_lists_as_a_search_without_one(live):
    _, store = live
    for key, value in NOTES.items():
        store.put(NAMESPACE, key, value)
    listed = [item.key for item in store.search(NAMESPACE)]
    assert listed == sorted(NOTES)
    for query in ("", "   "):
        found = store.search(NAMESPACE, query=query)
        assert [item.key for item in found] == listed and {item.score for item in found} == {None}


def test_a_query_search_sees_only_the_scopes_best_hits(live):
    # The search returns at most 16 memory hits of the scope, whatever artifact they are in: a namespace whose
    # entries are outranked by as many others gets fewer items than it holds (docs/hosts.md says so).
    _, store = live
    for i in range(18):
        store.put(("users", "crowd"), f"note-{i:02}", {"note": f"The release review of week {i} is on Tuesday."})

    crowd = store.search(("users", "crowd"), query="release review week Tuesday", limit=20)

    assert 0 < len(crowd) <= 16 < len(store.search(("users", "crowd"), limit=20)) == 18


def skipped_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "langgraph_powercontext" and "skipping" in r.message]


def test_entries_other_writers_put_in_a_shared_namespace_are_left_out_of_reads_and_logged_once(live, caplog):
    # ("memory",) is the artifact the API's memory writes and MCP `remember` default to: plain text. The golden
    # fixture already holds plain-text entries there; the client adds text and JSON that is not an object.
    client, store = live
    shared = ("memory",)
    fixture_entries = [entry.id for entry in store.head(shared).entries]
    assert fixture_entries
    foreign = {
        "text": "Deploys happen on Tuesdays.",
        "json-list": '["not", "an", "object"]',
        "json-string": '"just a string"',
        "json-number": "42",
        "json-null": "null",
        "broken-json": '{"tone": ',
        "deep-json": "[" * 5_000,  # deeper than json.loads goes: RecursionError
    }
    for entry_id, body in foreign.items():
        client.create_memory_entry(SCOPE, entry_id, body)
    store.put(shared, "preferences", PREFERENCES)
    client.create_memory_entry(SCOPE, "spaced-object", '{ "tone" : "terse" }')  # a JSON object: a value
    caplog.set_level(logging.WARNING, logger="langgraph_powercontext")

    for _ in range(2):
        assert [item.key for item in store.search(shared)] == ["preferences", "spaced-object"]
        assert [item.key for item in store.search(shared, filter={"tone": "terse"})] == [
            "preferences",
            "spaced-object",
        ]
        assert [item.key for item in store.search(shared, offset=1)] == ["spaced-object"]
        assert store.get(shared, "preferences").value == PREFERENCES
        assert store.get(shared, "spaced-object").value == {"tone": "terse"}
        for entry_id in [*foreign, *fixture_entries]:
            assert store.get(shared, entry_id) is None
    assert asyncio.run(store.aget(shared, "text")) is None
    assert [item.key for item in asyncio.run(store.asearch(shared))] == ["preferences", "spaced-object"]
    with pytest.raises(NotImplementedError, match="listing"):
        store.list_namespaces()

    warnings = skipped_warnings(caplog)
    assert len(warnings) == len(foreign) + len(fixture_entries)  # once each, however often it was read
    for entry_id in [*foreign, *fixture_entries]:
        assert sum(f"skipping entry {entry_id} (version " in warning for warning in warnings) == 1
    assert not any(foreign["text"] in warning for warning in warnings)  # never the body

    # A later version of a left-out entry is logged again; a put of its key replaces it, and history keeps the text.
    client.update_memory_entry(SCOPE, "text", "Deploys happen on Wednesdays.")
    assert store.get(shared, "text") is None
    assert len(skipped_warnings(caplog)) == len(warnings) + 1
    store.put(shared, "text", {"day": "Wednesday"})
    replaced = store.get(shared, "text")
    assert replaced.value == {"day": "Wednesday"}
    history = client.artifact_history(SCOPE, "memory", "memory", limit=3).revisions
    older = client.read_exact_memory_revision(SCOPE, "memory", history[1].citation.revision)
    assert {entry.id: entry.body for entry in older.entries}["text"] == "Deploys happen on Wednesdays."


def test_only_a_json_object_is_a_stored_value():
    assert stored_value('{"tone":"terse"}') == {"tone": "terse"}
    assert stored_value('{ "tone" : "terse" }') == {"tone": "terse"}
    for body in ("plain text", "[1, 2]", '"text"', "42", "null", "true", "", '{"a": ', "[" * 100_000):
        assert stored_value(body) is None


HOSTS = PROJECT_ROOT / "docs" / "hosts.md"
DEMO_KEY = "pc_demo_0123456789abcdef0123456789abcdef"
DOCS_ADDRESS = "http://127.0.0.1:8000"


def hosts_md_blocks(language: str) -> list[str]:
    section = HOSTS.read_text(encoding="utf-8").split("## LangGraph (a `BaseStore`)", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def test_the_install_line_in_hosts_md_installs_the_client_the_adapter_and_langgraph():
    (install,) = hosts_md_blocks("sh")
    (pinned,) = [
        line
        for line in (PROJECT_ROOT / "requirements-dev.txt").read_text().splitlines()
        if line.startswith("langgraph==")
    ]
    assert install.split("#")[0].split() == [
        ".venv/bin/python",
        "-m",
        "pip",
        "install",
        "-e",
        "./client",
        "-e",
        "./integrations/langgraph_powercontext",
        pinned,  # the version the project tests
    ]


def test_the_example_in_hosts_md_runs_as_written_against_a_live_server(tmp_path):
    (example,) = hosts_md_blocks("python")
    assert DOCS_ADDRESS in example
    sources = [PROJECT_ROOT / "client" / "src", PROJECT_ROOT / "integrations" / "langgraph_powercontext" / "src"]
    with served(tmp_path, PROJECT_ROOT / "demo" / "demo.json") as base:
        done = waits.run(
            [sys.executable, "-c", example.replace(DOCS_ADDRESS, base)],
            env=environment(tmp_path, PYTHONPATH=os.pathsep.join(map(str, sources))),
            capture_output=True,
            text=True,
            timeout=waits.SUBPROCESS_SECONDS,
        )
        assert done.returncode == 0, done.stderr
        with PowerContextClient(base, DEMO_KEY) as client:
            (first,) = client.read_exact_memory_revision("project:demo", "users.alice", 1).entries
            memory = client.artifact_history("project:demo", "memory", "memory", limit=1).revisions[0].citation
            plain = client.read_exact_memory_revision("project:demo", "memory", memory.revision).entries
    assert done.stdout.splitlines() == [
        "{'user': 'alice', 'tone': 'terse'}",
        "{'tone': 'terse'}",
        f"project:demo users.alice 1 preferences {first.version}",
        '{"tone":"terse"}',
        "[]",
    ]
    assert plain and done.stderr.count("skipping entry ") == len(plain)  # one warning per plain-text demo entry
    assert DEMO_KEY not in done.stdout + done.stderr
