"""Recall results travel back as return values (issue 50, item 1): no recall source uses a context variable.

Every family recalled the way prepare recalls it (``runtime.families_recall``, the built-in sources' batches), under
the default hybrid recall with the packaged model and under lexical recall, while a profiler records each call of
``ContextVar.set``, ``reset`` and ``get``: a source that handed its results back through a context variable (as the
evidence and the hybrid ranks once did, reading a collector the caller had set) would be caught here. The result
it returns carries the candidates, their evidence and what ranked them, and a prepare ranks by that evidence.
"""

import contextvars
import sys

import pytest

from artifacts.models import PrepareLog
from artifacts.recall import hybrid
from artifacts.recall.sources import RecallResult
from artifacts.recall.vectors.providers import PackagedProvider, configured_provider
from assembly.replay import prepare_replay
from assembly.runtime import families_recall
from tests.api.factories import add_experience, add_memory, add_profile, add_topic, make_key, make_scope, prepare
from vocabulary.families import ASSEMBLED_FAMILIES

pytestmark = pytest.mark.usefixtures("dense_caches_cleared")
QUERY = "green tea in the garden"


@pytest.fixture(params=["hybrid", "lexical"])
def scopes(request, db, settings):
    settings.POWERCONTEXT_RECALL_MODE = request.param
    if request.param == "hybrid":
        settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"}
        assert isinstance(configured_provider(), PackagedProvider)
    hybrid._RANKERS.clear()
    shared = make_scope("team:results")
    current = make_scope("project:results", references=[shared])
    add_memory(current, {"tea": "I prefer green tea over coffee", "bike": "I ride a bicycle to work"})
    add_memory(shared, {"garden": "The garden tomatoes turned red"})
    add_experience(current, "brew", "Green tea brewed at 80 degrees tastes less bitter")
    add_topic(current, "garden", title="Garden", summary="What grows in the garden", body="Tomatoes and tea.")
    add_profile(current, "Likes green tea.")
    yield [current, shared]
    hybrid._RANKERS.clear()


USES = ("set", "reset", "get")
INPUTS_READ = frozenset({"query_cache_owner.get", "powercontext_replica.get"})
"""The context variables recall may read, both inputs set around the call, never results: whose query-vector cache a
query may hit (the runtime), and which database serves the request's reads (the read-replica router, on each
statement)."""


def _context_variables_used(call) -> tuple[object, list[str]]:
    written: list[str] = []

    def profile(frame, event, arg):
        variable = getattr(arg, "__self__", None)
        if (
            event == "c_call"
            and isinstance(variable, contextvars.ContextVar)
            and arg.__name__ in ("set", "reset", "get")
        ):
            written.append(f"{variable.name}.{arg.__name__}")

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return result, written


def test_no_recall_source_writes_or_reads_a_context_variable_for_its_results(scopes):
    result, used = _context_variables_used(lambda: families_recall(ASSEMBLED_FAMILIES, scopes, QUERY))
    assert [name for name in used if name not in INPUTS_READ] == []
    assert isinstance(result, RecallResult)
    assert set(result.candidates) == set(ASSEMBLED_FAMILIES)
    assert result.candidates["memory"][0], "the profiler saw a real recall"


def test_the_profiler_sees_a_context_variable_written():
    # The check above cannot pass by not looking: a write is seen.
    variable: contextvars.ContextVar[int] = contextvars.ContextVar("planted", default=0)
    _, written = _context_variables_used(lambda: variable.reset(variable.set(1)))
    assert written == ["planted.set", "planted.reset"]


def test_the_result_carries_each_candidates_evidence_beside_it(scopes):
    result = families_recall(ASSEMBLED_FAMILIES, scopes, QUERY)
    for family, per_scope in result.candidates.items():
        assert [len(hits) for hits in per_scope] == [len(scores) for scores in result.scores[family]]
        assert [len(hits) for hits in per_scope] == [len(times) for times in result.captured[family]]
    score, captured_at = result.evidence("memory", 0, 0)
    assert score > 0 and captured_at.endswith("Z")
    profile_score, profile_time = result.evidence("profile", 0, 0)
    assert profile_score is None and profile_time.endswith("Z"), "a profile has no recall score, only a time"
    assert len(result.ranked_by) == 1, "the BM25 families are ranked in one call"


def test_a_prepare_under_the_policy_ranks_by_the_returned_evidence(client, scopes):
    key = make_key(read=scopes)
    body = {
        "scope_id": "project:results",
        "query": QUERY,
        "assembly": {"sections": [{"family": "memory", "limit": 5}]},
        "selection": {"policy": "authority-v1", "min_score": 0.0},
    }
    response = prepare(client, key, body)
    assert response.status_code == 200, response.content
    expected = families_recall(["memory"], scopes, QUERY)
    # The decisions are not part of the response: the replayed log shows the scores the policy ranked by.
    replay = prepare_replay(log=PrepareLog.objects.order_by("-id").first())
    assert replay.matches, replay.problems
    scores = {d.citation: d.score for d in replay.result.decisions if d.score is not None}
    assert scores == {
        c.citation: score
        for at in (0, 1)
        for c, score in zip(expected.candidates["memory"][at], expected.scores["memory"][at], strict=True)
    }
    assert {citation.scope_id for citation in scores} == {"project:results", "team:results"}, "both were ranked"
