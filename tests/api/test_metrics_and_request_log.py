"""GET /metrics (protected), the X-Request-ID header, and the opt-in JSON request log."""

import json
import logging
import re

import pytest
from django.test import Client

from artifacts.models import PrepareLog
from tests.api.factories import (
    add_experience,
    add_memory,
    auth,
    make_key,
    make_scope,
    prepare,
    prepare_log_inserts_failing,
)
from vocabulary.limits import MAX_IDENTIFIER_CHARACTERS

pytestmark = pytest.mark.django_db
TOKEN = "metrics-token-0123456789"


def broken_source(*, scopes, query):
    raise RuntimeError("recall backend down")


@pytest.fixture
def world():
    demo = make_scope("project:demo")
    add_memory(demo, {"m1": "alpha one", "m2": "alpha two"})
    add_experience(demo, "exp", "alpha lesson")
    return {"demo": demo, "key": make_key(read=[demo], write=[demo], name="host-a")}


def _metrics(client) -> str:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return response.content.decode()


def _sample(text: str, name: str, **labels) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
            if all(found.get(k) == v for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_are_not_served_unless_a_setting_allows_it(client, settings):
    settings.POWERCONTEXT_METRICS_TOKEN = None
    settings.POWERCONTEXT_METRICS_LOOPBACK = False
    response = client.get("/metrics")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_metrics_need_the_token_when_one_is_set(client, settings):
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_other_methods_get_the_same_404_as_a_get_unless_allowed_then_a_405(settings, method):
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    client = Client(enforce_csrf_checks=True)  # no CSRF cookie: the CSRF middleware's HTML 403 must not answer
    hidden = client.generic(method, "/metrics")
    assert (hidden.status_code, hidden.json()) == (404, client.get("/metrics").json())
    allowed = client.generic(method, "/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert allowed.status_code == 405 and allowed.json()["error"]["code"] == "method_not_allowed"


def test_loopback_mode_serves_local_clients_only(client, settings):
    settings.POWERCONTEXT_METRICS_TOKEN = None
    settings.POWERCONTEXT_METRICS_LOOPBACK = True
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.7").status_code == 404


def test_a_prepare_is_counted_by_endpoint_status_family_and_reason(client, settings, world):
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    before = _metrics(client)
    labels = {"endpoint": "context-prepare", "method": "POST", "status": "200"}
    assembly = {"sections": [{"family": "memory", "limit": 1}, {"family": "experience", "limit": 1}]}
    assert prepare(client, world["key"], query="alpha", assembly=assembly).status_code == 200
    after = _metrics(client)
    name = "powercontext_http_request_duration_seconds_count"
    assert _sample(after, name, **labels) == _sample(before, name, **labels) + 1
    skipped = {"family": "memory", "outcome": "skipped", "reason": "family_limit_reached"}
    name = "powercontext_prepare_candidates_total"
    assert _sample(after, name, **skipped) == _sample(before, name, **skipped) + 1
    name = "powercontext_prepare_content_bytes_count"
    assert _sample(after, name) == _sample(before, name) + 1
    name = "powercontext_prepare_budget_fill_ratio_count"
    assert _sample(after, name) == _sample(before, name) + 1
    name = "powercontext_recall_duration_seconds_count"
    assert _sample(after, name, family="experience") == _sample(before, name, family="experience") + 1


def test_writes_and_503s_are_counted_by_cause(client, settings, world):
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    before = _metrics(client)
    body = {"scope_id": "project:demo", "artifact_id": "exp", "body": "new lesson"}
    written = client.post("/v1/experiences/revisions", body, content_type="application/json", **auth(world["key"]))
    assert written.status_code in (201, 409)
    settings.POWERCONTEXT_RECALL_SOURCES = {"memory": f"{__name__}.broken_source"}
    assert prepare(client, world["key"], query="alpha", assembly={}).status_code == 503
    after = _metrics(client)
    outcome = {"endpoint": "experience-write", "outcome": str(written.status_code)}
    assert (
        _sample(after, "powercontext_writes_total", **outcome)
        == _sample(before, "powercontext_writes_total", **outcome) + 1
    )
    cause = {"cause": "recall_source"}
    assert (
        _sample(after, "powercontext_unavailable_total", **cause)
        == _sample(before, "powercontext_unavailable_total", **cause) + 1
    )
    assert PrepareLog.objects.filter(http_status=503, error_code="service_unavailable").count() == 1


@pytest.mark.parametrize("script_name", ["", "/powercontext"], ids=["at the root", "under a path prefix"])
def test_writes_are_counted_and_prepares_are_not_wherever_the_server_is_mounted(client, settings, world, script_name):
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    name = "powercontext_writes_total"
    before = _metrics(client)
    body = {"scope_id": "project:demo", "artifact_id": "mounted", "body": "lesson"}
    written = client.post(
        "/v1/experiences/revisions",
        body,
        content_type="application/json",
        SCRIPT_NAME=script_name,
        **auth(world["key"]),
    )
    assert written.status_code == 201
    prepared = client.post(
        "/v1/context/prepare",
        {"scope_id": "project:demo", "query": "lesson", "assembly": {}},
        content_type="application/json",
        SCRIPT_NAME=script_name,
        **auth(world["key"]),
    )
    assert prepared.status_code == 200
    after = _metrics(client)
    wrote = {"endpoint": "experience-write", "outcome": "201"}
    assert _sample(after, name, **wrote) == _sample(before, name, **wrote) + 1
    assert _sample(after, name, endpoint="context-prepare", outcome="200") == 0


def test_failed_log_writes_are_counted(client, settings, world, monkeypatch):
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    before = _sample(_metrics(client), "powercontext_prepare_log_write_failures_total")
    with prepare_log_inserts_failing():
        assert prepare(client, world["key"], query="alpha").status_code == 200
    assert _sample(_metrics(client), "powercontext_prepare_log_write_failures_total") == before + 1


def test_every_response_carries_a_request_id_generated_or_accepted(client, world):
    generated = client.get("/healthz")["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    assert client.get("/healthz", HTTP_X_REQUEST_ID="lb-42:abc.DEF_9")["X-Request-ID"] == "lb-42:abc.DEF_9"
    hostile = client.get("/healthz", HTTP_X_REQUEST_ID="x" * 129)["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", hostile)
    assert client.get("/healthz", HTTP_X_REQUEST_ID="a b\nc")["X-Request-ID"] != "a b\nc"
    assert prepare(client, world["key"], query="alpha")["X-Request-ID"]


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def request_lines():
    handler = _Lines()
    logger = logging.getLogger("powercontext.request")
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)


def test_json_request_lines_are_off_by_default(client, world, request_lines, settings):
    settings.POWERCONTEXT_JSON_LOGS = False
    prepare(client, world["key"], query="alpha")
    assert request_lines == []


def test_one_json_line_per_request_names_the_key_never_the_key_itself(client, world, request_lines, settings):
    settings.POWERCONTEXT_JSON_LOGS = True
    body = {"scope_id": "project:demo", "query": "alpha"}
    response = client.post(
        "/v1/context/prepare", body, content_type="application/json", HTTP_X_REQUEST_ID="req-1", **auth(world["key"])
    )
    assert response.status_code == 200
    assert len(request_lines) == 1
    line = json.loads(request_lines[0])
    assert line["request_id"] == "req-1" and line["key"] == "host-a" and line["scope"] == "project:demo"
    assert (line["endpoint"], line["method"], line["status"]) == ("context-prepare", "POST", 200)
    assert line["duration_ms"] > 0
    assert world["key"] not in request_lines[0]
    prepare(client, "pc_wrong", query="alpha")
    refused = json.loads(request_lines[1])
    assert (refused["key"], refused["status"]) == (None, 401)


def test_the_json_line_names_the_scope_of_reads_and_writes_too(client, world, request_lines, settings):
    settings.POWERCONTEXT_JSON_LOGS = True
    write = {"scope_id": "project:demo", "artifact_id": "logged", "body": "a lesson"}
    assert (
        client.post(
            "/v1/experiences/revisions", write, content_type="application/json", **auth(world["key"])
        ).status_code
        == 201
    )
    read = {"scope_id": "project:demo", "family": "experience", "artifact_id": "logged", "revision": "1"}
    assert client.get("/v1/artifacts/revision", read, **auth(world["key"])).status_code == 200
    history = {"scope_id": "project:demo", "family": "experience", "artifact_id": "logged"}
    assert client.get("/v1/artifacts/history", history, **auth(world["key"])).status_code == 200
    lines = [json.loads(line) for line in request_lines]
    assert [(line["endpoint"], line["scope"]) for line in lines] == [
        ("experience-write", "project:demo"),
        ("artifact-revision", "project:demo"),
        ("artifact-history", "project:demo"),
    ]


def test_a_huge_scope_id_costs_the_log_a_line_of_ordinary_length(client, world, request_lines, settings):
    settings.POWERCONTEXT_JSON_LOGS = True
    huge = "s" * 2_000_000
    refused = [
        client.post(
            "/v1/context/prepare",
            {"scope_id": huge, "query": "q"},
            content_type="application/json",
            **auth(world["key"]),
        ),
        client.post(
            "/v1/experiences/revisions",
            {"scope_id": huge, "artifact_id": "a", "body": "b"},
            content_type="application/json",
            **auth(world["key"]),
        ),
    ]
    assert [r.status_code for r in refused] == [422, 422]
    assert len(request_lines) == 2
    assert all(len(line) < 1_000 for line in request_lines)
    assert [json.loads(line)["scope"] for line in request_lines] == ["s" * (MAX_IDENTIFIER_CHARACTERS + 1)] * 2


def _series(text: str, name: str) -> set[str]:
    return {line.split(" ")[0] for line in text.splitlines() if line.startswith(name + "{")}


def test_invented_methods_add_no_label_sets_beyond_one_named_other(client, settings, world):
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    name = "powercontext_http_request_duration_seconds_count"
    unmatched = {"endpoint": "unmatched", "method": "other", "status": "404"}
    before = _sample(_metrics(client), name, **unmatched)
    for number in range(200):
        for path in ("/v1/context/prepare", "/no-such-page"):
            assert client.generic(f"X{number}INVENTED", path).status_code in (401, 404, 405)
    after = _metrics(client)
    methods = {re.search(r'method="([^"]*)"', series).group(1) for series in _series(after, name)}
    assert not any("INVENTED" in method for method in methods)
    assert "other" in methods
    assert len([series for series in _series(after, name) if 'method="other"' in series]) <= 4
    assert _sample(after, name, **unmatched) == before + 200
