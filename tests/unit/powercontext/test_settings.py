"""Start-up configuration: a bad value stops the process with a message naming the variable."""

import os
import re
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


@pytest.mark.parametrize(
    "variable", ["SECURE_HSTS_SECONDS", "POWERCONTEXT_RESIDENT_MEMORY_MB", "POWERCONTEXT_RESIDENT_PAIR_POSTINGS"]
)
def test_zero_turns_a_feature_off_and_starts(variable):
    completed = _check(**{variable: "0"})

    assert completed.returncode == 0, completed.stderr


@pytest.mark.parametrize("variable", ["SECURE_HSTS_SECONDS", "POWERCONTEXT_RESIDENT_MEMORY_MB"])
@pytest.mark.parametrize("value", ["-1", "lots", "1.5"])
def test_a_negative_or_non_integer_amount_stops_start_up_naming_the_variable(variable, value):
    completed = _check(**{variable: value})

    assert completed.returncode != 0
    assert f"{variable} must be an integer of at least 0, got {value!r}" in completed.stderr


# --- SECRET_KEY -------------------------------------------------------------------------------------

DEVELOPMENT_KEY = "powercontext-development-only-not-secret"
A_KEY = "k3y-" + "a1B2c3D4e5" * 5


def _production_check(tmp_path, **env) -> subprocess.CompletedProcess:
    """``manage.py check`` with the project's own settings and no key unless given."""
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    environ |= {"DJANGO_SETTINGS_MODULE": "powercontext.settings", "SECRET_KEY_FILE": str(tmp_path / "absent")}
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=PROJECT_ROOT,
        env=environ | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("key", [None, "", "  ", DEVELOPMENT_KEY])
def test_debug_off_refuses_a_missing_or_development_secret_key(tmp_path, key):
    completed = _production_check(tmp_path, **({} if key is None else {"SECRET_KEY": key}))

    assert completed.returncode != 0
    last_line = completed.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured: SECRET_KEY must be set")


def test_debug_off_starts_with_a_secret_key(tmp_path):
    completed = _production_check(tmp_path, SECRET_KEY=A_KEY)

    assert completed.returncode == 0, completed.stderr


def test_debug_off_reads_the_key_file(tmp_path):
    key_file = tmp_path / "secret_key"
    key_file.write_text(A_KEY + "\n")

    completed = _production_check(tmp_path, SECRET_KEY_FILE=str(key_file))

    assert completed.returncode == 0, completed.stderr


def test_debug_on_falls_back_to_the_development_key(tmp_path):
    completed = _production_check(tmp_path, DEBUG="true")

    assert completed.returncode == 0, completed.stderr


PRODUCTION_ENVIRONMENT = {
    "SECRET_KEY": A_KEY,
    "DEBUG": "false",
    "ALLOWED_HOSTS": "context.example.com",
    "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    "SECURE_SSL_REDIRECT": "true",
    "SESSION_COOKIE_SECURE": "true",
    "CSRF_COOKIE_SECURE": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
}


def test_check_deploy_is_clean_with_the_documented_production_environment(tmp_path):
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    completed = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=PROJECT_ROOT,
        env=environ | {"DJANGO_SETTINGS_MODULE": "powercontext.settings"} | PRODUCTION_ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    assert "System check identified no issues" in completed.stdout


def test_the_production_environment_is_the_one_docs_deployment_md_documents():
    guide = (PROJECT_ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    # The guide sets its names once (`PC_HOST=context.example.com` …) and writes `$PC_HOST` after that: read it with
    # those names filled in, as the shell that runs it would.
    names = dict(re.findall(r"(?:^|\s)(PC_[A-Z_]+)=(\S+)", guide, flags=re.MULTILINE))
    guide = re.sub(r"\$\{?(PC_[A-Z_]+)\}?", lambda match: names.get(match.group(1), match.group(0)), guide)
    for name, value in PRODUCTION_ENVIRONMENT.items():
        if name != "SECRET_KEY":
            assert f"{name}={value}" in guide, name
