"""``search_memories``: the body it sends (``families`` and ``limit`` only when given), what it refuses before
sending (with the server's field paths), and the typed result it returns. Captured with httpx.MockTransport; the
same calls against a live server are in tests/integration/test_client_live.py."""

import json

import httpx
import pytest
from powercontext_client import (
    InvalidRequest,
    InvalidResponse,
    MemorySearchResult,
    NotFound,
    PowerContextClient,
    build_search_request,
)

KEY = "pc_test_0123456789abcdef0123456789abcdef"
CITATION = {
    "scope_id": "project:demo",
    "family": "memory",
    "artifact_id": "memory",
    "revision": 3,
    "entry_id": "entry-1",
    "entry_version": "entry-1-v2",
}
SCORES = {"lexical": 1.5, "lexical_rank": 1, "dense_rank": 2, "cosine": 0.61, "score": 0.83, "ranked_by": "learned"}
HIT = {"family": "memory", "rank": 1, "citation": CITATION, "body": "Run the contract tests.", "scores": SCORES}
READY = {"status": "ready", "recall": {"mode": "hybrid", "ranker": "learned", "abstained": {}}, "hits": [HIT]}
EMPTY = {
    "status": "empty",
    "recall": {"mode": "hybrid", "ranker": "learned", "abstained": {"memory": ["project:demo"]}},
    "hits": [],
}


class Server:
    """Answers every request with ``status`` and ``payload``, keeping what was sent."""

    def __init__(self, payload: dict, status: int = 200) -> None:
        self.payload, self.status = payload, status
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.status, json=self.payload)

    def bodies(self) -> list[dict]:
        return [json.loads(request.content) for request in self.requests]


def client_for(server: Server) -> PowerContextClient:
    return PowerContextClient("http://powercontext.test", KEY, transport=httpx.MockTransport(server))


def test_only_the_given_fields_are_sent_and_the_hits_come_back_typed():
    server = Server(READY)
    with client_for(server) as client:
        result = client.search_memories("project:demo", "contract tests")
        client.search_memories("project:demo", "contract tests", families=("experience",), limit=3)
        client.search_memories("project:demo", "contract tests", families=["memory"], limit=16)

    assert [request.url.path for request in server.requests] == ["/v1/memory/search"] * 3
    assert server.bodies() == [
        {"scope_id": "project:demo", "query": "contract tests"},
        {"scope_id": "project:demo", "query": "contract tests", "families": ["experience"], "limit": 3},
        {"scope_id": "project:demo", "query": "contract tests", "families": ["memory"], "limit": 16},
    ]
    assert isinstance(result, MemorySearchResult)
    (hit,) = result.hits
    assert (result.status, result.recall.mode, result.recall.ranker) == ("ready", "hybrid", "learned")
    assert (hit.family, hit.rank, hit.body) == ("memory", 1, "Run the contract tests.")
    assert hit.citation.model_dump() == CITATION
    assert (hit.scores.score, hit.scores.lexical, hit.scores.ranked_by) == (0.83, 1.5, "learned")


def test_the_body_built_is_the_body_sent():
    assert build_search_request("s", "q", families=["experience", "memory"], limit=2) == {
        "scope_id": "s",
        "query": "q",
        "families": ["experience", "memory"],
        "limit": 2,
    }
    assert build_search_request("s", "q") == {"scope_id": "s", "query": "q"}


def test_an_empty_result_names_the_scopes_recall_abstained_in():
    with client_for(Server(EMPTY)) as client:
        result = client.search_memories("project:demo", "the boiling point of tungsten")
    assert (result.status, result.hits, result.recall.abstained) == ("empty", [], {"memory": ["project:demo"]})


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({"limit": 9}, "limit"),  # the default families include experience, whose pool is 8
        ({"limit": 9, "families": ["experience"]}, "limit"),
        ({"limit": 17, "families": ["memory"]}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": "3"}, "limit"),
        ({"families": ["profile"]}, "families[0]"),
        ({"families": ["memory", "skill"]}, "families[1]"),
        ({"families": []}, "families"),
        ({"families": ["memory", "memory"]}, "families"),
        ({"families": ["memory", "experience", "memory"]}, "families"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 8193}, "query"),
        ({"query": "a\x00b"}, "query"),
        ({"scope_id": ""}, "scope_id"),
        ({"scope_id": "s" * 201}, "scope_id"),
    ],
)
def test_what_the_server_would_refuse_is_refused_with_its_path_and_never_sent(arguments, path):
    server = Server(READY)
    call = {"scope_id": "project:demo", "query": "contract tests"} | arguments
    with client_for(server) as client, pytest.raises(InvalidRequest) as raised:
        client.search_memories(call.pop("scope_id"), call.pop("query"), **call)
    assert raised.value.status_code == 422 and raised.value.code == "invalid_request"
    assert [field.path for field in raised.value.fields] == [path]
    assert server.requests == []


def test_the_problems_are_worded_as_the_server_words_them():
    with pytest.raises(InvalidRequest) as raised:
        build_search_request("s", "q", families=["memory", "memory"])
    assert [(field.path, field.message) for field in raised.value.fields] == [("families", "each family at most once")]
    with pytest.raises(InvalidRequest) as raised:
        build_search_request("s", "q", limit=9)
    assert raised.value.fields[0].message == "at most 8 for experience (its pool)"


def test_sixteen_memory_hits_are_allowed_when_only_memory_is_searched():
    assert build_search_request("s", "q", families=["memory"], limit=16)["limit"] == 16


def test_a_string_for_families_is_a_type_error_not_a_list_of_letters():
    with pytest.raises(TypeError, match="families"):
        build_search_request("s", "q", families="memory")


def test_the_apis_errors_map_as_for_every_call():
    missing = {"error": {"code": "not_found", "message": "scope not found", "fields": []}}
    with client_for(Server(missing, status=404)) as client, pytest.raises(NotFound) as raised:
        client.search_memories("project:nowhere", "q")
    assert raised.value.message == "scope not found"


@pytest.mark.parametrize(
    "payload",
    [
        READY | {"status": "empty"},  # hits under an empty status
        EMPTY | {"status": "ready"},  # ready without a hit
        READY | {"hits": [HIT | {"scores": SCORES | {"ranked_by": "magic"}}]},
        READY | {"hits": [HIT | {"rank": 0}]},
        {key: value for key, value in READY.items() if key != "recall"},
    ],
)
def test_an_answer_that_breaks_the_contract_is_an_invalid_response(payload):
    with client_for(Server(payload)) as client, pytest.raises(InvalidResponse):
        client.search_memories("project:demo", "q")


def test_fields_a_newer_server_adds_are_ignored():
    newer = READY | {"took_ms": 3, "hits": [HIT | {"explanation": "x", "scores": SCORES | {"bm25_rank": 1}}]}
    with client_for(Server(newer)) as client:
        assert client.search_memories("project:demo", "q").hits[0].scores.score == 0.83
