"""Start-up configuration: a bad value stops the process with a message naming the variable."""

import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

VARIABLE = "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES"


def _check(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=PROJECT_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("value", ["0", "-3", "ten", "2.5", ""])
def test_an_invalid_max_entries_policy_stops_start_up_naming_the_variable(value):
    completed = _check(**{VARIABLE: value})

    assert completed.returncode != 0
    assert VARIABLE in completed.stderr


def test_a_positive_max_entries_policy_starts():
    completed = _check(**{VARIABLE: "12"})

    assert completed.returncode == 0, completed.stderr
