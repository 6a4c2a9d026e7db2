"""A prepare's query embedded for dense recall: once per text (cached), within the query timeout, or not at all
(the outcome says why, the prepare ranks lexically)."""

import socket
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts.recall.vectors import query
from artifacts.recall.vectors.query import dense_ranked, query_cache_owner, query_vector
from infrastructure import metrics
from tests.conftest import hybrid_endpoint_settings
from tests.embedding_server import requests_received, running_server
from tests.unit.recall.vectors.conftest import MODEL_ID, write

pytestmark = pytest.mark.django_db

SLOW_SERVER_SECONDS = 5.0
QUERY_TIMEOUT = 0.3


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fallbacks(reason):
    return metrics.RECALL_DENSE_FALLBACKS.labels(reason=reason)._value.get()


def ranked(scope, text, limit=5):
    family = "experience"
    return dense_ranked(scope_pks_by_family={family: [scope.pk]}, query=text, limits={family: limit})


def test_the_same_query_text_is_embedded_once(endpoint):
    before = len(requests_received(endpoint))

    first = query_vector("purchased car")
    second = query_vector("purchased car")
    query_vector("the puppy")

    assert first is not None and (first == second).all()
    assert [request["input"] for request in requests_received(endpoint)[before:]] == [["purchased car"], ["the puppy"]]


def test_the_cache_keeps_only_the_last_queries_of_its_size(settings, endpoint):
    hybrid_endpoint_settings(settings, endpoint, query_cache=1)
    before = len(requests_received(endpoint))

    for text in ("one", "two", "one"):
        query_vector(text)

    assert len(requests_received(endpoint)) - before == 3


def embedded_by(endpoint, owner, texts) -> int:
    """How many of ``texts`` the endpoint was asked to embed, queried in turn as ``owner``'s."""
    before = len(requests_received(endpoint))
    with query_cache_owner(owner):
        for text in texts:
            assert query_vector(text) is not None
    return len(requests_received(endpoint)) - before


def test_each_caller_hits_only_its_own_cached_queries(endpoint):
    assert embedded_by(endpoint, 1, ["purchased car"]) == 1
    assert embedded_by(endpoint, 2, ["purchased car"]) == 1  # another key's query: embedded again
    assert embedded_by(endpoint, None, ["purchased car"]) == 1  # nor the operator's tools' (no key)
    assert embedded_by(endpoint, 1, ["purchased car"]) == embedded_by(endpoint, 2, ["purchased car"]) == 0


def test_a_key_alone_uses_the_whole_cache_and_gives_way_down_to_an_equal_share(settings, endpoint):
    hybrid_endpoint_settings(settings, endpoint, query_cache=8)
    mine = [f"mine {i}" for i in range(8)]
    assert embedded_by(endpoint, 1, mine) == 8
    assert embedded_by(endpoint, 1, mine) == 0  # all eight kept

    assert embedded_by(endpoint, 2, [f"flood {i}" for i in range(40)]) == 40
    # The flooding key pushed out key 1's oldest only down to half the cache, then its own.
    assert embedded_by(endpoint, 1, mine[4:]) == 0
    assert embedded_by(endpoint, 1, mine[:4]) == 4


def test_a_slow_server_times_out_within_the_query_timeout_and_is_counted(settings, scope):
    with running_server("--delay", str(SLOW_SERVER_SECONDS)) as base_url:
        hybrid_endpoint_settings(settings, base_url, query_timeout=QUERY_TIMEOUT)
        before = fallbacks("timeout")

        started = time.monotonic()
        result = ranked(scope, "purchased car")
        waited = time.monotonic() - started

    assert (result.outcome, result.ranked) == ("timeout", {})
    assert result.model_id == MODEL_ID
    assert fallbacks("timeout") == before + 1
    assert waited < SLOW_SERVER_SECONDS / 2  # the query timeout, not the server's delay nor the provider's timeout


def test_a_server_down_is_unavailable_and_counted(settings, scope):
    hybrid_endpoint_settings(settings, f"http://127.0.0.1:{closed_port()}/v1")
    before = fallbacks("unavailable")

    result = ranked(scope, "purchased car")

    assert (result.outcome, result.ranked) == ("unavailable", {})
    assert fallbacks("unavailable") == before + 1


def test_no_provider_is_off_and_counted(settings, scope):
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "off"}
    before = fallbacks("off")

    result = ranked(scope, "purchased car")

    assert (result.outcome, result.model_id, result.ranked) == ("off", None, {})
    assert fallbacks("off") == before + 1


def test_lexical_mode_embeds_nothing_and_runs_no_statement(settings, endpoint, scope):
    write(scope, "car", "I bought a new automobile")
    settings.POWERCONTEXT_RECALL_MODE = "lexical"
    before = len(requests_received(endpoint))

    with CaptureQueriesContext(connection) as statements:
        result = ranked(scope, "purchased car")

    assert (result.outcome, result.model_id, result.ranked) == ("lexical-mode", None, {})
    assert len(statements) == 0
    assert len(requests_received(endpoint)) == before


def test_a_query_is_embedded_from_its_first_characters_only(endpoint):
    before = len(requests_received(endpoint))

    query_vector("car " * 10_000)

    (sent,) = requests_received(endpoint)[before:]
    assert len(sent["input"][0]) == query.QUERY_CHARS


def test_the_packaged_model_embeds_a_query_in_the_calling_thread_once_per_text(settings, monkeypatch):
    import threading

    from artifacts.recall.vectors.providers import PACKAGED_DIMENSION, PackagedProvider

    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"}
    threads = []
    embed_query = PackagedProvider.embed_query

    def spied(self, text):
        threads.append(threading.current_thread())
        return embed_query(self, text)

    monkeypatch.setattr(PackagedProvider, "embed_query", spied)

    first = query_vector("where did I park the car")
    second = query_vector("where did I park the car")

    assert first is not None and first.shape == (PACKAGED_DIMENSION,)
    assert (first == second).all()
    assert threads == [threading.current_thread()]
