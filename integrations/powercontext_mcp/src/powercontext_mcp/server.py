"""The PowerContext MCP server: the tools and resource templates of :mod:`powercontext_mcp.tools`, registered on an
SDK server over one :class:`powercontext_client.PowerContextClient`.

The tools are module-level functions whose first parameter is the server's :class:`~powercontext_mcp.tools.ServerState`
(the client and the default scope); :func:`build_server` binds it and registers each on a fresh server, so two servers
in one process share nothing but code.
"""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver import MCPServer, ResourceSecurity
from powercontext_client import PowerContextClient

from .rendering import coded_sdk_errors
from .tools import (
    CONFLICT_KEY_MAX_CHARACTERS,
    FAIL_OPEN,
    IDENTIFIER_MAX_CHARACTERS,
    RESOURCES,
    TOOLS,
    ServerState,
    bind_state,
)

__all__ = [
    "CONFLICT_KEY_MAX_CHARACTERS",
    "FAIL_OPEN",
    "IDENTIFIER_MAX_CHARACTERS",
    "IDENTITIES",
    "INSTRUCTIONS",
    "NAME",
    "LogLevel",
    "build_server",
]

NAME = "powercontext"
INSTRUCTIONS = (
    "PowerContext holds this project's memories and experiences as immutable, cited revisions. Call "
    "prepare_context with the user's request before answering: it returns Markdown context whose every entry "
    "carries Scope / Artifact / Entry citation lines. To look something up yourself, search_memories returns ranked "
    "hits with the same citation lines. To quote or check an entry exactly, pass those lines to "
    "resolve_citation (or their fields to read_cited): they return the exact cited bytes, never a newer head. "
    "Save a durable fact with remember; give expected_head_revision to write only if nobody wrote in between. "
    "list_scopes names the scopes this key may read (and which of them it may write)."
)
# Identities are opaque strings sent as query parameters, never paths: the SDK's path-traversal checks (which
# would refuse an artifact named "..") do not apply.
IDENTITIES = ResourceSecurity(
    exempt_params=frozenset(("scope_id", "family", "artifact_id", "entry_id", "entry_version"))
)

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


def build_server(
    client: PowerContextClient, *, default_scope: str | None = None, log_level: LogLevel = "WARNING"
) -> MCPServer:
    """The MCP server over ``client``; ``default_scope`` is used when a call names no scope."""
    server = MCPServer(
        NAME, instructions=INSTRUCTIONS, version="0.1.0", log_level=log_level, middleware=[coded_sdk_errors]
    )
    state = ServerState(client, default_scope)
    for spec in TOOLS:
        server.add_tool(
            bind_state(spec.function, state),
            name=spec.function.__name__,
            title=spec.title,
            description=spec.description,
            annotations=spec.annotations,
        )
    for resource in RESOURCES:
        register = server.resource(resource.template, name=resource.name, mime_type="text/plain", security=IDENTITIES)
        register(bind_state(resource.function, state))
    return server
