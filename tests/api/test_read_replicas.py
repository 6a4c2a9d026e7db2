"""Read replicas (docs/scaling.md §8): only reads that cannot be stale go to a replica, and replica trouble never
reaches the client.

PostgreSQL only. The replica is tests/settings.py's "replica" alias: a second connection to the test database,
which sees committed rows only. A test's own open transaction is therefore exactly a write the replica has not
replayed yet; a committed row is one it has. The real streaming replica is proven by tests/replica/run.py.
"""

import json
import logging
import socket
import time
from contextlib import contextmanager
from unittest import mock

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import OperationalError, connections, transaction
from django.urls import reverse
from prometheus_client import REGISTRY

from artifacts.models import Artifact, ArtifactRevision
from infrastructure import replicas
from infrastructure.replicas import health
from tests.api.factories import (
    add_experience,
    add_memory,
    auth,
    make_key,
    make_scope,
    prepare,
    read_revision,
)

pytestmark = pytest.mark.skipif(
    not django_settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="read replicas are PostgreSQL only (a SQLite database ignores POWERCONTEXT_READ_REPLICA_URLS)",
)
REPLICA = "replica"
BOTH = ["default", REPLICA]
HISTORY_URL = "/v1/artifacts/history"
SCOPE = "project:replicated"
SKIP_REASONS = ("down", "lagging", "error", "not_in_recovery", "other_cluster", "other_database", "other_timeline")


@pytest.fixture
def replica_configured(settings):
    """Replica-safe reads may use the "replica" alias; every replica starts healthy."""
    settings.POWERCONTEXT_READ_REPLICAS = [REPLICA]
    replicas.replica_health_reset()
    yield
    replicas.replica_health_reset()


@pytest.fixture
def replica_on(replica_configured, monkeypatch):
    """The "replica" alias in use, its identity check told that the mirror is in recovery.

    The mirror is the primary's own database: the primary's cluster, timeline and database, but not a
    standby, which is refused (tests/api/test_read_replica_identity.py). Here it stands for a standby; a real
    standby's acceptance is proven by tests/replica/run.py.
    """
    standby_sql = health.REPLICA_IDENTITY_SQL.replace("pg_is_in_recovery()", "true")
    monkeypatch.setattr(health, "REPLICA_IDENTITY_SQL", standby_sql)


def replica_reads(outcome: str) -> float:
    return REGISTRY.get_sample_value("powercontext_replica_reads_total", {"outcome": outcome}) or 0.0


def replica_skips(reason: str) -> float:
    labels = {"alias": REPLICA, "reason": reason}
    return REGISTRY.get_sample_value("powercontext_replica_skips_total", labels) or 0.0


@contextmanager
def counted():
    """The change of every replica counter within the block, as a dict filled in at its end."""
    names = [("read", o) for o in ("replica", "miss", "error", "timeout")] + [("skip", r) for r in SKIP_REASONS]

    def snapshot():
        return {f"{kind} {label}": (replica_reads if kind == "read" else replica_skips)(label) for kind, label in names}

    before, delta = snapshot(), {}
    yield delta
    after = snapshot()
    delta.update({name: after[name] - before[name] for name in after if after[name] != before[name]})


@contextmanager
def statements_on(alias: str):
    """The SQL run on one connection within the block (an execute wrapper: a request's start clears the
    query log that CaptureQueriesContext reads)."""
    statements: list[str] = []

    def record(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connections[alias].execute_wrapper(record):
        yield statements


def without_lag_checks(statements: list[str]) -> list[str]:
    """The statements that are not a replica's health checks (its identity and its lag)."""
    return [sql for sql in statements if "pg_is_in_recovery" not in sql and "pg_control_system" not in sql]


def experience(client, key, revision: int = 1):
    return read_revision(
        client, key, scope_id=SCOPE, family="experience", artifact_id="incident", revision=str(revision)
    )


def history(client, key, artifact_id: str = "incident", family: str = "experience"):
    params = {"scope_id": SCOPE, "family": family, "artifact_id": artifact_id, "limit": "10"}
    return client.get(HISTORY_URL, data=params, **auth(key))


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def replica_down():
    """The replica's connection points at a loopback port nothing listens on (the settings are a copy: a test
    mirror shares the primary's dict)."""
    replica = connections[REPLICA]
    original = replica.settings_dict
    replica.close()
    replica.settings_dict = {**original, "PORT": closed_port()}
    try:
        yield
    finally:
        replica.close()
        replica.settings_dict = original


# --- what goes to the replica -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_an_exact_read_of_a_committed_revision_is_served_by_the_replica_with_the_primarys_bytes(
    client, replica_on, settings
):
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "The 02:00 failover lost no writes.")
    key = make_key(read=[scope])

    with counted() as delta, statements_on(REPLICA) as on_replica:
        from_replica = experience(client, key)
    settings.POWERCONTEXT_READ_REPLICAS = []
    from_primary = experience(client, key)

    assert from_replica.status_code == 200
    assert from_replica.json() == from_primary.json()
    assert from_replica.json()["body"] == "The 02:00 failover lost no writes."
    assert delta == {"read replica": 1}
    assert any("artifacts_artifactrevision" in sql for sql in without_lag_checks(on_replica)), on_replica


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_memory_entry_read_and_its_live_entries_come_from_the_replica(client, replica_on):
    scope = make_scope(SCOPE)
    first = add_memory(scope, [("deploys", "Deploys freeze on Fridays.", "v1")])
    add_memory(scope, [("deploys", "Deploys freeze on Fridays after 12:00.", "v2")])
    key = make_key(read=[scope])
    params = {"scope_id": SCOPE, "family": "memory", "artifact_id": "memory"}

    with counted() as delta:
        entry = read_revision(client, key, **params, revision="1", entry_id="deploys", entry_version="v1")
        revision = read_revision(client, key, **params, revision="2")

    assert entry.status_code == 200 and entry.json()["entry"]["body"] == first.added[0].body
    assert [e["body"] for e in revision.json()["entries"]] == ["Deploys freeze on Fridays after 12:00."]
    assert delta == {"read replica": 2}


@pytest.mark.django_db(databases=BOTH)
def test_a_revision_the_replica_has_not_replayed_is_read_from_the_primary_never_a_404(client, replica_on):
    # Nothing here is committed: the replica connection cannot see any of it.
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "Written a moment ago.")
    key = make_key(read=[scope])

    with counted() as delta:
        response = experience(client, key)

    assert response.status_code == 200
    assert response.json()["body"] == "Written a moment ago."
    assert delta == {"read miss": 1}


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_revision_stored_nowhere_is_still_a_404_once_the_primary_has_said_so(client, replica_on):
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "Only revision 1.")
    key = make_key(read=[scope])

    with counted() as delta:
        response = experience(client, key, revision=2)

    assert response.status_code == 404
    assert "revision" in response.json()["error"]["message"]
    assert delta == {"read miss": 1}


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_history_comes_from_the_replica_only_once_the_replica_has_the_primarys_head(client, replica_on):
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "First.")
    add_experience(scope, "incident", "Second.")
    key = make_key(read=[scope])

    with counted() as caught_up:
        page = history(client, key)
    with transaction.atomic(), counted() as behind:
        # The third revision exists on the primary (this connection) only: the replica is one revision behind.
        add_experience(scope, "incident", "Third.")
        newer_page = history(client, key)

    assert [r["citation"]["revision"] for r in page.json()["revisions"]] == [2, 1]
    assert caught_up == {"read replica": 1}
    assert [r["citation"]["revision"] for r in newer_page.json()["revisions"]] == [3, 2, 1]
    assert behind == {"read miss": 1}


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_prepare_writes_and_authentication_never_read_the_replica(client, replica_on):
    scope = make_scope(SCOPE)
    other = make_scope("project:other")
    add_memory(scope, [("alpha", "alpha is replicated", "v1")])
    key = make_key(read=[scope], write=[scope])
    write = {"scope_id": SCOPE, "entry_id": "beta", "body": "beta is written"}

    with statements_on(REPLICA) as on_replica:
        prepared = prepare(client, key, scope_id=SCOPE, query="alpha")
        written = client.post("/v1/memory/entries", json.dumps(write), content_type="application/json", **auth(key))
        unknown_key = experience(client, "pc_not_a_key_0123456789abcdef0123456789ab")
        unreadable = read_revision(
            client, key, scope_id=other.scope_id, family="memory", artifact_id="memory", revision="1"
        )

    assert prepared.status_code == 200 and "alpha is replicated" in prepared.json()["content"]
    assert written.status_code == 201
    assert unknown_key.status_code == 401
    assert unreadable.status_code == 404
    assert on_replica == []


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_the_router_sends_to_the_replica_only_the_reads_inside_replica_read(replica_on):
    scope = make_scope(SCOPE)
    stored = add_experience(scope, "incident", "Routed.")
    router = replicas.ReplicaRouter()

    inside = replicas.replica_read(
        lambda: (router.db_for_read(ArtifactRevision), router.db_for_write(ArtifactRevision))
    )
    read = replicas.replica_read(lambda: ArtifactRevision.objects.get(pk=stored.pk))
    with statements_on("default") as on_primary:
        artifact = read.artifact  # a lazy load after the replica read: the primary

    assert inside == (REPLICA, "default")
    assert router.db_for_read(ArtifactRevision) == "default"
    assert router.db_for_write(ArtifactRevision, instance=read) == "default"
    assert read._state.db == REPLICA and artifact._state.db == "default"
    assert len(on_primary) == 1
    assert router.allow_migrate(REPLICA, "artifacts") is False
    assert router.allow_migrate("default", "artifacts") is None
    assert router.allow_relation(read, Artifact.objects.get(pk=artifact.pk)) is True


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_without_replicas_configured_every_read_goes_to_the_primary(client, settings):
    settings.POWERCONTEXT_READ_REPLICAS = []
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "Primary only.")
    key = make_key(read=[scope])

    with counted() as delta, statements_on(REPLICA) as on_replica:
        response = experience(client, key)

    assert response.status_code == 200
    assert delta == {}
    assert on_replica == []


# --- replica trouble ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_replica_that_does_not_answer_is_skipped_counted_and_logged_once_per_outage(
    client, replica_on, settings, caplog
):
    settings.POWERCONTEXT_REPLICA_SKIP_SECONDS = 0  # checked again at every read, so each read counts a skip
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "Still readable.")
    key = make_key(read=[scope])

    with caplog.at_level(logging.WARNING, logger="powercontext.replicas"), counted() as delta:
        with replica_down():
            during = [experience(client, key) for _ in range(2)]
        after = experience(client, key)

    assert [r.status_code for r in during] == [200, 200]
    assert {r.json()["body"] for r in during} == {"Still readable."}
    assert after.status_code == 200
    assert delta == {"skip down": 2, "read replica": 1}
    messages = [record.getMessage() for record in caplog.records if record.name == "powercontext.replicas"]
    assert len(messages) == 2, messages
    assert messages[0].startswith("read replica replica skipped (down:")
    assert messages[1].startswith("read replica replica is back in use")


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_skipped_replica_is_not_asked_again_until_its_skip_time_has_passed(client, replica_on):
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "Read from the primary meanwhile.")
    key = make_key(read=[scope])

    with replica_down(), counted() as delta:
        responses = [experience(client, key) for _ in range(3)]

    assert [r.status_code for r in responses] == [200, 200, 200]
    assert delta == {"skip down": 1}  # the default skip time (10 s) outlasts the three reads


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_with_a_shared_health_directory_one_workers_probe_serves_the_other_workers(replica_on, settings, tmp_path):
    settings.POWERCONTEXT_REPLICA_HEALTH_DIR = str(tmp_path)
    first = replicas.replica_alias()  # this worker probes (identity, lag) and records its verdict
    replicas.replica_health_reset()  # another worker: nothing of its own

    with statements_on(REPLICA) as on_replica, statements_on("default") as on_primary:
        second = replicas.replica_alias()

    assert first == second == REPLICA
    assert on_replica == [] and on_primary == []  # no probe of its own
    assert [path.name.startswith(f"replica-{REPLICA}-") for path in tmp_path.iterdir()] == [True]


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_with_a_shared_health_directory_a_replica_one_worker_skipped_is_skipped_by_the_others(
    replica_on, settings, tmp_path
):
    settings.POWERCONTEXT_REPLICA_HEALTH_DIR = str(tmp_path)
    replicas.replica_failed(REPLICA, "down", "connection refused")
    replicas.replica_health_reset()

    with statements_on(REPLICA) as on_replica:
        alias = replicas.replica_alias()

    assert alias is None and on_replica == []


@pytest.mark.django_db(transaction=True, databases=BOTH)
@pytest.mark.parametrize(
    "verdict",
    [{"checked_at": 1e12, "skipped_until": 0.0}, {"checked_at": -1.0, "skipped_until": 1e12}],
    ids=["probed in the future", "skipped past the setting"],
)
def test_a_shared_verdict_no_worker_of_this_boot_could_have_written_is_ignored(replica_on, settings, tmp_path, verdict):
    # A file left by an earlier boot (the monotonic clock starts again) or written by hand: the replica is probed.
    settings.POWERCONTEXT_REPLICA_HEALTH_DIR = str(tmp_path)
    replicas.replica_alias()  # names the file
    (path,) = tmp_path.iterdir()
    path.write_text(json.dumps(verdict))
    replicas.replica_health_reset()

    with statements_on(REPLICA) as on_replica:
        alias = replicas.replica_alias()

    assert alias == REPLICA
    assert on_replica  # probed anew: identity and lag


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_an_unwritable_shared_health_directory_costs_only_the_sharing(replica_on, settings, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings.POWERCONTEXT_REPLICA_HEALTH_DIR = str(blocker / "health")  # a directory cannot be made under a file

    assert replicas.replica_alias() == REPLICA


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_replica_lagging_past_the_bound_is_skipped_and_the_primary_answers(client, replica_on, settings):
    settings.POWERCONTEXT_REPLICA_MAX_LAG_SECONDS = 10
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "Fresh on the primary.")
    key = make_key(read=[scope])

    with mock.patch.object(health, "replica_lag_seconds", return_value=60.0), counted() as delta:
        response = experience(client, key)

    assert response.status_code == 200
    assert delta == {"skip lagging": 1}


@pytest.mark.django_db(databases=BOTH)
def test_a_replicas_lag_is_the_age_of_the_oldest_primary_position_it_has_not_replayed(replica_on, monkeypatch):
    monkeypatch.setattr(health, "REPLAYED_SQL", "SELECT 1000::numeric")
    now = time.monotonic()
    health._primary_positions.extend([(now - 60, 900.0), (now - 30, 1000.0), (now - 20, 1100.0)])

    lag = replicas.replica_lag_seconds(REPLICA)

    assert 20 <= lag < 30  # it has replayed the position of 30 s ago, not the one of 20 s ago


@pytest.mark.django_db(databases=BOTH)
def test_a_replica_checked_after_an_idle_spell_is_not_taken_for_lagging(replica_on, monkeypatch):
    # Replayed the position of the last check, a minute ago, but not yet the primary's WAL of this instant.
    monkeypatch.setattr(health, "REPLAYED_SQL", "SELECT 1000::numeric")
    health._primary_positions.append((time.monotonic() - 60, 1000.0))

    with statements_on(REPLICA) as on_replica:
        lag = replicas.replica_lag_seconds(REPLICA)

    assert lag < health.LAG_CHECK_SECONDS
    assert on_replica == ["SELECT 1000::numeric"]  # the told replay was asked: the mirror unpatched lags 0 too


@pytest.mark.django_db(databases=BOTH)
def test_a_replica_that_replayed_none_of_the_recorded_positions_lags_at_least_the_oldest_ones_age(
    replica_on, monkeypatch
):
    monkeypatch.setattr(health, "REPLAYED_SQL", "SELECT 0::numeric")
    health._primary_positions.append((time.monotonic() - 40, 500.0))

    assert replicas.replica_lag_seconds(REPLICA) >= 40


@pytest.mark.django_db(databases=BOTH)
def test_a_replica_that_has_replayed_the_primarys_current_position_does_not_lag(replica_on, monkeypatch):
    # The test mirror is the primary itself: it has "replayed" exactly the primary's current position.
    monkeypatch.setattr(health, "REPLAYED_SQL", health.PRIMARY_POSITION_SQL)
    health._primary_positions.append((time.monotonic() - 40, 0.0))

    with statements_on(REPLICA) as on_replica:
        lag = replicas.replica_lag_seconds(REPLICA)

    assert lag < health.LAG_CHECK_SECONDS
    assert on_replica == [health.PRIMARY_POSITION_SQL]  # the told replay was asked: the mirror unpatched lags 0 too


@pytest.mark.django_db(databases=BOTH)
def test_a_server_not_in_recovery_does_not_lag(replica_on):
    # The test mirror is not a standby (nor is a promoted replica).
    health._primary_positions.append((time.monotonic() - 40, 0.0))

    assert replicas.replica_lag_seconds(REPLICA) == 0.0


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_replica_failing_mid_read_is_skipped_and_the_read_done_again_on_the_primary(replica_on):
    def read():
        if replicas.reading_from_replica():
            raise OperationalError("canceling statement due to conflict with recovery")
        return "from the primary"

    with counted() as delta:
        answer = replicas.replica_read(read)
        after = replicas.replica_alias()

    assert answer == "from the primary"
    assert after is None  # skipped for POWERCONTEXT_REPLICA_SKIP_SECONDS
    assert delta == {"read error": 1, "skip error": 1}


def _slow_on_the_replica() -> str:
    """A read that passes the replica's statement timeout there and answers on the primary."""
    if replicas.reading_from_replica():
        error = OperationalError("canceling statement due to statement timeout")
        error.__cause__ = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
        raise error
    return "from the primary"


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_read_past_the_replicas_statement_timeout_is_done_on_the_primary_and_the_replica_kept(replica_on):
    # One slow read (any key can send one) must not take the replica out of use for every worker.
    with counted() as delta:
        answer = replicas.replica_read(_slow_on_the_replica)
        after = replicas.replica_alias()

    assert answer == "from the primary"
    assert after == REPLICA
    assert delta == {"read timeout": 1}


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_replica_that_times_out_and_then_answers_nothing_is_skipped(replica_on):
    def hung(execute, sql, params, many, context):
        raise OperationalError("canceling statement due to statement timeout")

    assert replicas.replica_alias() == REPLICA  # probed just now: the read's first statement is the read's own
    with counted() as delta, connections[REPLICA].execute_wrapper(hung):
        answer = replicas.replica_read(_slow_on_the_replica)
    after = replicas.replica_alias()

    assert answer == "from the primary"
    assert after is None
    assert delta == {"read error": 1, "skip error": 1}


# --- the admin --------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_the_admin_shows_a_replicated_revision_from_the_replica_and_a_newer_one_from_the_primary(
    staff_client, replica_on
):
    scope = make_scope(SCOPE)
    replicated = add_experience(scope, "incident", "Replicated body.")

    with counted() as old:
        page = staff_client.get(reverse("admin:artifacts_artifactrevision_change", args=[replicated.pk]))
    with transaction.atomic(), counted() as new:
        fresh = add_experience(scope, "incident", "Not replayed body.")
        fresh_page = staff_client.get(reverse("admin:artifacts_artifactrevision_change", args=[fresh.pk]))

    assert page.status_code == 200 and "Replicated body." in page.content.decode()
    assert set(old) == {"read replica"}  # the page reads its row twice (the subtitle, then the form)
    assert fresh_page.status_code == 200 and "Not replayed body." in fresh_page.content.decode()
    assert set(new) == {"read miss"}
