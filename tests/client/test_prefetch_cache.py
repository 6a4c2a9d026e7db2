"""Prefetch cache identity: scope, turn, query, normalized effective assembly (or legacy) and max_bytes."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from powercontext_client import (
    LEGACY,
    OMITTED,
    AssemblyOptions,
    PrefetchCache,
    PrepareSettings,
    TurnSettings,
    normalize_assembly,
    prefetch_key,
)
from pydantic import ValidationError

from tests import waits

SCOPE = "project:demo"
QUERY = "After an HTTP API change, how should we investigate a client-contract mismatch?"
TURN = ("session-1", 1)


def key(assembly=OMITTED, max_bytes=OMITTED, *, turn=TURN, query=QUERY, scope_id=SCOPE):
    return prefetch_key(scope_id=scope_id, turn=turn, query=query, assembly=assembly, max_bytes=max_bytes)


# --- normalization: equal effective configurations share a key ----------------------------------------


EXPLICIT_DEFAULTS = {
    "format": "markdown",
    "sections": [{"family": "memory", "limit": 6}, {"family": "experience", "limit": 2}],
    "show": [],
}


@pytest.mark.parametrize(
    "equivalent",
    [
        EXPLICIT_DEFAULTS,
        {"format": "markdown"},
        {"show": []},
        {"sections": [{"family": "memory", "limit": 6}, {"family": "experience", "limit": 2}]},
        AssemblyOptions(),
    ],
)
def test_empty_assembly_equals_its_explicit_defaults(equivalent):
    assert key({}) == key(equivalent)
    assert key({}).fingerprint() == key(equivalent).fingerprint()


def test_show_order_is_irrelevant():
    assert key({"show": ["confidence", "recall_rank"]}) == key({"show": ["recall_rank", "confidence"]})


def test_omitted_max_bytes_equals_8000():
    assert key({}, OMITTED) == key({}, 8000)
    assert key(OMITTED, OMITTED) == key(OMITTED, 8000)


def test_legacy_has_its_own_identity():
    assert normalize_assembly(OMITTED) is LEGACY
    assert key(OMITTED) != key({})
    assert key(OMITTED) != key(EXPLICIT_DEFAULTS)
    assert key(OMITTED) != key({"sections": []})
    assert key(OMITTED).fingerprint() != key({}).fingerprint()


# --- isolation within one turn: different configurations never share an entry ------------------------


DISTINCT = {
    "legacy": (OMITTED, OMITTED),
    "defaults": ({}, OMITTED),
    "no families": ({"sections": []}, OMITTED),
    "memory only": ({"sections": [{"family": "memory", "limit": 6}]}, OMITTED),
    "experience first": (
        {"sections": [{"family": "experience", "limit": 2}, {"family": "memory", "limit": 6}]},
        OMITTED,
    ),
    "memory limit 5": ({"sections": [{"family": "memory", "limit": 5}, {"family": "experience", "limit": 2}]}, OMITTED),
    "experience limit 1": (
        {"sections": [{"family": "memory", "limit": 6}, {"family": "experience", "limit": 1}]},
        OMITTED,
    ),
    "plus topic memory": (
        {
            "sections": [
                {"family": "memory", "limit": 6},
                {"family": "experience", "limit": 2},
                {"family": "topic_memory", "limit": 2},
            ]
        },
        OMITTED,
    ),
    "profile": ({"sections": [{"family": "profile", "limit": 1}]}, OMITTED),
    "show confidence": ({"show": ["confidence"]}, OMITTED),
    "show both": ({"show": ["confidence", "recall_rank"]}, OMITTED),
    "defaults 4096 bytes": ({}, 4096),
    "defaults 512 bytes": ({}, 512),
    "legacy 4096 bytes": (OMITTED, 4096),
}


def test_every_distinct_configuration_has_a_distinct_key():
    keys = {name: key(assembly, max_bytes) for name, (assembly, max_bytes) in DISTINCT.items()}
    assert len(set(keys.values())) == len(keys)
    assert len({k.fingerprint() for k in keys.values()}) == len(keys)


def test_one_turn_cache_never_serves_text_of_another_configuration():
    cache = PrefetchCache()
    for name, (assembly, max_bytes) in DISTINCT.items():
        cache.put(key(assembly, max_bytes), f"text prepared under {name}")
    assert len(cache) == len(DISTINCT)
    calls = []
    for name, (assembly, max_bytes) in DISTINCT.items():
        result = cache.resolve(key(assembly, max_bytes), lambda: calls.append(1) or "fresh")
        assert result == f"text prepared under {name}"
    assert calls == []


def test_scope_turn_and_query_are_part_of_the_key():
    base = key({})
    assert key({}, scope_id="team:platform") != base
    assert key({}, turn=("session-1", 2)) != base
    assert key({}, turn=("session-2", 1)) != base
    assert key({}, query=QUERY + " ") != base


def test_invalid_configurations_have_no_key():
    with pytest.raises(TypeError):
        key(None)
    with pytest.raises(ValidationError):
        key({"sections": [{"family": "memory", "limit": 99}]})
    with pytest.raises(ValueError):
        key({}, 100)
    with pytest.raises(TypeError):
        key({}, None)


# --- producer and consumer ------------------------------------------------------------------------------


def test_consumer_waits_for_the_producer_of_the_same_key():
    cache = PrefetchCache()
    started, release = threading.Event(), threading.Event()
    calls = []

    def produce():
        calls.append("producer")
        started.set()
        waits.wait_event(release, what="the consumer's release of the producer", timeout=5)
        return "prepared"

    with ThreadPoolExecutor(1) as executor:
        cache.submit(key({}), produce, executor)
        waits.wait_event(started, what="the producer's start", timeout=5)
        threading.Timer(0.05, release.set).start()
        assert cache.resolve(key({}), lambda: calls.append("consumer") or "other", timeout=5) == "prepared"
    assert calls == ["producer"]


def test_consumer_of_another_key_prepares_its_own():
    cache = PrefetchCache()
    with ThreadPoolExecutor(1) as executor:
        cache.submit(key({}), lambda: "defaults text", executor).result(5)
    assert cache.resolve(key({"sections": [{"family": "memory", "limit": 6}]}), lambda: "memory text") == "memory text"
    assert cache.resolve(key({}, 4096), lambda: "smaller text") == "smaller text"
    assert cache.resolve(key(OMITTED), lambda: "legacy text") == "legacy text"
    assert cache.resolve(key({}), lambda: "never") == "defaults text"


def test_a_failure_is_remembered_for_its_key_and_not_retried():
    cache = PrefetchCache()
    calls = []

    def failing():
        calls.append(1)
        raise ConnectionError("down")

    for _ in range(2):
        with pytest.raises(ConnectionError):
            cache.resolve(key({}), failing)
    assert calls == [1]


def test_starting_a_turn_forgets_other_turns():
    cache = PrefetchCache()
    cache.put(key({}, turn=("s", 1)), "one")
    cache.put(key({}, turn=("s", 2)), "two")
    cache.retain_turn(("s", 2))
    assert cache.keys() == [key({}, turn=("s", 2))]


def test_cache_is_bounded():
    cache = PrefetchCache(max_entries=3)
    for limit in range(1, 6):
        cache.put(key({"sections": [{"family": "memory", "limit": limit}]}), limit)
    assert len(cache) == 3
    assert key({"sections": [{"family": "memory", "limit": 1}]}) not in cache


# --- frozen turn configuration ----------------------------------------------------------------------------


def test_frozen_configuration_holds_for_the_whole_turn():
    settings = TurnSettings(PrepareSettings(assembly={}), freeze_per_turn=True)
    settings.start_turn(("s", 1))
    settings.update(PrepareSettings(assembly={"sections": [{"family": "memory", "limit": 8}]}, max_bytes=4096))
    during = settings.for_turn(("s", 1))
    assert during == PrepareSettings(assembly={})
    assert during.key(scope_id=SCOPE, turn=("s", 1), query=QUERY) == key({}, turn=("s", 1))
    settings.start_turn(("s", 2))
    after = settings.for_turn(("s", 2))
    assert after.key(scope_id=SCOPE, turn=("s", 2), query=QUERY) == key(
        {"sections": [{"family": "memory", "limit": 8}]}, 4096, turn=("s", 2)
    )


def test_unfrozen_configuration_changes_at_once_and_changes_the_key():
    settings = TurnSettings(PrepareSettings(), freeze_per_turn=False)
    settings.start_turn(("s", 1))
    before = settings.for_turn(("s", 1)).key(scope_id=SCOPE, turn=("s", 1), query=QUERY)
    settings.update(PrepareSettings(assembly={}))
    after = settings.for_turn(("s", 1)).key(scope_id=SCOPE, turn=("s", 1), query=QUERY)
    assert before.assembly is LEGACY
    assert after != before
    cache = PrefetchCache()
    cache.put(before, "legacy text")
    assert cache.resolve(after, lambda: "markdown text") == "markdown text"


def test_prepare_settings_refuse_null_assembly():
    with pytest.raises(TypeError):
        PrepareSettings(assembly=None)
    assert PrepareSettings().assembly is OMITTED
