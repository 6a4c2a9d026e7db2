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
