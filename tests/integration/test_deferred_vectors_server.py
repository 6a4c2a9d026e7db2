"""Deferred vectors are the default (issue 52): a server process starts its drainer when it loads the application,
so texts written while no server ran (by a command, or in lexical recall before hybrid was switched on) are
embedded by the server without any write arriving. Real processes: ``manage.py`` loads the fixture, gunicorn with
the production settings and the packaged model serves it, and the lag is read where an operator reads it,
``/metrics``."""

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests import waits
from tests.integration.conftest import gunicorn, manage, migrated_sqlite_environment, packaged_vector_lag

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TOKEN = "metrics-token-deferred"
EMBEDDED_WITHIN = 120
"""Seconds the test waits for the server's drainer (the packaged model loads first): a bound, not an expectation."""


@pytest.mark.engine_independent
@pytest.mark.ci_once
def test_a_server_embeds_what_was_written_while_no_server_ran_without_any_write(tmp_path):
    env = migrated_sqlite_environment(tmp_path) | {"POWERCONTEXT_METRICS_TOKEN": TOKEN}
    manage(env | {"POWERCONTEXT_RECALL_MODE": "lexical"}, "load_context_fixtures", str(GOLDEN / "fixture-en.json"))
    with closing(sqlite3.connect(tmp_path / "powercontext.sqlite3")) as database:
        documents, vectors = database.execute(
            "SELECT (SELECT count(*) FROM artifacts_recalldocument), (SELECT count(*) FROM artifacts_recallvector)"
        ).fetchone()
    assert documents > 0 and vectors == 0  # nothing embedded them before the server

    with gunicorn(tmp_path / "gunicorn.log", env) as base:  # the defaults: hybrid recall, deferred vectors
        waits.wait_until(
            lambda: packaged_vector_lag(base, TOKEN) == 0,
            what="the server's drainer embedding the backlog",
            timeout=EMBEDDED_WITHIN,
        )
