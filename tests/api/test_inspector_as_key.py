"""The prepare inspector run as a chosen API key, with each candidate's recall score and rank in its scope."""

import html
import json
import re

import pytest

from artifacts import services
from tests.api.factories import add_memory, add_profile, make_key_object, make_scope, prepare

pytestmark = pytest.mark.django_db
INSPECT_URL = "/admin/powercontext/inspect/"


@pytest.fixture
def world():
    team = make_scope("team:platform")
    demo = make_scope("project:demo", references=[team])
    other = make_scope("project:other")
    add_memory(demo, {"m1": "alpha alpha release", "m2": "alpha deploy", "m3": "unrelated"})
    add_memory(team, {"t1": "alpha team"})
    add_profile(demo, "prefers short answers")
    return {"demo": demo, "team": team, "other": other}


def _inspect(client, scope, *, api_key=None, assembly=None):
    params = {"scope": scope.scope_id, "query": "alpha", "max_bytes": "8000", "assembly": json.dumps(assembly or {})}
    if api_key is not None:
        params["api_key"] = api_key.pk
    response = client.get(INSPECT_URL, params)
    assert response.status_code == 200
    return response.content.decode()


def _failure(page: str) -> str:
    match = re.search(r'<p class="errornote" id="inspect-failure">(.*?)</p>', page, re.S)
    return html.unescape(match.group(1)) if match else ""


def _content(page: str) -> str | None:
    match = re.search(r'<pre class="powercontext-content" id="prepared-content">(.*?)</pre>', page, re.S)
    return None if match is None else html.unescape(match.group(1))


def test_run_as_a_key_that_may_read_everything_gives_the_api_content(staff_client, client, world):
    api_key, key = make_key_object(read=[world["demo"], world["team"]])
    page = _inspect(staff_client, world["demo"], api_key=api_key)
    assert 'id="run-as">API key' in page
    assert _content(page) == prepare(client, key, query="alpha", max_bytes=8000, assembly={}).json()["content"]


def test_run_as_a_key_that_may_not_read_a_reference_shows_the_api_403(staff_client, world):
    api_key, _ = make_key_object(read=[world["demo"]])
    page = _inspect(staff_client, world["demo"], api_key=api_key)
    assert _failure(page).startswith("The API would answer 403 forbidden")
    assert _content(page) is None


def test_run_as_a_key_that_may_not_read_the_scope_shows_the_api_404(staff_client, world):
    api_key, _ = make_key_object(read=[world["other"]])
    page = _inspect(staff_client, world["demo"], api_key=api_key)
    assert _failure(page).startswith("The API would answer 404 not_found")


def test_run_as_a_revoked_key_shows_the_api_401(staff_client, world):
    api_key, _ = make_key_object(read=[world["demo"], world["team"]])
    services.api_key_revoke(api_key=api_key)
    page = _inspect(staff_client, world["demo"], api_key=api_key)
    assert _failure(page) == "The API would answer 401 unauthenticated: this key is revoked."


def test_each_candidate_shows_its_recall_score_and_rank_within_its_scope(staff_client, world):
    sections = {"sections": [{"family": "memory", "limit": 6}, {"family": "profile", "limit": 1}]}
    page = _inspect(staff_client, world["demo"], assembly=sections)
    rows = re.findall(
        r'data-family="(\w+)".*?<code class="identity scope">(.*?)</code>.*?<td class="score">(.*?)</td>\s*'
        r'<td class="scope-rank">(.*?)</td>',
        page,
        re.S,
    )
    memory = [(html.unescape(scope), score, rank) for family, scope, score, rank in rows if family == "memory"]
    demo_rows = [row for row in memory if row[0] == '"project:demo"']
    assert [rank for _, _, rank in demo_rows] == ["1", "2"]
    scores = [float(score) for _, score, _ in demo_rows]
    assert scores[0] > scores[1] > 0  # "alpha alpha release" outranks "alpha deploy"
    assert [rank for scope, _, rank in memory if scope == '"team:platform"'] == ["1"]
    profile = [(score, rank) for family, _, score, rank in rows if family == "profile"]
    assert profile == [("—", "1")]  # a profile is recalled without a score
