"""Under a selection policy a referenced scope's topic memory is rejected ``scope_mismatch`` (issue 51, item 7e).

Topic memory is read from the current scope only (``vocabulary.families.CURRENT_SCOPE_ONLY_FAMILIES``), even when
the scope references others: for that family the prepare reads one scope. A custom recall source that hands back a
referenced scope's topic memory anyway (the scope gate is defense in depth against such a source) must see it
rejected by the gate, never packed, although the same prepare reads that scope for memory and packs its memory
entries. Through ``POST /v1/context/prepare``; the decisions are read back from the prepare log's exact replay.
"""

import pytest

from artifacts import selectors
from artifacts.models import PrepareLog
from artifacts.recall import sources
from assembly.replay import prepare_replay
from tests.api.factories import add_memory, add_topic, make_key, make_scope, markdown_of, prepare

pytestmark = pytest.mark.django_db

QUERY = "release checklist"
SECTIONS = {"sections": [{"family": "topic_memory", "limit": 5}, {"family": "memory", "limit": 5}]}
POLICY = {"policy": "authority-v1"}


def recall_topics_with_a_referenced_scopes_topic(*, scopes, query):
    """A faulty custom source: the built-in topic recall (the current scope), plus the referenced scope's topic."""
    recalled = sources.recall_topic_memory(scopes=scopes, query=query)
    referenced = selectors.scope_get(scope_id="team:shared")
    foreign = sources.recall_topic_memory(scopes=[referenced], query=query)[0]
    assert foreign, "the referenced scope's topic memory is recalled"
    recalled[0] = recalled[0] + foreign
    return recalled


@pytest.fixture
def key(settings):
    settings.POWERCONTEXT_RECALL_SOURCES = {
        **settings.POWERCONTEXT_RECALL_SOURCES,
        "topic_memory": f"{__name__}.recall_topics_with_a_referenced_scopes_topic",
    }
    shared = make_scope("team:shared")
    project = make_scope("project:topics", references=[shared])
    add_topic(project, "own", title="Release checklist", summary="The project's release checklist", body="Tag it.")
    add_topic(shared, "theirs", title="Release checklist", summary="The team's release checklist", body="Ask first.")
    add_memory(project, {"own-note": "release checklist of the project"})
    add_memory(shared, {"shared-note": "release checklist of the team"})
    return make_key(read=[project, shared])


def of_family(document, family: str) -> list:
    return [entry for entry in document.entries if entry.family == family]


def _decisions() -> dict:
    replay = prepare_replay(log=PrepareLog.objects.order_by("-id").first())
    assert replay.matches, replay.problems
    return {
        (d.citation.scope_id, d.citation.family, d.citation.artifact_id, d.citation.entry_id): d.reason or d.outcome
        for d in replay.result.decisions
    }


def test_a_referenced_scopes_topic_memory_is_rejected_as_scope_mismatch(client, key):
    body = {"scope_id": "project:topics", "query": QUERY, "assembly": SECTIONS, "selection": POLICY}
    response = prepare(client, key, body)

    document = markdown_of(response)
    assert [(e.scope, e.family, e.artifact_id) for e in of_family(document, "topic_memory")] == [
        ("project:topics", "topic_memory", "own")
    ]
    assert {(e.scope, e.entry_id) for e in of_family(document, "memory")} == {
        ("project:topics", "own-note"),
        ("team:shared", "shared-note"),
    }, "the reference is read for memory: the gate is the family's"
    assert _decisions() == {
        ("project:topics", "topic_memory", "own", None): "included",
        ("team:shared", "topic_memory", "theirs", None): "scope_mismatch",
        ("project:topics", "memory", "memory", "own-note"): "included",
        ("team:shared", "memory", "memory", "shared-note"): "included",
    }
