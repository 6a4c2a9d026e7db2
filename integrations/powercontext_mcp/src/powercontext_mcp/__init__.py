"""PowerContext as a Model Context Protocol server (``powercontext-mcp``), thin over ``powercontext_client``."""

from .remember import remember_idempotency_key
from .rendering import citation_lines, citation_uri
from .server import build_server

__version__ = "0.1.0"

__all__ = ["build_server", "citation_lines", "citation_uri", "remember_idempotency_key"]
