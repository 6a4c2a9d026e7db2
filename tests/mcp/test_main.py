"""``powercontext-mcp``'s command line: the key is required, and a log line that would carry it is redacted."""

import logging

import pytest

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

from powercontext_mcp.main import REDACTED, _RedactKey, main  # noqa: E402

KEY = "pc_secret_0123456789abcdef0123456789abcdef"


def test_a_log_line_carrying_the_key_is_written_redacted():
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "sent %s to %s", (f"Bearer {KEY}", "x"), None)
    assert _RedactKey(KEY).filter(record)
    assert record.getMessage() == f"sent Bearer {REDACTED} to x"


def test_without_a_key_the_server_does_not_start_and_says_why(monkeypatch):
    monkeypatch.delenv("POWERCONTEXT_API_KEY", raising=False)
    with pytest.raises(SystemExit, match="set POWERCONTEXT_API_KEY"):
        main([])


@pytest.fixture
def started(monkeypatch):
    """Runs ``main([])`` with a stand-in client and server; returns the server URL and default scope it used."""
    for name in ("POWERCONTEXT_URL", "POWERCONTEXT_SCOPE", "POWERCONTEXT_BASE_URL", "POWERCONTEXT_SCOPE_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("POWERCONTEXT_API_KEY", KEY)
    used = {}

    class Client:
        def __init__(self, url, key):
            used["url"] = url

        def close(self):
            pass

    class Server:
        def __init__(self, client, *, default_scope, log_level):
            used["scope"] = default_scope

        def run(self, *args, **kwargs):
            pass

    monkeypatch.setattr("powercontext_mcp.main.PowerContextClient", Client)
    monkeypatch.setattr("powercontext_mcp.main.build_server", Server)

    def start() -> tuple[str, str | None]:
        main([])
        return used["url"], used["scope"]

    return start


def test_the_server_and_scope_come_from_powercontext_url_and_powercontext_scope(started, monkeypatch, caplog):
    monkeypatch.setenv("POWERCONTEXT_URL", "http://pc.test:8000")
    monkeypatch.setenv("POWERCONTEXT_SCOPE", "project:demo")
    assert started() == ("http://pc.test:8000", "project:demo")
    assert "deprecated" not in caplog.text


def test_without_them_the_local_server_is_used_and_a_call_must_name_its_scope(started):
    assert started() == ("http://127.0.0.1:8000", None)


def test_the_deprecated_names_still_configure_the_server_and_are_warned_about(started, monkeypatch, caplog):
    monkeypatch.setenv("POWERCONTEXT_BASE_URL", "http://old.test:8000")
    monkeypatch.setenv("POWERCONTEXT_SCOPE_ID", "project:old")
    with pytest.warns(DeprecationWarning):
        assert started() == ("http://old.test:8000", "project:old")
    assert "POWERCONTEXT_BASE_URL is deprecated: rename it to POWERCONTEXT_URL" in caplog.text
    assert "POWERCONTEXT_SCOPE_ID is deprecated: rename it to POWERCONTEXT_SCOPE" in caplog.text
