"""POWERCONTEXT_TEST_POSTGRESQL=off keeps the suite away from the PostgreSQL at 127.0.0.1:5432 (README, "Set up"):
the deployment-guide test, the one that creates and drops `pc_guide_*` roles and databases there whatever the
suite's engine, is skipped with the reason, and never connects (no psql on PATH would be needed)."""

import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

pytestmark = pytest.mark.engine_independent  # its own databases, whatever the suite's engine (.ci/run)


def test_postgresql_off_skips_the_deployment_guide_with_its_reason(tmp_path):
    # psql on PATH fails loudly if anything calls it: the switch must skip before any connection attempt.
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("psql", "pg_dump", "createdb"):
        (fake / tool).write_text('#!/bin/sh\necho called >> "$(dirname "$0")/calls"; exit 1\n')
        (fake / tool).chmod(0o755)
    env = dict(os.environ, POWERCONTEXT_TEST_POSTGRESQL="off", PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/docs/test_deployment_guide.py", "-rs", "-q", "-p", "no:cacheprovider"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 skipped" in done.stdout and "POWERCONTEXT_TEST_POSTGRESQL=off" in done.stdout, done.stdout
    assert not (fake / "calls").exists()
