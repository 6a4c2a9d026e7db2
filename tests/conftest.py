"""Shared fixtures. The engine comes from DATABASE_URL (SQLite by default, PostgreSQL in CI too)."""

import json
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# A byte-identical copy of the project's golden files: a clone needs nothing beside it.
GOLDEN = PROJECT_ROOT / "tests" / "golden"


@pytest.fixture
def committed_db(transactional_db):
    """A database whose writes really commit (for threads and live servers); emptied afterwards.

    The project's ``flush`` command (artifacts/management/commands/flush.py) lifts the immutability
    triggers for the flush alone, so pytest-django's teardown can empty the tables.
    """
    return transactional_db


def golden_json(name: str):
    """A JSON file of tests/golden, parsed."""
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Logins in tests need no key stretching."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def staff_client(client):
    """The Django test client logged in as a superuser (the operator admin and tools)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("operator", "op@example.com", "pw-operator-1")
    client.force_login(user)
    return client
