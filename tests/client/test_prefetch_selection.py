"""Prefetch cache identity with a server-side ``selection``: text prepared under one selection (or none) is
never served for another, and keys without selection keep their identity and digest."""

import hashlib
import json

import pytest
from powercontext_client import OMITTED, PrepareSettings, SelectionOptions, prefetch_key
from pydantic import ValidationError

SCOPE = "project:demo"
QUERY = "How do we release the API?"
TURN = ("session-1", 1)
POLICY = {"policy": "authority-v1"}


def key(selection=OMITTED, assembly=None):
    return prefetch_key(
        scope_id=SCOPE, turn=TURN, query=QUERY, assembly={} if assembly is None else assembly, selection=selection
    )


def test_each_distinct_selection_has_a_distinct_key_and_digest():
    selections = [
        OMITTED,
        POLICY,
        POLICY | {"min_score": 0.2},
        POLICY | {"min_score": 0.3},
        POLICY | {"max_tokens": 600},
        POLICY | {"min_score": 0.2, "max_tokens": 600},
    ]
    keys = [key(selection) for selection in selections]
    assert len(set(keys)) == len(keys)
    assert len({k.fingerprint() for k in keys}) == len(keys)


def test_equal_selections_share_a_key():
    assert key(POLICY | {"min_score": 0}) == key(POLICY | {"min_score": 0.0})
    assert key(SelectionOptions(policy="authority-v1", max_tokens=5)) == key(POLICY | {"max_tokens": 5})
    assert key(POLICY | {"min_score": 1}).fingerprint() == key(POLICY | {"min_score": 1.0}).fingerprint()


def test_a_key_without_selection_keeps_its_digest():
    document = {"scope_id": SCOPE, "turn": repr(TURN), "query": QUERY, "assembly": key().assembly.as_json()}
    document["max_bytes"] = 8000
    canonical = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert key().fingerprint() == hashlib.sha256(canonical.encode()).hexdigest()
    assert key().selection is None


@pytest.mark.parametrize("selection", [{}, {"policy": "other"}, POLICY | {"max_tokens": 0}, POLICY | {"top_k": 1}])
def test_an_invalid_selection_has_no_key(selection):
    with pytest.raises(ValidationError):
        key(selection)


def test_none_is_never_a_selection():
    with pytest.raises(TypeError):
        key(None)
    with pytest.raises(TypeError):
        PrepareSettings(assembly={}, selection=None)


def test_prepare_settings_carry_the_selection_into_the_key():
    settings = PrepareSettings(assembly={}, selection=POLICY | {"max_tokens": 600})
    assert settings.selection == SelectionOptions(policy="authority-v1", max_tokens=600)
    assert settings.key(scope_id=SCOPE, turn=TURN, query=QUERY) == key(POLICY | {"max_tokens": 600})


def test_prepare_settings_refuse_a_selection_without_assembly():
    with pytest.raises(ValueError, match="only allowed together with assembly"):
        PrepareSettings(selection=POLICY)
