"""Shared fixtures. The engine comes from DATABASE_URL (SQLite by default, PostgreSQL in CI too)."""

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connections

from artifacts.immutability import install_triggers, uninstall_triggers

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED = PROJECT_ROOT.parent / "shared"
GOLDEN = SHARED / "golden"


@pytest.fixture
def committed_db(transactional_db):
    """A database whose writes really commit (for threads); emptied afterwards.

    Django's flush deletes rows, which the immutability triggers refuse, so teardown lifts the
    triggers, empties the tables and puts the triggers back for the next test.
    """
    yield
    for alias in connections:
        connection = connections[alias]
        uninstall_triggers(connection)
        try:
            call_command("flush", database=alias, interactive=False, verbosity=0)
        finally:
            install_triggers(connection)


def golden_json(name: str):
    """A JSON file of ../shared/golden, parsed."""
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Logins in tests need no key stretching."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
