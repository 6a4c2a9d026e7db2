"""``powercontext_recall_vector_lag`` on /metrics: the live documents still without a vector, while recall is hybrid."""

import pytest

from artifacts import services
from artifacts.models import RecallDocument
from artifacts.recall.vectors import lag
from artifacts.recall.vectors.services import recall_vectors_store

pytestmark = pytest.mark.django_db
TOKEN = "metrics-token"
MODEL = "endpoint:stub-embedder"


@pytest.fixture
def hybrid(settings):
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    settings.POWERCONTEXT_EMBEDDINGS = {
        **settings.POWERCONTEXT_EMBEDDINGS,
        "provider": "endpoint",
        "url": "http://127.0.0.1:1/v1",
        "model": "stub-embedder",
        "dimension": 2,
    }


def scrape(client) -> str:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return response.content.decode()


def test_the_lag_counts_documents_without_a_vector_by_the_configured_model(client, hybrid):
    scope = services.scope_create(scope_id="project:lag")
    for artifact_id in ("a", "b", "c"):
        services.experience_revision_create(scope=scope, artifact_id=artifact_id, body="text", author="test")
    first = RecallDocument.objects.order_by("pk").first()
    recall_vectors_store(model_id=MODEL, dimension=2, vectors={first.pk: [1.0, 0.0]})
    recall_vectors_store(model_id="another==1", dimension=2, vectors={first.pk + 1: [1.0, 0.0]})

    assert f'powercontext_recall_vector_lag{{model="{MODEL}"}} 2.0' in scrape(client)


def test_lexical_recall_shows_no_lag(client, hybrid, settings):
    settings.POWERCONTEXT_RECALL_MODE = "lexical"

    assert "powercontext_recall_vector_lag" not in scrape(client)


def test_a_backlog_beyond_the_cap_reads_as_the_cap_and_says_so(client, hybrid, monkeypatch):
    monkeypatch.setattr(lag, "RECALL_VECTOR_LAG_CAP", 2)
    scope = services.scope_create(scope_id="project:lag")
    for artifact_id in ("a", "b", "c"):
        services.experience_revision_create(scope=scope, artifact_id=artifact_id, body="text", author="test")

    body = scrape(client)

    assert f'powercontext_recall_vector_lag{{model="{MODEL}"}} 2.0' in body
    assert f'powercontext_recall_vector_lag_capped{{model="{MODEL}"}} 1.0' in body


def test_a_lag_under_the_cap_is_exact_and_not_capped(client, hybrid):
    scope = services.scope_create(scope_id="project:lag")
    services.experience_revision_create(scope=scope, artifact_id="a", body="text", author="test")

    body = scrape(client)

    assert f'powercontext_recall_vector_lag{{model="{MODEL}"}} 1.0' in body
    assert f'powercontext_recall_vector_lag_capped{{model="{MODEL}"}} 0.0' in body


def test_scrapes_within_the_refresh_interval_reuse_the_count_then_count_again(client, hybrid, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(lag, "_clock", lambda: clock[0])
    scope = services.scope_create(scope_id="project:lag")
    services.experience_revision_create(scope=scope, artifact_id="a", body="text", author="test")
    assert f'powercontext_recall_vector_lag{{model="{MODEL}"}} 1.0' in scrape(client)

    services.experience_revision_create(scope=scope, artifact_id="b", body="text", author="test")
    clock[0] += lag.RECALL_VECTOR_LAG_REFRESH_SECONDS - 1
    within = scrape(client)
    clock[0] += 1
    after = scrape(client)

    assert f'powercontext_recall_vector_lag{{model="{MODEL}"}} 1.0' in within
    assert f'powercontext_recall_vector_lag{{model="{MODEL}"}} 2.0' in after
