"""Retries are safe: a write sent again with the same Idempotency-Key returns the original 201 and makes no new
revision; the same key with another request is refused; keys expire and are purged."""

import datetime
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from artifacts.models import ArtifactRevision, IdempotentWrite
from tests import waits
from tests.api.factories import auth, make_key, make_scope

ENTRY = "/v1/memory/entries"
EXPERIENCE = "/v1/experiences/revisions"


@pytest.fixture
def scope(db):
    return make_scope("project:demo")


@pytest.fixture
def writer(scope):
    return make_key(read=[scope], write=[scope])


def post(client, key, path, body, idempotency_key=None):
    headers = auth(key)
    if idempotency_key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = idempotency_key
    return client.post(path, body, content_type="application/json", **headers)


def revisions() -> int:
    return ArtifactRevision.objects.count()


@pytest.mark.parametrize(
    "path, body",
    [
        (ENTRY, {"scope_id": "project:demo", "entry_id": "e", "body": "once"}),
        (EXPERIENCE, {"scope_id": "project:demo", "artifact_id": "x", "body": "once"}),
        (
            "/v1/topic-memories/revisions",
            {"scope_id": "project:demo", "artifact_id": "t", "title": "T", "summary": "S"},
        ),
    ],
)
def test_a_retry_with_the_same_key_returns_the_original_201_and_makes_no_new_revision(client, writer, path, body):
    first = post(client, writer, path, body, "retry-1")
    assert first.status_code == 201
    count = revisions()
    again = post(client, writer, path, body, "retry-1")
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert revisions() == count


def test_without_a_key_each_request_is_a_new_write(client, writer):
    body = {"scope_id": "project:demo", "artifact_id": "x", "body": "twice"}
    first, second = post(client, writer, EXPERIENCE, body), post(client, writer, EXPERIENCE, body)
    assert first.json()["citation"]["revision"] == 1 and second.json()["citation"]["revision"] == 2


def test_the_same_key_with_a_different_request_is_refused(client, writer):
    post(client, writer, EXPERIENCE, {"scope_id": "project:demo", "artifact_id": "x", "body": "one"}, "k")
    count = revisions()
    response = post(client, writer, EXPERIENCE, {"scope_id": "project:demo", "artifact_id": "x", "body": "two"}, "k")
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["path"] == "Idempotency-Key"
    other_path = post(client, writer, ENTRY, {"scope_id": "project:demo", "entry_id": "e", "body": "one"}, "k")
    assert other_path.status_code == 422
    assert revisions() == count


def test_keys_belong_to_one_api_key(client, scope, writer):
    other = make_key(read=[scope], write=[scope])
    body = {"scope_id": "project:demo", "artifact_id": "x", "body": "mine"}
    assert post(client, writer, EXPERIENCE, body, "shared").json()["citation"]["revision"] == 1
    assert post(client, other, EXPERIENCE, body, "shared").json()["citation"]["revision"] == 2


def test_a_refused_write_is_not_remembered_so_it_can_be_retried(client, writer):
    body = {"scope_id": "project:demo", "entry_id": "e", "body": "update", "expected_head_revision": 0}
    assert post(client, writer, "/v1/memory/entries/update", body, "u").status_code == 404
    post(client, writer, ENTRY, {"scope_id": "project:demo", "entry_id": "e", "body": "create"})
    assert (
        post(client, writer, "/v1/memory/entries/update", {**body, "expected_head_revision": 1}, "u2").status_code
        == 201
    )


@pytest.mark.parametrize("value", ["", "x" * 201, "caf\u00e9"])
def test_a_malformed_key_is_refused(client, writer, value):
    body = {"scope_id": "project:demo", "artifact_id": "x", "body": "b"}
    response = client.post(
        EXPERIENCE, body, content_type="application/json", headers={"Idempotency-Key": value}, **auth(writer)
    )
    assert response.status_code == 422
    assert revisions() == 0


def test_concurrent_retries_with_one_key_write_once(committed_db):
    scope = make_scope("project:demo")
    key = make_key(read=[scope], write=[scope])
    body = {"scope_id": "project:demo", "artifact_id": "x", "body": "raced"}
    start, results = waits.barrier(4), []

    def send():
        try:
            start.wait()
            results.append(post(Client(), key, EXPERIENCE, body, "race"))
        finally:
            connection.close()

    assert waits.run_threads([send] * 4, what="retries", barriers=[start]) == []
    assert [r.status_code for r in results] == [201] * 4
    assert {r.json()["citation"]["revision"] for r in results} == {1}
    assert revisions() == 1


def test_expired_keys_no_longer_count_and_are_purged_with_progress(client, writer, settings):
    body = {"scope_id": "project:demo", "artifact_id": "x", "body": "old"}
    post(client, writer, EXPERIENCE, body, "old-key")
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(
        hours=settings.POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS + 1
    )
    IdempotentWrite.objects.update(created_at=old)
    post(client, writer, EXPERIENCE, {**body, "body": "fresh"}, "fresh-key")
    out, err = StringIO(), StringIO()
    call_command("purge_idempotency_keys", "--batch", "1", stdout=out, stderr=err)
    assert out.getvalue().strip() == "1 idempotency record purged"
    assert "1 deleted" in err.getvalue()
    assert list(IdempotentWrite.objects.values_list("key", flat=True)) == ["fresh-key"]
    assert post(client, writer, EXPERIENCE, body, "old-key").json()["citation"]["revision"] == 3


def _record_version(key: str) -> str:
    """The transaction that last wrote the key's record (PostgreSQL's ``xmin``)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM artifacts_idempotentwrite WHERE key = %s", [key])
        return cursor.fetchone()[0]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a synchronous standby is PostgreSQL's")
def test_on_postgresql_a_replay_rewrites_its_record_so_its_commit_waits_for_the_synchronous_standby(committed_db):
    # PostgreSQL makes a commit wait for a synchronous standby only when its transaction has an ID and wrote to
    # the log before committing; a replay that only reads commits at once, and answered from a write whose commit
    # never reached the standby (the primary crashed while waiting, and its recovery committed the write) it
    # would acknowledge a write a failover loses. tests/failover/in_doubt.py shows that story with a real
    # standby and pg_auto_failover's daemons; here, the replay must rewrite the record in its own transaction.
    scope = make_scope("project:demo")
    key = make_key(read=[scope], write=[scope])
    body = {"scope_id": "project:demo", "artifact_id": "x", "body": "kept"}
    assert post(Client(), key, EXPERIENCE, body, "durable").status_code == 201
    written_by = _record_version("durable")
    replay = post(Client(), key, EXPERIENCE, body, "durable")
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    assert _record_version("durable") != written_by
    assert IdempotentWrite.objects.get(key="durable").status == 201
