"""The Python client against a live PowerContext server: prepare, exact reads, writes and error mapping."""

import pytest
from powercontext_client import (
    Conflict,
    InvalidRequest,
    NotFound,
    PowerContextClient,
    Unauthenticated,
    validate_prepared_context,
)

from tests.conftest import GOLDEN_KEY, golden_json

SCOPE = "project:demo"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(powercontext_url):
    with PowerContextClient(powercontext_url, GOLDEN_KEY) as client:
        yield client


@pytest.mark.parametrize("case", ["guide-en", "defaults-en", "memory-only-en", "sections-empty-en", "legacy-en"])
def test_prepare_returns_the_golden_response(client, case):
    request = golden_json(f"{case}.request.json")
    kwargs = {key: request[key] for key in ("max_bytes", "assembly") if key in request}
    result = client.prepare_context(request["scope_id"], request["query"], **kwargs)
    expected = golden_json(f"{case}.response.json")
    assert result.model_dump(by_alias=True) == expected
    assert validate_prepared_context(expected, max_bytes=8000) == result.content


def test_cited_revisions_read_back_exactly(client):
    memory = client.read_exact_revision(SCOPE, "memory", "memory", 3)
    assert [(entry.id, entry.version) for entry in memory.entries] == [("entry-1", "entry-1-v2")]
    entry = client.read_exact_entry_version(SCOPE, "memory", 3, "entry-1", "entry-1-v2")
    assert entry.entry.body == "After changing OpenAPI, regenerate the client and run contract tests."
    experience = client.read_exact_revision(SCOPE, "experience", "experience-1", 1)
    assert experience.body.startswith("Situation: The HTTP API contract changed.")
    with pytest.raises(NotFound):
        client.read_exact_entry_version(SCOPE, "memory", 3, "entry-2", "entry-2-v1")  # removed in revision 3


def test_writes_return_citations_that_read_back(client):
    head = client.artifact_history(SCOPE, "memory", "memory").revisions[0].citation.revision
    created = client.create_memory_entry(SCOPE, "entry-client", "Written by the Python client.")
    assert created.citation.revision == head + 1
    assert created.citation.entry_id == "entry-client"
    read = client.read_exact_entry_version(
        SCOPE, "memory", created.citation.revision, "entry-client", created.citation.entry_version
    )
    assert read.entry.body == "Written by the Python client."
    updated = client.update_memory_entry(
        SCOPE, "entry-client", "Updated by the client.", expected_head_revision=created.citation.revision
    )
    assert updated.citation.revision == head + 2
    with pytest.raises(Conflict):
        client.remove_memory_entry(SCOPE, "entry-client", expected_head_revision=created.citation.revision)
    removed = client.remove_memory_entry(SCOPE, "entry-client")
    assert removed.citation.revision == head + 3
    experience = client.record_experience_revision(SCOPE, "experience-client", "Lesson: test the client.")
    assert experience.citation.revision == 1
    topic = client.record_topic_memory_revision(SCOPE, "topic-client", "Client", "How the client works.")
    assert topic.citation.family == "topic_memory"
    candidate = client.propose_profile_candidate(SCOPE, "Prefers exact citations.")
    assert candidate.status == "pending"
    committed = client.commit_profile_candidate(candidate.id)
    assert committed.citation.family == "profile"
    assert client.read_exact_revision(SCOPE, "profile", "profile", committed.citation.revision).body == (
        "Prefers exact citations."
    )
    rejected = client.reject_profile_candidate(client.propose_profile_candidate(SCOPE, "Not this one.").id)
    assert rejected.status == "rejected"


def test_server_side_refusal_maps_to_invalid_request(client):
    # Valid for the client's models, refused by the runtime: the sum of limits is above 32.
    assembly = {
        "sections": [
            {"family": "memory", "limit": 16},
            {"family": "experience", "limit": 8},
            {"family": "profile", "limit": 8},
            {"family": "topic_memory", "limit": 8},
        ]
    }
    with pytest.raises(InvalidRequest) as raised:
        client.prepare_context(SCOPE, "q", assembly=assembly)
    assert raised.value.status_code == 422


def test_unknown_key_and_scope(powercontext_url, client):
    stranger = PowerContextClient(powercontext_url, "pc_unknown_0123456789abcdef0123456789ab")
    with stranger, pytest.raises(Unauthenticated):
        stranger.prepare_context(SCOPE, "q")
    with pytest.raises(NotFound):
        client.prepare_context("project:nowhere", "q")


def test_a_write_retried_with_its_idempotency_key_returns_the_original_citation_and_writes_once(client):
    first = client.create_memory_entry(SCOPE, "entry-idempotent", "Written once.", idempotency_key="retry-1")
    again = client.create_memory_entry(SCOPE, "entry-idempotent", "Written once.", idempotency_key="retry-1")
    assert again == first
    head = client.artifact_history(SCOPE, "memory", "memory", limit=1).revisions[0].citation.revision
    assert head == first.citation.revision
    # Without the key the same request is a second write, refused because the entry exists.
    with pytest.raises(Conflict):
        client.create_memory_entry(SCOPE, "entry-idempotent", "Written once.")
    # The same key for another request is refused rather than replayed.
    with pytest.raises(InvalidRequest) as raised:
        client.remove_memory_entry(SCOPE, "entry-idempotent", idempotency_key="retry-1")
    assert [field.path for field in raised.value.fields] == ["Idempotency-Key"]


def test_list_scopes_names_exactly_the_scopes_the_key_may_read(client):
    page = client.list_scopes()
    assert [(scope.scope_id, scope.title, scope.can_write) for scope in page.scopes] == [
        ("project:demo", "Demo project", True)
    ]
    assert page.scopes[0].references == [] and page.scopes[0].all_references_readable
    assert page.next_after is None


def test_search_returns_ranked_hits_whose_citations_read_back_exactly(client):
    result = client.search_memories(SCOPE, "regenerate the client after changing OpenAPI")

    assert result.status == "ready"
    assert (result.recall.mode, result.recall.ranker, result.recall.abstained) == ("lexical", None, {})
    assert [(hit.family, hit.rank) for hit in result.hits] == [("memory", 1), ("experience", 1)]
    memory, experience = result.hits
    assert memory.citation.model_dump() == {
        "scope_id": SCOPE,
        "family": "memory",
        "artifact_id": "memory",
        "revision": 3,
        "entry_id": "entry-1",
        "entry_version": "entry-1-v2",
    }
    exact = client.read_exact_entry_version(SCOPE, "memory", 3, "entry-1", "entry-1-v2")
    assert memory.body == exact.entry.body
    assert memory.scores.ranked_by == "bm25" and memory.scores.lexical > 0
    assert (memory.scores.score, memory.scores.cosine, memory.scores.lexical_rank) == (None, None, None)
    assert experience.citation.entry_id is None
    assert experience.body == client.read_exact_revision(SCOPE, "experience", "experience-1", 1).body


def test_search_lists_the_families_asked_in_their_order_up_to_the_limit(client):
    client.create_memory_entry(SCOPE, "entry-contract-2", "Contract tests run in CI on every pull request.")
    client.create_memory_entry(SCOPE, "entry-contract-3", "A failing contract test blocks the release.")

    both = client.search_memories(SCOPE, "contract tests", families=["experience", "memory"])
    one = client.search_memories(SCOPE, "contract tests", families=["memory"], limit=2)
    many = client.search_memories(SCOPE, "contract tests", families=["memory"], limit=16)

    assert [hit.family for hit in both.hits] == ["experience", "memory", "memory", "memory"]
    assert [hit.rank for hit in one.hits] == [1, 2]
    assert [hit.citation.entry_id for hit in one.hits] == [hit.citation.entry_id for hit in many.hits][:2]
    assert len(many.hits) == 3
    scores = [hit.scores.lexical for hit in many.hits]
    assert scores == sorted(scores, reverse=True)


def test_a_search_matching_nothing_is_empty(client):
    result = client.search_memories(SCOPE, "tungsten boiling point")
    assert (result.status, result.hits, result.recall.abstained) == ("empty", [], {})


def test_search_errors_are_the_apis(powercontext_url, client):
    with pytest.raises(NotFound):
        client.search_memories("project:nowhere", "q")
    stranger = PowerContextClient(powercontext_url, "pc_unknown_0123456789abcdef0123456789ab")
    with stranger, pytest.raises(Unauthenticated):
        stranger.search_memories(SCOPE, "q")
    with pytest.raises(InvalidRequest) as refused:
        client.search_memories(SCOPE, "q", limit=12)  # refused before it is sent: experience's pool is 8
    assert [field.path for field in refused.value.fields] == ["limit"]


@pytest.fixture
def hybrid(settings, dense_caches_cleared):
    """The server's default recall (hybrid, the packaged model), with a query deadline a busy machine never reaches."""
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    settings.POWERCONTEXT_EMBEDDINGS = {
        **settings.POWERCONTEXT_EMBEDDINGS,
        "provider": "packaged",
        "query_timeout": 30.0,
    }


@pytest.mark.usefixtures("hybrid")
def test_under_hybrid_recall_hits_carry_the_rankers_score_and_a_question_about_nothing_is_empty(client):
    client.create_memory_entry(SCOPE, "deploy-day", "Deploys happen on Tuesdays after the release review.")
    client.create_memory_entry(SCOPE, "lunch", "Lunch is served at noon on Fridays.")

    found = client.search_memories(SCOPE, "When do deploys happen?", families=["memory"])
    nothing = client.search_memories(SCOPE, "What is the boiling point of tungsten?", families=["memory"])

    assert (found.status, found.recall.mode, found.recall.ranker) == ("ready", "hybrid", "learned")
    first = found.hits[0]
    assert first.citation.entry_id == "deploy-day" and first.scores.ranked_by == "learned"
    assert 0 < first.scores.score <= 1 and -1 <= first.scores.cosine <= 1 and first.scores.dense_rank >= 1
    assert nothing.status == "empty" and nothing.hits == []
    assert nothing.recall.abstained == {"memory": [SCOPE]}
