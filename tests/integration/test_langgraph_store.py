"""The LangGraph store as a real client: a compiled LangGraph graph puts, gets and searches through
``PowerContextStore`` against gunicorn serving PowerContext on the run's engine, and every value it put is
readable back through PowerContext's own API as the exact cited entry version, byte for byte.
"""

import asyncio
from typing import TypedDict

import pytest

pytest.importorskip("langgraph", reason="LangGraph (pinned in requirements-dev.txt) is not installed")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402
from langgraph_powercontext import PowerContextStore, artifact_id_for, canonical_json  # noqa: E402
from powercontext_client import Conflict, PowerContextClient  # noqa: E402

from tests.conftest import GOLDEN, GOLDEN_KEY  # noqa: E402
from tests.integration.conftest import served  # noqa: E402
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
    with pytest.raises(NotImplementedError, match="prepare_context"):
        store.search(NAMESPACE, query="tone")
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
