"""PowerContext as a Model Context Protocol server (``powercontext-mcp``), thin over ``powercontext_client``."""

from .server import build_server, citation_lines, citation_uri, remember_idempotency_key

__version__ = "0.1.0"

__all__ = ["build_server", "citation_lines", "citation_uri", "remember_idempotency_key"]
