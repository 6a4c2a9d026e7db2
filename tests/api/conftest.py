"""Fixtures shared by the API tests of the search index (tests/api/test_recall_engine*.py)."""

import random

import pytest

from tests.api.factories import add_experience, add_memory, make_scope
from tests.recall_words import words_text


@pytest.fixture
def engine_on(settings, tmp_path):
    """The search index on, in a directory of this test; a low threshold sends small corpora through it."""
    settings.POWERCONTEXT_SEARCH_INDEX_DIR = str(tmp_path / "search")
    settings.POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS = 5
    settings.POWERCONTEXT_SEARCH_INDEX_MAX_LAG = 50
    return settings


def engine_corpus_write(scope_id: str = "project:demo"):
    """A scope of 220 live memory entries (240 written, 20 removed) and 30 experiences."""
    scope = make_scope(scope_id)
    rng = random.Random(5)
    add_memory(scope, {f"m{i}": words_text(rng) for i in range(160)})
    add_memory(scope, {f"m{i}": words_text(rng) for i in range(160, 240)}, removals=[f"m{i}" for i in range(0, 20)])
    for i in range(30):
        add_experience(scope, f"e{i}", words_text(rng))
    return scope


@pytest.fixture
def engine_corpus(db):
    return engine_corpus_write()
