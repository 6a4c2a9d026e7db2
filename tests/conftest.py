"""Shared fixtures. The engine comes from DATABASE_URL (SQLite by default, PostgreSQL in CI too)."""

import json
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# A byte-identical copy of the project's golden files: a clone needs nothing beside it.
GOLDEN = PROJECT_ROOT / "tests" / "golden"


def patch_setting(monkeypatch: pytest.MonkeyPatch, name: str, value: object) -> None:
    """``monkeypatch.setattr(settings, name, value)``, seen by the settings accessors (infrastructure/conf.py), which
    monkeypatch's silence would leave on their cached copies (it sends no ``setting_changed``): each accessor's copy
    is dropped with the setting patched, and restored with it by ``monkeypatch.undo()``."""
    from django.conf import settings

    from infrastructure import conf

    monkeypatch.setattr(settings, name, value)
    for accessor in conf.ACCESSORS:
        monkeypatch.setattr(accessor, "cached", None)


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


GOLDEN_CASES = sorted(p.name.removesuffix(".request.json") for p in GOLDEN.glob("*.request.json"))
"""Every golden case (``<name>-<language>``): a request, its expected response, maybe its content bytes."""
GOLDEN_KEY = "pc_golden_0123456789abcdef0123456789abcdef"
"""The API key the golden fixtures create."""


def golden_prepare(client, case: str):
    """Loads the case's fixture and posts its request bytes, as the golden key, to the public prepare endpoint."""
    from django.core.management import call_command

    language = case.rsplit("-", 1)[1]
    call_command("load_context_fixtures", str(GOLDEN / f"fixture-{language}.json"), verbosity=0)
    return client.post(
        "/v1/context/prepare",
        data=(GOLDEN / f"{case}.request.json").read_bytes(),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {GOLDEN_KEY}",
    )


@pytest.fixture(autouse=True)
def _no_resident_copies_from_other_tests():
    """Every test starts like a fresh worker: no copies of postings, no tail sizes and no counted vector lag in memory
    (a rolled-back test database reuses primary keys, so another test's copy would be one more stale copy to notice)."""
    from artifacts.recall import resident
    from artifacts.recall.engine import query
    from artifacts.recall.vectors import lag

    resident.COPIES.clear()
    query.TAIL_SIZES.clear()
    lag._LAG_COUNTED.clear()
    yield
    resident.COPIES.clear()
    query.TAIL_SIZES.clear()
    lag._LAG_COUNTED.clear()


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


@pytest.fixture(scope="session")
def embedding_server():
    """tests/embedding_server.py run as a real process for the session: its base URL (``http://127.0.0.1:P/v1``)."""
    from tests.embedding_server import running_server

    with running_server() as base_url:
        yield base_url


def embedding_endpoint_settings(settings, base_url: str, **options) -> None:
    """Point ``settings.POWERCONTEXT_EMBEDDINGS`` at the test embedding server at ``base_url`` (``options``: any
    other key of the setting, e.g. ``write_wait``)."""
    from tests.embedding_server import DIMENSION

    settings.POWERCONTEXT_EMBEDDINGS = {
        **settings.POWERCONTEXT_EMBEDDINGS,
        "provider": "endpoint",
        "url": base_url,
        "model": "stub-embedder",
        "dimension": DIMENSION,
        **options,
    }


def hybrid_endpoint_settings(settings, base_url: str, **options) -> None:
    """Hybrid recall through the test embedding server at ``base_url``, with a query timeout a busy machine never
    reaches (``options``: any other key of ``POWERCONTEXT_EMBEDDINGS``)."""
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    embedding_endpoint_settings(settings, base_url, **{"query_timeout": 10.0, **options})


@pytest.fixture
def dense_caches_cleared():
    """The process's query-vector cache and resident vector copies empty before and after the test."""
    from artifacts.recall.vectors import query, resident

    query.QUERY_CACHE.clear()
    resident.MATRICES.clear()
    yield
    query.QUERY_CACHE.clear()
    resident.MATRICES.clear()


MODULE_WIDE_SCOPES = frozenset({"module", "package", "class"})


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks (its worker's hook of the same name)
def pytest_collection_modifyitems(items):
    """Under ``--dist loadgroup`` (``python3 dev.py test``), the tests of a module that sets something up once for
    the module (a module-scoped fixture: servers, a migrated database, collected static files) run on one xdist
    worker, so that it is set up once, not once per worker. Everything else is shared out test by test; nothing
    else needs a worker of its own (ports are free ports, files are under tmp_path, databases are per process)."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(
            definitions[-1].scope in MODULE_WIDE_SCOPES
            for name in info.names_closure
            if (definitions := info.name2fixturedefs.get(name))
        ):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
