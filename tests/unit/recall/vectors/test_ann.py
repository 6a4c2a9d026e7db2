"""The dense (HNSW) index of large scopes: built from the database, merged exactly with the vectors written since its
build, and never in a ranking's way when damaged (truncated, deleted, written over, built for another model, too far
behind): every such ranking is the exact scan's."""

import os
import shutil
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from artifacts import services
from artifacts.models import RecallDocument
from artifacts.recall.vectors import resident
from artifacts.recall.vectors.ann import store
from artifacts.recall.vectors.query import dense_ranked
from infrastructure import metrics
from tests.embedding_server import DIMENSION
from tests.unit.recall.vectors.conftest import MODEL_ID, write

pytestmark = pytest.mark.django_db
FAMILY = "experience"
LIMIT = 5
TOPICS = ["car", "dog", "doctor", "garden", "piano", "river", "mountain", "coffee", "train", "winter"]
QUERIES = ["purchased car", "a sleepy puppy", "see the physician", "music lessons", "snow in december"]


@pytest.fixture
def indexed(settings, endpoint, scope, tmp_path):
    """A scope of 40 experiences with vectors, the index on (every pair large enough) and built."""
    settings.POWERCONTEXT_SEARCH_INDEX_DIR = str(tmp_path / "index")
    settings.POWERCONTEXT_DENSE_INDEX_MIN_VECTORS = 1
    for number in range(40):
        topic = TOPICS[number % len(TOPICS)]
        write(scope, f"e{number}", f"note {number} about the {topic} and the {TOPICS[(number * 3) % len(TOPICS)]}")
    built = build()
    assert "rebuilt, 40 added, 0 removed, 40 indexed" in built
    yield scope
    store.views_forget()


def build(*options) -> str:
    store.views_forget()  # each test's index directory is new: no view of another test's files
    out, err = StringIO(), StringIO()
    call_command("recall_vector_index_build", *options, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def ranked(scope, text, settings, *, index: bool = True):
    """The ranking of ``text`` in the scope, through the index or (``index=False``) by the exact scan."""
    directory = settings.POWERCONTEXT_SEARCH_INDEX_DIR
    if not index:
        settings.POWERCONTEXT_SEARCH_INDEX_DIR = ""
    try:
        resident.MATRICES.clear()
        result = dense_ranked(scope_pks_by_family={FAMILY: [scope.pk]}, query=text, limits={FAMILY: LIMIT})
    finally:
        settings.POWERCONTEXT_SEARCH_INDEX_DIR = directory
    assert result.outcome == "answered"
    return result.ranked[FAMILY][scope.pk]


def answers() -> float:
    return metrics.RECALL_DENSE_INDEX_ANSWERS._value.get()


def fallbacks(reason: str) -> float:
    return metrics.RECALL_DENSE_INDEX_FALLBACKS.labels(reason=reason)._value.get()


def index_file(scope):
    directory = store.index_directory(scope.pk, FAMILY, MODEL_ID, DIMENSION)
    return directory / store.meta_read(directory).file


def assert_exact_by_scan(scope, settings, reason):
    """Every query ranked as the exact scan ranks it, each a fallback for ``reason``, none answered by the index."""
    before, fell = answers(), fallbacks(reason)
    for query in QUERIES:
        assert ranked(scope, query, settings) == ranked(scope, query, settings, index=False) != []
    assert (answers() - before, fallbacks(reason) - fell) == (0, len(QUERIES))


def test_the_index_answers_as_the_exact_scan(indexed, settings):
    before = answers()

    for query in QUERIES:
        assert ranked(indexed, query, settings) == ranked(indexed, query, settings, index=False)
    assert answers() - before == len(QUERIES)


def test_vectors_written_since_the_build_are_merged_once_and_removed_ones_never_come_back(indexed, settings):
    replaced = ranked(indexed, "purchased car", settings)[0][0]
    new = write(indexed, "late-car", "I bought a new automobile, a car")
    artifact_id = RecallDocument.objects.get(pk=replaced).artifact.artifact_id
    write(indexed, artifact_id, "a rewritten note about the winter")  # a new revision: its old document removed

    for query in [*QUERIES, "bought an automobile"]:
        rows = ranked(indexed, query, settings)
        assert rows == ranked(indexed, query, settings, index=False)
        assert len({document for document, _ in rows}) == len(rows) == LIMIT
    assert new.pk in [document for document, _ in ranked(indexed, "bought an automobile", settings)]
    assert replaced not in [document for document, _ in ranked(indexed, "purchased car", settings)]
    # The next update takes them in, and the rankings stay the same.
    assert "updated, 2 added, 1 removed, 41 indexed" in build()
    for query in QUERIES:
        assert ranked(indexed, query, settings) == ranked(indexed, query, settings, index=False)


def test_a_truncated_index_is_answered_by_the_exact_scan_and_rebuilt_by_the_command(indexed, settings):
    path = index_file(indexed)
    os.chmod(path, 0o644)
    with open(path, "r+b") as file:
        file.truncate(path.stat().st_size // 2)

    assert_exact_by_scan(indexed, settings, "corrupt")
    assert "rebuilt, 40 added" in build()
    assert ranked(indexed, "purchased car", settings) == ranked(indexed, "purchased car", settings, index=False)


def test_an_index_written_over_with_other_bytes_of_its_size_is_not_read(indexed, settings):
    path = index_file(indexed)
    os.chmod(path, 0o644)
    size = path.stat().st_size
    with open(path, "r+b") as file:
        file.seek(size // 3)
        file.write(os.urandom(size // 3))

    assert_exact_by_scan(indexed, settings, "corrupt")


def test_a_deleted_index_is_answered_by_the_exact_scan(indexed, settings):
    os.unlink(index_file(indexed))

    assert_exact_by_scan(indexed, settings, "missing")


def test_a_deleted_index_directory_is_answered_by_the_exact_scan(indexed, settings):
    shutil.rmtree(store.index_directory(indexed.pk, FAMILY, MODEL_ID, DIMENSION))

    assert_exact_by_scan(indexed, settings, "missing")
    assert "rebuilt, 40 added" in build()


def test_an_index_of_another_model_in_its_place_is_not_used(indexed, settings):
    directory = store.index_directory(indexed.pk, FAMILY, MODEL_ID, DIMENSION)
    meta = store.meta_read(directory)
    os.chmod(directory / store.META_FILE, 0o644)
    store.meta_write(directory, store.IndexMeta(**{**meta.__dict__, "model_id": "endpoint:another-model"}))

    assert_exact_by_scan(indexed, settings, "mismatch")
    assert "rebuilt, 40 added" in build()


def test_damaged_metadata_is_answered_by_the_exact_scan(indexed, settings):
    meta_file = store.index_directory(indexed.pk, FAMILY, MODEL_ID, DIMENSION) / store.META_FILE
    os.chmod(meta_file, 0o644)
    meta_file.write_text('{"format": 1, "watermark": "x"')

    assert_exact_by_scan(indexed, settings, "corrupt")


def test_an_index_too_far_behind_is_not_used(indexed, settings):
    settings.POWERCONTEXT_SEARCH_INDEX_MAX_LAG = 1
    write(indexed, "late-1", "a late note about the river")
    write(indexed, "late-2", "another late note about the piano")

    assert_exact_by_scan(indexed, settings, "stale")


def test_a_scope_below_the_threshold_is_scanned_without_a_fallback(indexed, settings):
    settings.POWERCONTEXT_DENSE_INDEX_MIN_VECTORS = 1_000
    before, missing = answers(), fallbacks("missing")

    assert ranked(indexed, "purchased car", settings) == ranked(indexed, "purchased car", settings, index=False)
    assert (answers(), fallbacks("missing")) == (before, missing)
    assert "nothing to index" in build()


def test_the_build_leaves_no_index_file_writable(indexed):
    directory = store.index_directory(indexed.pk, FAMILY, MODEL_ID, DIMENSION)

    assert [entry.name for entry in directory.iterdir() if entry.stat().st_mode & 0o222] == []


def test_the_command_refuses_what_it_cannot_build(settings, endpoint, scope, tmp_path):
    settings.POWERCONTEXT_SEARCH_INDEX_DIR = ""
    with pytest.raises(CommandError, match="POWERCONTEXT_SEARCH_INDEX_DIR is not set"):
        build()
    settings.POWERCONTEXT_SEARCH_INDEX_DIR = str(tmp_path)
    with pytest.raises(CommandError, match="--threads must be 1 or more"):
        build("--threads", "0")
    with pytest.raises(CommandError, match="unknown scope"):
        build("--scope", "project:nowhere")


def test_an_index_whose_candidates_were_mostly_removed_asks_deeper_then_gives_way(indexed, settings, monkeypatch):
    from artifacts.recall.vectors.ann import query as ann_query

    monkeypatch.setattr(ann_query, "CANDIDATES", 1)
    monkeypatch.setattr(ann_query, "DEPTH", 1)
    for number in range(36):  # a new revision each: the indexed documents removed, new ones in the tail
        write(indexed, f"e{number}", f"rewritten note {number} about the {TOPICS[number % len(TOPICS)]}")
    exact = ranked(indexed, "purchased car", settings, index=False)
    before, stale = answers(), fallbacks("stale")

    assert ranked(indexed, "purchased car", settings) == exact != []
    assert (answers() - before, fallbacks("stale") - stale) == (1, 0)
    monkeypatch.setattr(ann_query, "DEEPER", 0)
    assert ranked(indexed, "purchased car", settings) == exact
    assert (answers() - before, fallbacks("stale") - stale) == (1, 1)


def test_an_update_with_nothing_new_keeps_the_file_and_moves_the_watermark(indexed, settings, endpoint):
    other = services.scope_create(scope_id="project:other")
    before = ranked(indexed, "purchased car", settings)
    file = index_file(indexed)
    write(other, "elsewhere", "a note in another scope")  # vector ids move on, none of this pair's
    mapped = store.view(indexed.pk, FAMILY, MODEL_ID, DIMENSION).index
    out = StringIO()
    call_command("recall_vector_index_build", stdout=out, stderr=StringIO())

    assert "updated, 0 added, 0 removed, 40 indexed" in out.getvalue()
    assert index_file(indexed) == file
    assert store.view(indexed.pk, FAMILY, MODEL_ID, DIMENSION).index is mapped  # not read nor mapped again
    directory = store.index_directory(indexed.pk, FAMILY, MODEL_ID, DIMENSION)
    assert store.meta_read(directory).watermark > 40
    assert ranked(indexed, "purchased car", settings) == before
    late = write(indexed, "late", "I bought a new automobile, a car")
    assert late.pk in [document for document, _ in ranked(indexed, "bought an automobile", settings)]
    assert ranked(indexed, "purchased car", settings) == ranked(indexed, "purchased car", settings, index=False)


def test_a_small_index_is_searched_with_the_smaller_expansion_and_a_million_with_the_full_one(indexed):
    directory = store.index_directory(indexed.pk, FAMILY, MODEL_ID, DIMENSION)
    meta, path = store.verified(directory, indexed.pk, FAMILY, MODEL_ID, DIMENSION)

    assert store.restored(path, meta, mapped=True).expansion_search == store.EXPANSION_SEARCH_MIN == 512
    sizes = (100_000, 250_000, 500_000, 1_000_000, 5_000_000)
    assert [store.expansion_search(size) for size in sizes] == [512, 512, 1024, 2048, 2048]
