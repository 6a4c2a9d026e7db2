"""Dense recall's query side against the real embeddings test server (tests/embedding_server.py)."""

import pytest
from django.test import override_settings

from artifacts import services
from artifacts.models import RecallDocument
from artifacts.recall.vectors import query, resident
from artifacts.recall.vectors.services import recall_vectors_store
from tests.embedding_server import DIMENSION, embed, running_server

MODEL = "stub-embedder"
MODEL_ID = f"endpoint:{MODEL}"


@pytest.fixture(scope="module")
def server():
    with running_server() as base_url:
        yield base_url


def use_endpoint(settings, base_url, **options):
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    settings.POWERCONTEXT_EMBEDDINGS = {
        **settings.POWERCONTEXT_EMBEDDINGS,
        "provider": "endpoint",
        "url": base_url,
        "model": MODEL,
        "dimension": DIMENSION,
        "query_timeout": 10.0,  # generous: a busy test machine is not a slow server
        **options,
    }


@pytest.fixture
def endpoint(settings, server):
    use_endpoint(settings, server)
    return server


@pytest.fixture(autouse=True)
def fresh_process_state():
    query.QUERY_CACHE.clear()
    resident.MATRICES.clear()
    yield
    query.QUERY_CACHE.clear()
    resident.MATRICES.clear()


@pytest.fixture
def scope(db):
    return services.scope_create(scope_id="project:dense")


def write_without_vector(scope, artifact_id, body):
    """An experience written as in lexical recall (a write in hybrid recall would embed it): its document alone."""
    with override_settings(POWERCONTEXT_RECALL_MODE="lexical"):
        services.experience_revision_create(scope=scope, artifact_id=artifact_id, body=body, author="test")
    return RecallDocument.objects.get(artifact__artifact_id=artifact_id, artifact__scope=scope)


def write(scope, artifact_id, body, *, model_id=MODEL_ID, vector_text=None):
    """An experience and its vector by ``model_id`` (the test server's embedding of ``vector_text`` or the body),
    stored as a write stores them: the document first (which renews the pair's generation), then its vector."""
    document = write_without_vector(scope, artifact_id, body)
    vector = embed(vector_text if vector_text is not None else body)
    recall_vectors_store(model_id=model_id, dimension=DIMENSION, vectors={document.pk: vector})
    return document
