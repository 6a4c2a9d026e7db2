"""Read replicas must be the primary's (docs/scaling.md §8, issue 34): a server is read only when it is in
recovery, of the primary's cluster (system identifier), on its timeline and in its database; any other is
refused, counted with its reason, logged, and the primary answers.

PostgreSQL only. The "replica" alias is a mirror of the test database: the primary's own database, not in
recovery. Without the pretence of test_read_replicas.py's ``replica_on`` it is exactly a server that is not a
standby; a copy of the test database is a database that diverged from the primary. A real standby's
acceptance is proven by tests/replica/run.py (``make test-replica``).
"""

import logging
from contextlib import contextmanager

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import connections

from infrastructure import replicas
from infrastructure.replicas import health
from tests.api.factories import add_experience, make_key, make_scope, read_revision
from tests.api.test_read_replicas import (
    BOTH,
    REPLICA,
    SCOPE,
    counted,
    experience,
    replica_configured,  # noqa: F401 - a fixture
    replica_on,  # noqa: F401 - a fixture
    statements_on,
    without_lag_checks,
)
from tests.postgres import pgbouncer_server_connections_closed

pytestmark = pytest.mark.skipif(
    not django_settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="read replicas are PostgreSQL only (a SQLite database ignores POWERCONTEXT_READ_REPLICA_URLS)",
)


def admin_connection(database: str = "postgres") -> psycopg.Connection:
    """A superuser connection of this test run (the test database's settings) to another database."""
    settings = connections["default"].settings_dict
    return psycopg.connect(
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        dbname=database,
        autocommit=True,
    )


@contextmanager
def replica_pointed_at(database: str):
    """The replica's connection reaches another database of the same server."""
    replica = connections[REPLICA]
    original = replica.settings_dict
    replica.close()
    replica.settings_dict = {**original, "NAME": database}
    try:
        yield
    finally:
        replica.close()
        replica.settings_dict = original


@contextmanager
def diverged_copy(*changes: str):
    """A copy of the test database (CREATE DATABASE … TEMPLATE) with ``changes`` applied, triggers off."""
    primary = connections["default"].settings_dict["NAME"]
    copy = f"{primary}_diverged"[:63]
    connections.close_all()  # a template must have no other session
    pgbouncer_server_connections_closed(connections["default"].settings_dict, primary)
    with admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{primary}"')
    try:
        with admin_connection(copy) as diverged:
            diverged.execute("SET session_replication_role = replica")  # the history guards stay quiet
            for change in changes:
                diverged.execute(change)
        yield copy
    finally:
        connections[REPLICA].close()
        with admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')


@pytest.mark.usefixtures("replica_configured")
@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_database_that_is_not_the_primarys_standby_never_serves_a_revision_the_primary_does_not_have(client):
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "Only the primary's incident.")
    key = make_key(read=[scope])

    # The copy holds a revision 1 of "forged", which the primary never had.
    rename = "UPDATE artifacts_artifact SET artifact_id = 'forged' WHERE artifact_id = 'incident'"
    with diverged_copy(rename) as copy, replica_pointed_at(copy), counted() as delta, statements_on(REPLICA) as seen:
        forged = read_revision(client, key, scope_id=SCOPE, family="experience", artifact_id="forged", revision="1")
        real = experience(client, key)

    assert forged.status_code == 404
    assert real.status_code == 200 and real.json()["body"] == "Only the primary's incident."
    assert delta == {"skip not_in_recovery": 1}
    assert without_lag_checks(seen) == []


@pytest.mark.usefixtures("replica_configured")
@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_server_not_in_recovery_is_refused_logged_with_its_reason_and_the_primary_answers(client, caplog):
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "Answered by the primary.")
    key = make_key(read=[scope])

    with caplog.at_level(logging.WARNING, logger="powercontext.replicas"), counted() as delta:
        responses = [experience(client, key) for _ in range(2)]

    assert [r.json()["body"] for r in responses] == ["Answered by the primary."] * 2
    assert delta == {"skip not_in_recovery": 1}  # skipped for POWERCONTEXT_REPLICA_SKIP_SECONDS after the first
    messages = [r.getMessage() for r in caplog.records if r.name == "powercontext.replicas"]
    assert messages == [
        "read replica replica skipped (not_in_recovery: pg_is_in_recovery() is false: a promoted replica or "
        "another primary); its reads go to the primary, checked again every 10 s"
    ]


@pytest.mark.usefixtures("replica_configured")
@pytest.mark.django_db(databases=BOTH)
def test_the_identity_of_the_primary_and_of_the_server_behind_an_alias_are_read_from_postgresql():
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT (pg_control_system()).system_identifier, (pg_control_checkpoint()).timeline_id, "
            "(SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        system_identifier, checkpoint_timeline, database_oid = cursor.fetchone()

    primary = replicas.primary_identity()
    mirror = replicas.replica_identity(REPLICA)

    assert primary == replicas.ServerIdentity(False, system_identifier, checkpoint_timeline, database_oid)
    assert mirror == primary  # the mirror is the primary's own database, and not in recovery
    assert replicas.replica_identity_mismatch(REPLICA)[0] == "not_in_recovery"


@pytest.mark.parametrize(
    ("pretence", "reason"),
    [
        ("(pg_control_system()).system_identifier", "other_cluster"),
        ("(pg_control_checkpoint()).timeline_id", "other_timeline"),
    ],
)
@pytest.mark.usefixtures("replica_on")
@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_standby_of_another_cluster_or_timeline_is_refused(client, monkeypatch, pretence, reason):
    # A standby (the pretence of replica_on) whose cluster or timeline differs from the primary's by one.
    monkeypatch.setattr(
        health, "REPLICA_IDENTITY_SQL", health.REPLICA_IDENTITY_SQL.replace(pretence, f"{pretence} + 1")
    )
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "From the primary.")
    key = make_key(read=[scope])

    with counted() as delta:
        response = experience(client, key)

    assert response.json()["body"] == "From the primary."
    assert delta == {f"skip {reason}": 1}
    assert reason in replicas.replica_identity_mismatch(REPLICA)[0]


@pytest.mark.usefixtures("replica_on")
@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_standby_connected_to_another_database_of_the_primarys_cluster_is_refused(client):
    scope = make_scope(SCOPE)
    add_experience(scope, "incident", "From the primary's database.")
    key = make_key(read=[scope])

    with replica_pointed_at("postgres"), counted() as delta:
        response = experience(client, key)

    assert response.json()["body"] == "From the primary's database."
    assert delta == {"skip other_database": 1}


@pytest.mark.usefixtures("replica_on")
@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_replica_is_identified_again_at_every_health_check_and_the_primary_once_per_interval(monkeypatch):
    monkeypatch.setattr(health, "LAG_CHECK_SECONDS", 0)  # every read checks the replica again

    with statements_on("default") as on_primary, statements_on(REPLICA) as on_replica:
        chosen = [replicas.replica_alias() for _ in range(3)]
        # Then the replica is promoted (no longer in recovery): its next check refuses it.
        promoted = health.REPLICA_IDENTITY_SQL.replace("SELECT true", "SELECT false")
        monkeypatch.setattr(health, "REPLICA_IDENTITY_SQL", promoted)
        with counted() as delta:
            after_promotion = replicas.replica_alias()

    assert chosen == [REPLICA] * 3
    assert after_promotion is None
    assert delta == {"skip not_in_recovery": 1}
    assert sum("pg_control_system" in sql for sql in on_replica) == 4
    assert sum("pg_walfile_name" in sql for sql in on_primary) == 1  # cached for PRIMARY_IDENTITY_SECONDS
