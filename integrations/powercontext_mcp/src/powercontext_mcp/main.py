"""``powercontext-mcp``: run the server over stdio (what desktop and CLI hosts launch) or streamable HTTP.

Configuration comes from the environment: ``POWERCONTEXT_URL`` (default http://127.0.0.1:8000),
``POWERCONTEXT_API_KEY`` (required) and ``POWERCONTEXT_SCOPE`` (the scope used when a call names none), read by
``powercontext_client.environment`` (which still reads the deprecated ``POWERCONTEXT_BASE_URL`` and
``POWERCONTEXT_SCOPE_ID`` for one release, with a logged warning).
The key is sent only as the ``Authorization`` header; it is never printed, and every log line is
redacted in case some library's message were to carry it.
"""

from __future__ import annotations

import argparse
import logging
import sys

from powercontext_client import PowerContextClient
from powercontext_client.environment import API_KEY, SCOPE, URL, read_variable

from .server import build_server

DEFAULT_URL = "http://127.0.0.1:8000"
REDACTED = "[POWERCONTEXT_API_KEY]"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _RedactKey(logging.Filter):
    """Replaces the API key in every log record's final message (the key never reaches a log)."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.key in message:
            record.msg, record.args = message.replace(self.key, REDACTED), None
        return True


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="powercontext-mcp", description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="streamable-http: port (default 8765)")
    parser.add_argument("--path", default="/mcp", help="streamable-http: endpoint path (default /mcp)")
    parser.add_argument(
        "--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"), help="to stderr (WARNING)"
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, read the environment, serve until the host disconnects (or Ctrl-C)."""
    args = _parser().parse_args(argv)
    key = read_variable(API_KEY)
    if not key:
        sys.exit(f"powercontext-mcp: set {API_KEY} (a PowerContext API key) in the environment")
    # One plain line per record on stderr (stdout is the stdio transport), redacted; configured before the
    # SDK's own basicConfig, which then leaves it alone, and before the other variables are read, so that a
    # deprecated name's warning is logged in this form.
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RedactKey(key))
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT, handlers=[handler])
    client = PowerContextClient(read_variable(URL) or DEFAULT_URL, key)
    server = build_server(client, default_scope=read_variable(SCOPE), log_level=args.log_level)
    try:
        if args.transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=args.host, port=args.port, streamable_http_path=args.path)
    except KeyboardInterrupt:
        pass
    finally:
        client.close()
