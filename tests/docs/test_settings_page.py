"""docs/settings.md lists every environment variable the server reads, as the code declares it (issue 53, item 2)."""

import ast
import io
import os
import subprocess
import sys

from django.core.management import call_command

from infrastructure import environment
from tests.conftest import PROJECT_ROOT

PAGE = PROJECT_ROOT / "docs" / "settings.md"


def test_the_settings_page_is_what_the_code_declares():
    assert PAGE.read_text(encoding="utf-8") == environment.settings_page(), (
        "docs/settings.md is stale: python manage.py settings_page --write docs/settings.md"
    )


def test_the_command_prints_the_page():
    out = io.StringIO()
    call_command("settings_page", stdout=out)
    assert out.getvalue() == PAGE.read_text(encoding="utf-8")


def test_settings_read_the_environment_only_through_the_declared_readers():
    tree = ast.parse((PROJECT_ROOT / "powercontext" / "settings.py").read_text(encoding="utf-8"))
    reads = [
        node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
    ]
    assert reads == [], "settings.py reads os.environ directly: declare the variable in infrastructure/environment.py"


def test_a_bad_value_stops_start_up_naming_the_variable():
    # Run as an operator would: `manage.py check` with the bad value.
    # (tests/unit/powercontext/test_settings.py tries many more.)
    bad = {"POWERCONTEXT_PREPARE_LOG_WRITER": "sometimes", "POWERCONTEXT_DB_POOL_MAX_SIZE": "0"}
    for name, value in bad.items():
        assert name in environment.VARIABLES
        env = {**os.environ, name: value, "SECRET_KEY": "test-only-not-secret-0123456789abcdefghijklmnopqrstuvwxyz"}
        completed = subprocess.run(
            [sys.executable, "manage.py", "check"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
        )
        assert completed.returncode != 0 and name in completed.stderr, (name, completed.stderr[-500:])


def test_a_variable_declared_twice_differently_is_refused():
    name = next(iter(environment.VARIABLES))
    declared = environment.VARIABLES[name]
    try:
        environment.flag(name, True, area=declared.area, meaning="something else")
    except ValueError as exc:
        assert "declared twice" in str(exc)
    else:
        raise AssertionError("a second, different declaration was accepted")
