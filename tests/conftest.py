"""Shared fixtures. The engine comes from DATABASE_URL (SQLite by default, PostgreSQL in CI too)."""

import json
from pathlib import Path

import pytest
from django.db import connections

from artifacts.immutability import install_triggers, uninstall_triggers

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED = PROJECT_ROOT.parent / "shared"
GOLDEN = SHARED / "golden"


@pytest.fixture
def _immutability_triggers_restored(django_db_setup, django_db_blocker):
    """Puts the immutability triggers back after a committed test's flush (see committed_db)."""
    yield
    with django_db_blocker.unblock():
        for alias in connections:
            install_triggers(connections[alias])


@pytest.fixture
def committed_db(_immutability_triggers_restored, transactional_db):
    """A database whose writes really commit (for threads); emptied afterwards.

    Django's flush deletes (SQLite) or truncates (PostgreSQL) rows, which the immutability triggers
    refuse: teardown lifts them, pytest-django's flush empties the tables, then
    ``_immutability_triggers_restored`` (set up first, torn down last) puts them back.
    """
    yield
    for alias in connections:
        uninstall_triggers(connections[alias])


def golden_json(name: str):
    """A JSON file of ../shared/golden, parsed."""
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Logins in tests need no key stretching."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
