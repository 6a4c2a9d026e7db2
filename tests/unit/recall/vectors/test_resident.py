"""Dense rankings of (family, scope) pairs from this process's copies of their vectors, current by the pairs'
generation."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts.recall.vectors import resident
from artifacts.recall.vectors.query import dense_ranked
from artifacts.recall.vectors.services import recall_vectors_store
from infrastructure import metrics
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


@pytest.mark.parametrize("quantized_from", [0, 1], ids=["float32", "quantized"])
def test_a_write_to_the_pair_is_seen_by_the_next_ranking(settings, endpoint, scope, quantized_from):
    settings.POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM = quantized_from
    write(scope, "dog", "The puppy sleeps all day")
    ranked([scope], "purchased car")
    ranked([scope], "purchased car")  # from the copy
    hits = events("hit")

    car = write(scope, "car", "I bought a new automobile")
    result = ranked([scope], "purchased car")

    assert result.ranked[FAMILY][scope.pk][0][0] == car.pk
    assert events("hit") == hits  # the copy was stale: read again
    (held,) = resident.MATRICES.held.values()
    assert isinstance(held, resident.Quantized if quantized_from else resident.Matrix) and held.ids.size == 2


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


def test_a_pair_of_at_least_the_threshold_is_held_quantized_and_ranks_as_the_exact_copy(settings, endpoint, scope):
    texts = ["I bought a new automobile", "The puppy sleeps all day", "Physician appointment on Monday"]
    documents = [write(scope, f"doc{i}", text) for i, text in enumerate(texts)]
    settings.POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM = 0  # every pair exact
    exact = ranked([scope], "purchased car")
    resident.MATRICES.clear()

    settings.POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM = len(documents)
    quantized = ranked([scope], "purchased car")

    (held,) = resident.MATRICES.held.values()
    assert isinstance(held, resident.Quantized)
    assert quantized == exact
    assert quantized.ranked[FAMILY][scope.pk][0][0] == documents[0].pk


def test_a_pair_below_the_threshold_keeps_the_exact_float32_copy(settings, endpoint, scope):
    settings.POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM = 3
    write(scope, "car", "I bought a new automobile")
    write(scope, "dog", "The puppy sleeps all day")

    ranked([scope], "purchased car")

    (held,) = resident.MATRICES.held.values()
    assert isinstance(held, resident.Matrix) and held.matrix.dtype == "float32"


def test_a_quantized_copy_counts_its_ids_float16_rows_int8_codes_and_scales_against_the_budget(
    settings, endpoint, scope
):
    settings.POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM = 1
    for i in range(3):
        write(scope, f"doc{i}", f"note number {i} about the garden")

    ranked([scope], "garden")

    # per vector: an int64 id, DIMENSION float16 numbers, DIMENSION int8 codes and a float32 scale
    assert resident.MATRICES.size == 3 * (8 + 2 * DIMENSION + DIMENSION + 4)
    settings.POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM = 0
    resident.MATRICES.clear()
    ranked([scope], "garden")
    assert resident.MATRICES.size == 3 * (8 + 4 * DIMENSION)


def test_a_large_quantized_copy_ranks_well_separated_vectors_as_dense_rank_does():
    import numpy as np

    from artifacts.recall.vectors.ranking import dense_rank
    from tests.unit.recall.vectors.test_ranking import separated

    query_vector, half, ids = separated(count=5000)
    order = np.argsort(ids)

    held = resident.Quantized(1, ids[order], half[order])

    expected = dense_rank(query_vector, half.astype(np.float32), ids, 64)
    assert [d for d, _ in held.ranked(query_vector, 64)] == [d for d, _ in expected]


def test_one_prepares_scans_rank_float32_and_quantized_copies_as_each_copy_ranks_alone():
    import numpy as np

    from tests.unit.recall.vectors.test_ranking import separated

    query_vector, half, ids = separated(count=3000)
    order = np.argsort(ids)
    exact = resident.Matrix(1, ids[order], half[order].astype(np.float32))
    quantized = resident.Quantized(1, ids[order], half[order])

    by_pair = resident.ranked_all(
        {("memory", 1): exact, ("experience", 2): quantized}, query_vector, {"memory": 16, "experience": 8}
    )

    assert by_pair == {
        ("memory", 1): exact.ranked(query_vector, 16),
        ("experience", 2): quantized.ranked(query_vector, 8),
    }


def test_a_copy_read_at_another_dimension_of_the_same_model_is_not_served(endpoint, scope):
    car = write(scope, "car", "I bought a new automobile")
    pair = (FAMILY, scope.pk)
    assert resident.current_matrices([pair], model_id=MODEL_ID, dimension=DIMENSION)[pair].ids.tolist() == [car.pk]

    # The same model name configured at another dimension, in this process, the pair unchanged: no vector of it.
    found = resident.current_matrices([pair], model_id=MODEL_ID, dimension=DIMENSION + 1)

    assert found[pair].ids.tolist() == []


@pytest.mark.parametrize("quantized_from", [0, 1], ids=["float32", "quantized"])
def test_wanted_documents_get_their_exact_cosine_beyond_the_ranking_cut_from_the_same_copy(
    settings, endpoint, scope, quantized_from
):
    settings.POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM = quantized_from
    car = write(scope, "car", "I bought a new automobile")
    dog = write(scope, "dog", "The puppy sleeps all day")
    bare = write_without_vector(scope, "bare", "A note without a vector")
    ranked([scope], "purchased car", limit=1)  # the copy is now this process's

    with CaptureQueriesContext(connection) as statements:
        full = ranked([scope], "purchased car", limit=2)
        result = ranked([scope], "purchased car", limit=1, wanted={(FAMILY, scope.pk): [dog.pk, bare.pk, car.pk]})

    assert [document for document, _ in result.ranked[FAMILY][scope.pk]] == [car.pk]
    assert result.similarities[(FAMILY, scope.pk)] == sorted(full.ranked[FAMILY][scope.pk])
    assert len(statements) == 2  # each ranking checks its copy's generation once; the cosines cost no statement
