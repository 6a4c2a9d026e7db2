"""Dense rankings of (family, scope) pairs from this process's copies of their vectors, current by the pairs'
generation."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts.recall.vectors import resident
from artifacts.recall.vectors.query import dense_ranked
from artifacts.recall.vectors.services import recall_vectors_store
from powercontext import metrics
from tests.embedding_server import DIMENSION, embed
from tests.unit.recall.vectors.conftest import MODEL_ID, write, write_without_vector

pytestmark = pytest.mark.django_db
FAMILY = "experience"


def ranked(scopes, text, limit=5, **options):
    return dense_ranked(
        scope_pks_by_family={FAMILY: [scope.pk for scope in scopes]}, query=text, limits={FAMILY: limit}, **options
    )


def events(event):
    return metrics.RECALL_DENSE_RESIDENT.labels(event=event)._value.get()


def test_a_paraphrase_finds_its_document_first(endpoint, scope):
    car = write(scope, "car", "I bought a new automobile")
    write(scope, "dog", "The puppy sleeps all day")
    write(scope, "doctor", "Physician appointment on Monday")

    result = ranked([scope], "purchased car")

    assert (result.outcome, result.model_id) == ("answered", "endpoint:stub-embedder")
    rows = result.ranked[FAMILY][scope.pk]
    assert rows[0][0] == car.pk
    assert [cosine for _, cosine in rows] == sorted((cosine for _, cosine in rows), reverse=True)


def test_vectors_of_another_model_are_ignored(endpoint, scope):
    write(scope, "car", "I bought a new automobile", model_id="another-model==1")
    dog = write(scope, "dog", "The puppy sleeps all day")

    result = ranked([scope], "purchased car")

    assert [document for document, _ in result.ranked[FAMILY][scope.pk]] == [dog.pk]


def test_a_document_without_a_vector_is_absent(endpoint, scope):
    dog = write(scope, "dog", "The puppy sleeps all day")
    write_without_vector(scope, "car", "I bought a new automobile")

    assert [document for document, _ in ranked([scope], "purchased car").ranked[FAMILY][scope.pk]] == [dog.pk]


def test_a_write_to_the_pair_is_seen_by_the_next_ranking(endpoint, scope):
    write(scope, "dog", "The puppy sleeps all day")
    ranked([scope], "purchased car")
    ranked([scope], "purchased car")  # from the copy
    hits = events("hit")

    car = write(scope, "car", "I bought a new automobile")
    result = ranked([scope], "purchased car")

    assert result.ranked[FAMILY][scope.pk][0][0] == car.pk
    assert events("hit") == hits  # the copy was stale: read again


def test_a_current_copy_costs_one_statement_or_none_given_the_generations(endpoint, scope):
    write(scope, "dog", "The puppy sleeps all day")
    ranked([scope], "the dog")
    generations = resident.generations([(FAMILY, scope.pk)])

    with CaptureQueriesContext(connection) as read_generations:
        first = ranked([scope], "the dog")
    with CaptureQueriesContext(connection) as given_generations:
        second = ranked([scope], "the dog", generations=generations)

    assert len(read_generations) == 1 and len(given_generations) == 0
    assert first == second


def test_ties_go_to_the_lower_document_id(endpoint, scope):
    documents = [write(scope, f"same{i}", "The puppy sleeps all day") for i in range(4)]

    rows = ranked([scope], "dog", limit=3).ranked[FAMILY][scope.pk]

    assert [document for document, _ in rows] == sorted(document.pk for document in documents)[:3]
    assert len({cosine for _, cosine in rows}) == 1


def test_each_scope_is_ranked_on_its_own_and_a_scope_without_documents_answers_nothing(endpoint, scope):
    from artifacts import services

    other = services.scope_create(scope_id="project:other")
    empty = services.scope_create(scope_id="project:empty")
    car = write(scope, "car", "I bought a new automobile")
    dog = write(other, "dog", "The puppy sleeps all day")

    result = ranked([scope, other, empty], "purchased car")

    assert result.ranked[FAMILY] == {
        scope.pk: [(car.pk, pytest.approx(result.ranked[FAMILY][scope.pk][0][1]))],
        other.pk: [(dog.pk, pytest.approx(result.ranked[FAMILY][other.pk][0][1]))],
        empty.pk: [],
    }


def test_copies_beyond_the_memory_budget_are_evicted_least_recently_used_first(settings, endpoint, scope):
    from artifacts import services

    other = services.scope_create(scope_id="project:other")
    write(scope, "car", "I bought a new automobile")
    write(other, "dog", "The puppy sleeps all day")
    ranked([scope], "car")
    size = resident.MATRICES.size
    settings.POWERCONTEXT_RESIDENT_VECTORS_MB = (size * 1.5) / (1024 * 1024)  # room for one copy only
    evictions = events("eviction")

    ranked([other], "car")

    assert events("eviction") == evictions + 1
    assert [key[2] for key in resident.MATRICES.held] == [other.pk]


def test_a_large_matrix_ranks_as_dense_rank_does_on_one_blas_thread():
    import numpy as np

    from artifacts.recall.vectors.ranking import dense_rank

    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((5000, 32)).astype(np.float32)
    ids = np.arange(matrix.shape[0], dtype=np.int64) * 3
    query_vector = rng.standard_normal(32)

    held = resident.Matrix(1, ids, matrix)

    assert held.ranked(query_vector, 10) == dense_rank(query_vector, matrix, ids, 10)


def test_vectors_stored_apart_from_a_write_are_seen_by_the_next_ranking(endpoint, scope):
    dog = write(scope, "dog", "The puppy sleeps all day")
    car = write_without_vector(scope, "car", "I bought a new automobile")
    assert [document for document, _ in ranked([scope], "purchased car").ranked[FAMILY][scope.pk]] == [dog.pk]

    recall_vectors_store(model_id=MODEL_ID, dimension=DIMENSION, vectors={car.pk: embed("automobile")})

    assert [document for document, _ in ranked([scope], "purchased car").ranked[FAMILY][scope.pk]][0] == car.pk
