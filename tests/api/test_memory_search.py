"""POST /v1/memory/search: prepare's recall as ranked hits (citations, bodies, scores), authorized like prepare
before anything is read, bounded like the pools, answering `empty` where recall abstains."""

import json

import pytest

from tests.api.factories import add_experience, add_memory, auth, make_key, make_scope, markdown_of, prepare

SEARCH_URL = "/v1/memory/search"
MEMORIES = {
    "deploy": "Deploys happen on Tuesdays after the release review.",
    "review": "The release review needs two approvals from the payments team.",
    "lunch": "Lunch is served at noon on Fridays.",
    "oncall": "The on-call engineer owns every production release during their week.",
}


def search(client, key, **body):
    payload = {"scope_id": "project:search", "query": "release review"} | body
    return client.post(SEARCH_URL, data=json.dumps(payload), content_type="application/json", **auth(key))


@pytest.fixture
def scopes(db):
    team = make_scope("team:search")
    add_memory(team, {"team-release": "Every release is announced in the team channel."})
    current = make_scope("project:search", references=[team])
    add_memory(current, MEMORIES)
    add_experience(current, "exp-release", "Review the release before the deploy.")
    return current, team


def _entries(hits, scope_id):
    return [h["citation"].get("entry_id") for h in hits if h["citation"]["scope_id"] == scope_id]


def test_hits_are_prepares_pool_in_its_order_with_exact_citations_and_bm25_scores(client, scopes):
    current, team = scopes
    key = make_key(read=[current, team])

    response = search(client, key, families=["memory"], limit=16)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready" and body["recall"] == {"mode": "lexical", "ranker": None, "abstained": {}}
    hits = body["hits"]
    assembly = {"sections": [{"family": "memory", "limit": 16}]}
    prepared = markdown_of(prepare(client, key, scope_id="project:search", query="release review", assembly=assembly))
    pool = [e.entry_id for e in prepared.entries if e.scope == "project:search"]
    assert _entries(hits, "project:search") == pool  # the same ranking as prepare's pool
    assert [h["citation"]["scope_id"] for h in hits][-1] == "team:search"  # references after the current scope
    first = hits[0]
    assert first["rank"] == 1 and first["family"] == "memory"
    assert first["body"] == MEMORIES[first["citation"]["entry_id"]]
    assert first["citation"]["revision"] == 1 and first["citation"]["entry_version"]
    assert first["scores"]["ranked_by"] == "bm25" and first["scores"]["lexical"] > 0
    scores = [h["scores"]["lexical"] for h in hits if h["citation"]["scope_id"] == "project:search"]
    assert scores == sorted(scores, reverse=True)


def test_families_are_listed_in_the_order_asked(client, scopes):
    key = make_key(read=list(scopes))

    hits = search(client, key, families=["experience", "memory"]).json()["hits"]

    assert [h["family"] for h in hits][0] == "experience" and hits[0]["citation"]["artifact_id"] == "exp-release"
    assert "entry_id" not in hits[0]["citation"]


def test_unknown_and_unreadable_scopes_look_the_same(client, scopes):
    other = make_scope("project:elsewhere")
    key = make_key(read=[other])

    unreadable, unknown = search(client, key), search(client, key, scope_id="project:nowhere")

    assert unreadable.status_code == unknown.status_code == 404
    assert unreadable.json() == unknown.json()


def test_an_unreadable_reference_fails_the_whole_search(client, scopes):
    current, _ = scopes
    response = search(client, make_key(read=[current]))

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert "team:search" not in response.content.decode()


def test_a_search_without_a_key_is_refused(client, scopes):
    assert search(client, None).status_code == 401


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"limit": 17}, "limit"),
        ({"limit": 9}, "limit"),  # experience's pool is 8
        ({"limit": 0}, "limit"),
        ({"limit": "3"}, "limit"),
        ({"families": ["profile"]}, "families[0]"),
        ({"families": []}, "families"),
        ({"families": ["memory", "memory"]}, "families"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 8193}, "query"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_input_is_refused_with_its_path(client, scopes, body, path):
    response = search(client, make_key(read=list(scopes)), **body)

    assert response.status_code == 422, response.content
    assert path in [field["path"] for field in response.json()["error"]["fields"]]


def test_a_body_that_is_not_an_object_is_refused_in_the_error_shape(client, scopes):
    key = make_key(read=list(scopes))
    response = client.post(SEARCH_URL, data="[]", content_type="application/json", **auth(key))

    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"


@pytest.fixture
def default_recall(db, settings):
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"}
    scope = make_scope("project:search")
    add_memory(scope, MEMORIES)
    return make_key(read=[scope])


@pytest.mark.usefixtures("dense_caches_cleared")
def test_under_hybrid_recall_a_question_about_nothing_held_is_answered_empty(client, default_recall):
    body = search(client, default_recall, query="What is the boiling point of tungsten?").json()

    assert body == {
        "status": "empty",
        "recall": {"mode": "hybrid", "ranker": "learned", "abstained": {"memory": ["project:search"]}},
        "hits": [],
    }


@pytest.mark.usefixtures("dense_caches_cleared")
def test_under_hybrid_recall_hits_carry_their_ranks_cosine_and_score(client, default_recall):
    body = search(client, default_recall, query="When do deploys happen after the release review?").json()

    first = body["hits"][0]
    assert body["recall"]["mode"] == "hybrid" and first["citation"]["entry_id"] == "deploy"
    scores = first["scores"]
    assert scores["ranked_by"] == "learned" and 0 < scores["score"] <= 1
    assert scores["lexical_rank"] == 1 and -1 <= scores["cosine"] <= 1 and scores["dense_rank"] >= 1
