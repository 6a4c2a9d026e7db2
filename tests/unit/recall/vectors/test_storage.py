"""Stored vectors: one per live document and model, of the model's dimension, read back per scope and family."""

import numpy as np
import pytest

from artifacts import services
from artifacts.models import RecallDocument, RecallVector
from artifacts.recall.vectors.ranking import VectorRefused, dense_rank
from artifacts.recall.vectors.selectors import documents_to_embed, recall_vector_lag, vectors_for_pair
from artifacts.recall.vectors.services import recall_vectors_embed_pending, recall_vectors_store
from tests.embedding_server import embed

pytestmark = pytest.mark.django_db


class StubProvider:
    """The test server's deterministic embedder, in the process."""

    def __init__(self, model_id="stub==1", dimension=16):
        self.model_id = model_id
        self.dimension = dimension
        self.batches: list[list[str]] = []

    def embed_passages(self, texts):
        self.batches.append(list(texts))
        return [embed(text, self.dimension) for text in texts]

    def embed_query(self, text):
        return embed(text, self.dimension)


def experience(scope, artifact_id, body):
    services.experience_revision_create(scope=scope, artifact_id=artifact_id, body=body, author="test")
    return RecallDocument.objects.get(artifact__artifact_id=artifact_id, artifact__scope=scope).pk


@pytest.fixture
def scope():
    return services.scope_create(scope_id="project:vectors")


def test_stored_vectors_come_back_per_pair_in_document_order(scope):
    first, second = experience(scope, "a", "first"), experience(scope, "b", "second")

    stored = recall_vectors_store(model_id="m", dimension=3, vectors={second: [0, 2, 0], first: [1, 0, 0]})

    ids, matrix = vectors_for_pair(scope.pk, "experience", "m")
    assert stored == 2
    assert ids.tolist() == [first, second]
    np.testing.assert_allclose(matrix, [[1, 0, 0], [0, 1, 0]], atol=1e-3)
    assert vectors_for_pair(scope.pk, "topic_memory", "m")[0].tolist() == []


def test_a_vector_of_another_dimension_than_its_model_is_refused_and_nothing_is_stored(scope):
    first, second = experience(scope, "a", "first"), experience(scope, "b", "second")

    with pytest.raises(VectorRefused):
        recall_vectors_store(model_id="m", dimension=3, vectors={first: [1, 0, 0], second: [1, 0]})

    assert not RecallVector.objects.exists()


def test_rows_of_another_model_are_ignored_by_readers_and_the_lag(scope):
    first, second = experience(scope, "a", "first"), experience(scope, "b", "second")
    recall_vectors_store(model_id="old", dimension=2, vectors={first: [1, 0], second: [0, 1]})
    recall_vectors_store(model_id="new", dimension=3, vectors={second: [0, 0, 1]})

    ids, matrix = vectors_for_pair(scope.pk, "experience", "new")

    assert ids.tolist() == [second]
    assert matrix.shape == (1, 3)
    assert recall_vector_lag(model_id="new", dimension=3) == 1
    assert recall_vector_lag(model_id="old", dimension=2) == 0


def test_a_document_already_embedded_by_the_model_keeps_its_vector(scope):
    first = experience(scope, "a", "first")
    recall_vectors_store(model_id="m", dimension=2, vectors={first: [1, 0]})

    recall_vectors_store(model_id="m", dimension=2, vectors={first: [0, 1]})

    np.testing.assert_allclose(vectors_for_pair(scope.pk, "experience", "m")[1], [[1, 0]], atol=1e-3)


def test_a_vector_of_another_dimension_by_the_same_model_is_pending_and_replaced(scope):
    first = experience(scope, "a", "first")
    recall_vectors_store(model_id="m", dimension=2, vectors={first: [1, 0]})

    assert recall_vector_lag(model_id="m", dimension=3) == 1
    assert [pk for pk, _ in documents_to_embed(model_id="m", dimension=3, limit=10)] == [first]

    recall_vectors_store(model_id="m", dimension=3, vectors={first: [0, 0, 1]})

    assert recall_vector_lag(model_id="m", dimension=3) == 0
    assert list(RecallVector.objects.values_list("model_id", "dimension")) == [("m", 3)]
    np.testing.assert_allclose(vectors_for_pair(scope.pk, "experience", "m")[1], [[0, 0, 1]], atol=1e-3)


def test_a_document_no_longer_live_takes_its_vectors_with_it(scope):
    first = experience(scope, "a", "first version")
    recall_vectors_store(model_id="m", dimension=2, vectors={first: [1, 0]})

    second = experience(scope, "a", "second version")

    assert recall_vector_lag(model_id="m", dimension=2) == 1
    assert [pk for pk, _ in documents_to_embed(model_id="m", dimension=2, limit=10)] == [second]
    assert not RecallVector.objects.exists()


def test_documents_to_embed_carry_the_text_recall_indexed(scope):
    services.topic_memory_revision_create(
        scope=scope, artifact_id="topic", title="Title", summary="Summary", body="Detail", author="test"
    )
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        writes=[services.EntryVersionWrite(entry_id="fact", version_id=None, body="a remembered fact")],
        author="test",
    )

    assert sorted(text for _, text in documents_to_embed(model_id="m", dimension=2, limit=10)) == [
        "Title\nSummary\nDetail",
        "a remembered fact",
    ]


def test_embedding_pending_documents_stores_every_one_in_batches_and_finds_a_paraphrase(scope):
    bodies = ["I bought a new automobile", "The puppy sleeps all day", "Physician appointment Monday", "Tea"]
    ids = [experience(scope, f"x{i}", body) for i, body in enumerate(bodies)]
    provider = StubProvider()

    result = recall_vectors_embed_pending(provider=provider, batch_size=3)

    assert result.embedded == 4
    assert [len(batch) for batch in provider.batches] == [3, 1]
    assert recall_vector_lag(model_id=provider.model_id, dimension=provider.dimension) == 0
    document_ids, matrix = vectors_for_pair(scope.pk, "experience", provider.model_id)
    assert dense_rank(provider.embed_query("purchased car"), matrix, document_ids, 1)[0][0] == ids[0]


def test_an_embedding_pass_stopped_midway_resumes_with_the_documents_left(scope):
    for i in range(5):
        experience(scope, f"x{i}", f"text number {i}")
    provider = StubProvider()
    batches = []

    first = recall_vectors_embed_pending(
        provider=provider, batch_size=2, progress=batches.append, should_stop=lambda: len(batches) >= 1
    )
    assert (first.embedded, recall_vector_lag(model_id=provider.model_id, dimension=provider.dimension)) == (2, 3)

    second = recall_vectors_embed_pending(provider=provider, batch_size=2)

    assert (second.embedded, recall_vector_lag(model_id=provider.model_id, dimension=provider.dimension)) == (3, 0)
    assert sum(len(batch) for batch in provider.batches) == 5


def test_a_provider_of_another_dimension_than_it_claims_stores_nothing(scope):
    experience(scope, "a", "some text")

    class Lying(StubProvider):
        def embed_passages(self, texts):
            return [embed(text, 8) for text in texts]

    with pytest.raises(VectorRefused):
        recall_vectors_embed_pending(provider=Lying(dimension=16))

    assert not RecallVector.objects.exists()


def test_the_lag_counts_live_documents_without_a_vector_per_scope(scope):
    other = services.scope_create(scope_id="project:other")
    first = experience(scope, "a", "one")
    experience(scope, "b", "two")
    experience(other, "c", "three")
    recall_vectors_store(model_id="m", dimension=2, vectors={first: [1, 0]})

    assert recall_vector_lag(model_id="m", dimension=2) == 2
    assert recall_vector_lag(model_id="m", dimension=2, scope_pk=scope.pk) == 1
    assert recall_vector_lag(model_id="m", dimension=2, scope_pk=other.pk) == 1


def test_a_capped_lag_counts_no_further_than_the_cap(scope):
    first = experience(scope, "a", "one")
    for artifact_id in ("b", "c", "d"):
        experience(scope, artifact_id, "more")
    recall_vectors_store(model_id="m", dimension=2, vectors={first: [1, 0]})

    assert recall_vector_lag(model_id="m", dimension=2, cap=2) == 2
    assert recall_vector_lag(model_id="m", dimension=2, cap=3) == 3
    assert recall_vector_lag(model_id="m", dimension=2, cap=10) == 3
    assert recall_vector_lag(model_id="m", dimension=2, scope_pk=scope.pk, cap=1) == 1


def test_an_empty_text_gets_a_zero_vector_without_asking_the_provider(scope):
    experience(scope, "blank", " \n ")
    provider = StubProvider()

    result = recall_vectors_embed_pending(provider=provider)

    assert (result.embedded, provider.batches) == (1, [])
    assert vectors_for_pair(scope.pk, "experience", provider.model_id)[1].tolist() == [[0.0] * 16]
