"""Dense recall's query side against the real embeddings test server (tests/embedding_server.py)."""

import pytest
from django.test import override_settings

from artifacts import services
from artifacts.models import RecallDocument
from artifacts.recall.vectors.services import recall_vectors_store
from tests.conftest import hybrid_endpoint_settings
from tests.embedding_server import DIMENSION, embed

MODEL = "stub-embedder"
MODEL_ID = f"endpoint:{MODEL}"


@pytest.fixture
def endpoint(settings, embedding_server):
    hybrid_endpoint_settings(settings, embedding_server)
    return embedding_server


@pytest.fixture(autouse=True)
def fresh_process_state(dense_caches_cleared):
    return


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
