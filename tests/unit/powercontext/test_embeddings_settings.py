"""Dense recall's settings: a bad value stops start-up with a message naming the variable."""

import os
import subprocess
import sys

import pytest

from artifacts.recall.vectors.providers import PACKAGED_DIMENSION, PACKAGED_DISTRIBUTION
from tests.conftest import PROJECT_ROOT
from tests.unit.powercontext.test_settings import _check

SECRET_KEY = "test-only-not-secret-0123456789abcdefghijklmnopqrstuvwxyz"


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


def test_without_any_setting_recall_is_hybrid_with_the_packaged_model():
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("POWERCONTEXT_RECALL_", "POWERCONTEXT_EMBEDDINGS_"))
    }
    printed = (
        "from django.conf import settings; from artifacts.recall.vectors.providers import configured_provider, "
        "PackagedProvider; p = configured_provider(); "
        "print(settings.POWERCONTEXT_RECALL_MODE, type(p) is PackagedProvider, p.model_id, p.dimension)"
    )
    completed = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", printed],
        cwd=PROJECT_ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "powercontext.settings", "SECRET_KEY": SECRET_KEY},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    mode, packaged, model_id, dimension = completed.stdout.splitlines()[-1].split()
    assert (mode, packaged, dimension) == ("hybrid", "True", str(PACKAGED_DIMENSION))
    assert model_id.startswith(f"{PACKAGED_DISTRIBUTION}==")
