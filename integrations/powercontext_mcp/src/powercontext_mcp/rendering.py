"""What the MCP tools answer: citations as text and as resource URIs, results, and errors coded like the API's.

A tool error's text starts with PowerContext's error code (``not_found: …``) and its structured content is the API's
error shape; the SDK's own refusals (arguments that fail a tool's schema, an unknown tool) are given a code too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from mcp.shared.uri_template import UriTemplate
from mcp_types import CallToolResult, TextContent
from powercontext_client import APIError, Citation, PowerContextError, TransportError
from pydantic import BaseModel

from .citations import CitationTextError
from .outputs import EntryOut, ReadOut, ScopesOut

logger = logging.getLogger(__name__)

URI_PREFIX = "powercontext://scope/"
REVISION_TEMPLATE = URI_PREFIX + "{scope_id}/{family}/{artifact_id}/revision/{revision}"
ENTRY_TEMPLATE = REVISION_TEMPLATE.replace("{family}", "memory") + "/entry/{entry_id}/version/{entry_version}"


def citation_lines(citation: Citation) -> str:
    """The citation as the Markdown metadata lines prepared content prints (resolve_citation reads them back)."""

    def literal(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    artifact = f"family={literal(citation.family)}, id={literal(citation.artifact_id)}, revision={citation.revision}"
    lines = [f"Scope: {literal(citation.scope_id)}", f"Artifact: {artifact}"]
    if citation.entry_id is not None:
        lines.append(f"Entry: id={literal(citation.entry_id)}, version={literal(citation.entry_version)}")
    return "\n".join(lines)


def citation_uri(citation: Citation) -> str:
    """The resource URI of the exact revision (or entry version) a citation names (the SDK's own encoding)."""
    variables = {name: str(getattr(citation, name)) for name in ("scope_id", "family", "artifact_id", "revision")}
    if citation.entry_id is None:
        return UriTemplate.parse(REVISION_TEMPLATE).expand(variables)
    variables |= {"entry_id": citation.entry_id, "entry_version": citation.entry_version}
    return UriTemplate.parse(ENTRY_TEMPLATE).expand(variables)


def tool_result(text: str, structured: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured.model_dump(mode="json"),
    )


def error_result(code: str, message: str, fields: list[dict[str, str]] | None = None) -> CallToolResult:
    """An MCP tool error carrying PowerContext's error code and message (the API's error shape)."""
    text = f"{code}: {message}"
    for field in fields or ():
        if field["message"] != message:  # a pasted citation's one problem is the message itself
            text += f"\n- {field['path']}: {field['message']}"
    logger.info("tool error %s: %s", code, message)
    error = {"code": code, "message": message, "fields": fields or []}
    content = [TextContent(type="text", text=text)]
    return CallToolResult(content=content, structured_content={"error": error}, is_error=True)


def error_of(exc: PowerContextError | CitationTextError) -> CallToolResult:
    if isinstance(exc, APIError):
        fields = [{"path": field.path, "message": field.message} for field in exc.fields]
        return error_result(exc.code, exc.message, fields)
    if isinstance(exc, CitationTextError):
        return error_result("invalid_request", str(exc), [{"path": "text", "message": str(exc)}])
    if isinstance(exc, TransportError):
        return error_result("unreachable", f"PowerContext could not be reached: {exc}")
    return error_result("invalid_response", str(exc))


async def coded_sdk_errors(ctx: Any, call_next: Callable[[Any], Any]) -> Any:
    """Tool errors the SDK itself answers (arguments that fail the schema, an unknown tool) carry a code too.

    Every tool returns its own errors already coded; a tool error without structured content can only come
    from the SDK, before the tool ran: the caller's request was invalid.
    """
    result = await call_next(ctx)
    if ctx.method != "tools/call":
        return result
    wire = result.model_dump(mode="json", by_alias=True) if isinstance(result, BaseModel) else result
    if isinstance(wire, dict) and wire.get("isError") and wire.get("structuredContent") is None:
        text = "".join(block.get("text", "") for block in wire.get("content", ()))
        return error_result("invalid_request", text)
    return result


def guarded(call: Callable[[], CallToolResult]) -> CallToolResult:
    try:
        return call()
    except (PowerContextError, CitationTextError) as exc:
        return error_of(exc)


def read_out(read: Any) -> tuple[str, ReadOut]:
    """(the exact text, the structured read) of an ExactRevision or ExactEntryVersion."""
    entry = getattr(read, "entry", None)
    if entry is not None:
        citation = Citation(
            scope_id=read.scope_id,
            family=read.family,
            artifact_id=read.artifact_id,
            revision=read.revision,
            entry_id=entry.id,
            entry_version=entry.version,
        )
        out = ReadOut(
            citation=citation, content_sha256=entry.content_sha256, body=entry.body, conflict_key=entry.conflict_key
        )
        return entry.body, out
    citation = Citation(
        scope_id=read.scope_id, family=read.family, artifact_id=read.artifact_id, revision=read.revision
    )
    entries = [EntryOut(**e.model_dump()) for e in read.entries] if read.entries is not None else None
    out = ReadOut(
        citation=citation,
        content_sha256=read.content_sha256,
        body=read.body,
        title=read.title,
        summary=read.summary,
        entries=entries,
        next_entries_after=read.next_entries_after if entries is not None else None,
    )
    if read.body is not None:
        return read.body, out
    exclude = {"citation", "content_sha256"} | ({"next_entries_after"} if entries is None else set())
    return json.dumps(out.model_dump(mode="json", exclude=exclude), ensure_ascii=False), out


def scopes_text(page: ScopesOut) -> str:
    """One line per scope: its id as a JSON string, read or read+write, its title and readable references."""
    if not page.scopes:
        return "This API key may read no scope."
    lines = []
    for scope in page.scopes:
        line = f"{json.dumps(scope.scope_id, ensure_ascii=False)}: {'read+write' if scope.can_write else 'read'}"
        if scope.title:
            line += f", title {json.dumps(scope.title, ensure_ascii=False)}"
        if scope.authority != "user_default":  # the default tier goes unsaid
            line += f", authority {scope.authority}"
        if scope.references:
            line += ", references " + ", ".join(json.dumps(r, ensure_ascii=False) for r in scope.references)
        if not scope.all_references_readable:
            line += " (and a reference this key may not read)"
        lines.append(line)
    if page.next_after is not None:
        lines.append(f"More: call list_scopes with after={json.dumps(page.next_after, ensure_ascii=False)}.")
    return "\n".join(lines)
