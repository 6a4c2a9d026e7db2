"""Dense recall's settings: a bad value stops start-up with a message naming the variable."""

import pytest

from tests.unit.powercontext.test_settings import _check


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("POWERCONTEXT_RECALL_MODE", "semantic"),
        ("POWERCONTEXT_EMBEDDINGS_PROVIDER", "openai"),
        ("POWERCONTEXT_EMBEDDINGS_TIMEOUT", "0"),
        ("POWERCONTEXT_EMBEDDINGS_TIMEOUT", "soon"),
        ("POWERCONTEXT_EMBEDDINGS_DIMENSION", "-1"),
        ("POWERCONTEXT_RECALL_FUSION", "{not json"),
        ("POWERCONTEXT_RECALL_FUSION", '["multilingual-e5-small"]'),
        ("POWERCONTEXT_RECALL_FUSION", '{"multilingual-e5-small": {"method": "borda"}}'),
        ("POWERCONTEXT_RECALL_FUSION", '{"multilingual-e5-small": {"dense_weight": 0}}'),
    ],
)
def test_an_invalid_embeddings_setting_stops_start_up_naming_the_variable(variable, value):
    completed = _check(**{variable: value})

    assert completed.returncode != 0
    assert variable in completed.stderr


def test_the_documented_endpoint_settings_start():
    completed = _check(
        POWERCONTEXT_RECALL_MODE="hybrid",
        POWERCONTEXT_EMBEDDINGS_PROVIDER="endpoint",
        POWERCONTEXT_EMBEDDINGS_URL="http://127.0.0.1:8080/v1",
        POWERCONTEXT_EMBEDDINGS_MODEL="multilingual-e5-small",
        POWERCONTEXT_EMBEDDINGS_DIMENSION="384",
        POWERCONTEXT_EMBEDDINGS_TIMEOUT="2.5",
    )

    assert completed.returncode == 0, completed.stderr


def test_a_bad_fusion_setting_says_what_is_wrong():
    completed = _check(POWERCONTEXT_RECALL_FUSION='{"multilingual-e5-small": {"dense": 0.6}}')

    assert completed.returncode != 0
    assert "POWERCONTEXT_RECALL_FUSION: 'multilingual-e5-small': unknown parameter 'dense'" in completed.stderr


def test_the_documented_fusion_setting_starts():
    completed = _check(
        POWERCONTEXT_RECALL_FUSION='{"bge-m3": {"method": "minmax", "dense_weight": 0.6, "lexical_weight": 0.4, '
        '"min_lexical_share": 0}}'
    )

    assert completed.returncode == 0, completed.stderr
