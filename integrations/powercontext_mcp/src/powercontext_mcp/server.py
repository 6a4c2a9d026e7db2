"""The PowerContext MCP server: tools and resource templates over :class:`powercontext_client.PowerContextClient`.

Every call goes through the Python client (no second copy of the HTTP API). Failures become MCP tool errors
whose text starts with PowerContext's error code (``not_found: …``) and whose structured content is the API's
error shape; nothing a call does ends the session. ``prepare_context`` fails open: when PowerContext cannot be
reached (or answers 5xx) it returns an empty context and says why, as a host's pre-turn hook expects.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import secrets
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.shared.uri_template import UriTemplate
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from powercontext_client import (
    APIError,
    Citation,
    HistoryPage,
    InvalidResponse,
    NotFound,
    PowerContextClient,
    PowerContextError,
    ServerError,
    ServiceUnavailable,
    TransportError,
)
from pydantic import BaseModel, Field

from .citations import CitationTextError, parse_pasted_citation
from .outputs import EntryOut, PreparedOut, ReadOut, RememberOut, ScopeOut, ScopesOut

logger = logging.getLogger(__name__)

NAME = "powercontext"
INSTRUCTIONS = (
    "PowerContext holds this project's memories and experiences as immutable, cited revisions. Call "
    "prepare_context with the user's request before answering: it returns Markdown context whose every entry "
    "carries Scope / Artifact / Entry citation lines. To quote or check an entry exactly, pass those lines to "
    "resolve_citation (or their fields to read_cited): they return the exact cited bytes, never a newer head. "
    "Save a durable fact with remember; give expected_head_revision to write only if nobody wrote in between. "
    "list_scopes names the scopes this key may read (and which of them it may write)."
)
URI_PREFIX = "powercontext://scope/"
REVISION_TEMPLATE = URI_PREFIX + "{scope_id}/{family}/{artifact_id}/revision/{revision}"
ENTRY_TEMPLATE = REVISION_TEMPLATE.replace("{family}", "memory") + "/entry/{entry_id}/version/{entry_version}"
IDEMPOTENCY_PREFIX = "mcp-remember-"
REMEMBER_LOOKBACK = 20
"""How many of the memory's newest revisions ``remember`` reads to tell a retried call from a new one."""
# Identities are opaque strings sent as query parameters, never paths: the SDK's path-traversal checks (which
# would refuse an artifact named "..") do not apply.
IDENTITIES = ResourceSecurity(
    exempt_params=frozenset(("scope_id", "family", "artifact_id", "entry_id", "entry_version"))
)
IDENTIFIER_MAX_CHARACTERS = 200
"""The longest scope, artifact, entry or version id (and family) a tool takes: the server's
``MAX_IDENTIFIER_CHARACTERS`` (``vocabulary/limits.py``, which an installed host cannot import; a test holds the two
equal). A longer one is refused by the tool's schema before any request is sent: the server would refuse it too."""
CONFLICT_KEY_MAX_CHARACTERS = 200
"""The server's ``MAX_CONFLICT_KEY_CHARACTERS``, likewise."""
# The prepare failures a host's pre-turn hook must survive: PowerContext unreachable, overloaded or broken.
FAIL_OPEN = (TransportError, ServiceUnavailable, ServerError, InvalidResponse)

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


# --- rendering ----------------------------------------------------------------------------------


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


def _result(text: str, structured: BaseModel) -> CallToolResult:
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


def _error_of(exc: PowerContextError | CitationTextError) -> CallToolResult:
    if isinstance(exc, APIError):
        fields = [{"path": field.path, "message": field.message} for field in exc.fields]
        return error_result(exc.code, exc.message, fields)
    if isinstance(exc, CitationTextError):
        return error_result("invalid_request", str(exc), [{"path": "text", "message": str(exc)}])
    if isinstance(exc, TransportError):
        return error_result("unreachable", f"PowerContext could not be reached: {exc}")
    return error_result("invalid_response", str(exc))


async def _coded_sdk_errors(ctx: Any, call_next: Callable[[Any], Any]) -> Any:
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


def _guarded(call: Callable[[], CallToolResult]) -> CallToolResult:
    try:
        return call()
    except (PowerContextError, CitationTextError) as exc:
        return _error_of(exc)


def _read_out(read: Any) -> tuple[str, ReadOut]:
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


def remember_base_revision(
    history: HistoryPage | None, *, entry_id: str, body: str, conflict_key: str | None, update: bool
) -> int:
    """The memory head a ``remember`` call is made against, from the memory's newest revisions (None: no memory).

    The head, unless the newest revision that touched the entry wrote exactly this call's version (this body and
    conflict key, updated or created as asked): the call then repeats that write (a retry whose answer was lost,
    or the same words again while they are still live) and was made against the revision before it, so it
    derives that write's idempotency key and is answered that write's citation, never writing twice.
    """
    if history is None or not history.revisions:
        return 0
    head = history.revisions[0].citation.revision
    for revision in history.revisions:  # newest first
        added = [version for version in revision.added or () if version.id == entry_id]
        retired = [version for version in revision.retired or () if version.id == entry_id]
        if not added and not retired:
            continue
        # The entry's last change: a write of this very version (an update retires the one it replaces).
        same = len(added) == 1 and (added[0].body, added[0].conflict_key) == (body, conflict_key)
        if same and bool(retired) == update:
            return revision.citation.revision - 1  # revisions are numbered one after another
        return head
    return head


def scope_readable(client: PowerContextClient, scope_id: str) -> bool:
    """Whether the client's key may read ``scope_id``: ``GET /v1/scopes`` lists it when asked for it alone.

    One request whatever the number of the key's scopes (paging through them all would grow with them).
    """
    return any(scope.scope_id == scope_id for scope in client.list_scopes(scope_id=scope_id, limit=1).scopes)


def remember_idempotency_key(arguments: dict[str, Any]) -> str:
    """``mcp-remember-`` and the sha256 of the call's arguments as canonical JSON: the same call writes once.

    ``arguments`` includes the head the call is made against (:func:`remember_base_revision`): the same words
    after the memory changed are a new write, not a replay of an older one.
    """
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return IDEMPOTENCY_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# --- the server ---------------------------------------------------------------------------------


def build_server(
    client: PowerContextClient, *, default_scope: str | None = None, log_level: LogLevel = "WARNING"
) -> MCPServer:
    """The MCP server over ``client``; ``default_scope`` is used when a call names no scope."""
    server = MCPServer(
        NAME, instructions=INSTRUCTIONS, version="0.1.0", log_level=log_level, middleware=[_coded_sdk_errors]
    )

    def tool(**options):
        # The description is the docstring made the same on every Python: 3.13 dedents docstrings when it compiles
        # them, older versions keep the indentation, and the SDK would publish either as it found it.
        def register(function):
            return server.tool(description=inspect.cleandoc(function.__doc__), **options)(function)

        return register

    def scope_of(scope_id: str | None) -> str:
        if scope_id:
            return scope_id
        if default_scope:
            return default_scope
        raise CitationTextError("scope_id is required (no POWERCONTEXT_SCOPE is configured)")

    def read(
        scope_id: str,
        family: str,
        artifact_id: str,
        revision: int,
        entry_id: str | None,
        version: str | None,
        entries_after: str | None = None,
    ):
        if (entry_id is None) != (version is None):
            raise CitationTextError("entry_id and entry_version go together (or both left out)")
        if entries_after is not None and entry_id is not None:
            raise CitationTextError("entries_after pages a memory revision's entries: not with entry_id")
        identities = {"scope_id": scope_id, "family": family, "artifact_id": artifact_id, "entry_id": entry_id}
        for name, value in (identities | {"entry_version": version}).items():
            # A pasted citation or a resource URI is read past the tools' schemas: refused here, never sent.
            if value is not None and len(value) > IDENTIFIER_MAX_CHARACTERS:
                raise CitationTextError(f"{name} is longer than {IDENTIFIER_MAX_CHARACTERS} characters")
        if entry_id is not None:
            return client.read_exact_entry_version(scope_id, artifact_id, revision, entry_id, version)
        return client.read_exact_revision(scope_id, family, artifact_id, revision, entries_after=entries_after)

    @tool(
        title="Prepare PowerContext context",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def prepare_context(
        query: Annotated[str, Field(min_length=1, max_length=8192, description="The user's request, verbatim")],
        scope_id: Annotated[
            str | None,
            Field(
                max_length=IDENTIFIER_MAX_CHARACTERS, description="Scope to prepare from; default POWERCONTEXT_SCOPE"
            ),
        ] = None,
        max_bytes: Annotated[int, Field(ge=512, le=32768, description="Byte budget of the prepared text")] = 8000,
    ) -> Annotated[CallToolResult, PreparedOut]:
        """Prepare cited Markdown context (memories, experiences) for a query, within a byte budget.

        The text is returned exactly as PowerContext prepared it; each entry carries Scope / Artifact / Entry
        citation lines that resolve_citation reads back exactly. If PowerContext cannot be reached the result
        is an empty context that says why (the turn goes on without it).
        """

        def call() -> CallToolResult:
            try:
                prepared = client.prepare_context(scope_of(scope_id), query, max_bytes=max_bytes, assembly={})
            except FAIL_OPEN as exc:
                reason = f"PowerContext unavailable, no context prepared: {exc}"
                logger.warning("prepare_context failed open: %s", reason)
                return _result(reason, PreparedOut(status="empty", content=None, content_bytes=0, unavailable=reason))
            out = PreparedOut(status=prepared.status, content=prepared.content, content_bytes=prepared.content_bytes)
            text = prepared.content if prepared.content is not None else "PowerContext has no context for this query."
            return _result(text, out)

        return _guarded(call)

    @tool(
        title="Remember in PowerContext",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    def remember(
        entry_id: Annotated[
            str, Field(min_length=1, max_length=IDENTIFIER_MAX_CHARACTERS, description="Stable id of the memory entry")
        ],
        body: Annotated[str, Field(min_length=1, max_length=65536, description="The fact to remember")],
        scope_id: Annotated[
            str | None,
            Field(max_length=IDENTIFIER_MAX_CHARACTERS, description="Scope to write; default POWERCONTEXT_SCOPE"),
        ] = None,
        update: Annotated[bool, Field(description="Replace the entry's live version instead of creating it")] = False,
        expected_head_revision: Annotated[
            int | None, Field(ge=0, description="Write only if this is still the memory's head (else conflict)")
        ] = None,
        artifact_id: Annotated[str, Field(min_length=1, max_length=IDENTIFIER_MAX_CHARACTERS)] = "memory",
        conflict_key: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=CONFLICT_KEY_MAX_CHARACTERS,
                description="The fact slot this version states, e.g. preference:automation-language",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, RememberOut]:
        """Write one memory entry as a new immutable revision and return its exact citation.

        create (default) fails with conflict if the entry exists; update=true writes its next version.
        With expected_head_revision the write happens only if the memory's head is still that revision.
        conflict_key names the fact the entry states (one winner per slot when context is selected): give it
        only when the user's words name that fact; it is stored exactly as given and never changes.
        A retried identical call is written once (its idempotency key is derived from the arguments and the
        memory's head); the same words after the entry changed are written again.
        """

        def call() -> CallToolResult:
            scope = scope_of(scope_id)
            arguments = {
                "scope_id": scope,
                "artifact_id": artifact_id,
                "entry_id": entry_id,
                "body": body,
                "update": update,
                "expected_head_revision": expected_head_revision,
            }
            if conflict_key is not None:  # only when given: a call without one keeps the key it always had
                arguments["conflict_key"] = conflict_key
            # Arguments alone would make "Go" after "Go" → "Python" a replay of the first "Go" (the server keeps
            # keys 24 hours): its old citation answered, nothing written, "Python" left live. The key also names
            # the head the call is made against, read first.
            try:
                history = client.artifact_history(scope, "memory", artifact_id, limit=REMEMBER_LOOKBACK)
            except NotFound:  # no such memory yet, or a key that may not read the scope
                history = None
                if not scope_readable(client, scope):
                    # Blind to the head, a key of the arguments could replay an older write of the same words:
                    # each call is its own write instead (a retry writes again; a create's retry is a conflict).
                    arguments["call"] = secrets.token_hex(16)
            arguments["based_on_revision"] = remember_base_revision(
                history, entry_id=entry_id, body=body, conflict_key=conflict_key, update=update
            )
            key = remember_idempotency_key(arguments)
            write = client.update_memory_entry if update else client.create_memory_entry
            result = write(
                scope,
                entry_id,
                body,
                artifact_id=artifact_id,
                expected_head_revision=expected_head_revision,
                idempotency_key=key,
                conflict_key=conflict_key,
            )
            out = RememberOut(
                citation=result.citation,
                content_sha256=result.content_sha256,
                idempotency_key=key,
            )
            return _result(f"Remembered as:\n{citation_lines(out.citation)}", out)

        return _guarded(call)

    @tool(title="Read a cited revision exactly", annotations=ToolAnnotations(read_only_hint=True))
    def read_cited(
        scope_id: Annotated[str, Field(min_length=1, max_length=IDENTIFIER_MAX_CHARACTERS)],
        family: Annotated[
            str, Field(min_length=1, max_length=IDENTIFIER_MAX_CHARACTERS, description="memory, experience, profile, …")
        ],
        artifact_id: Annotated[str, Field(min_length=1, max_length=IDENTIFIER_MAX_CHARACTERS)],
        revision: Annotated[int, Field(ge=1, le=2**31 - 1)],
        entry_id: Annotated[
            str | None,
            Field(max_length=IDENTIFIER_MAX_CHARACTERS, description="Memory: the cited entry (with entry_version)"),
        ] = None,
        entry_version: Annotated[
            str | None, Field(max_length=IDENTIFIER_MAX_CHARACTERS, description="Memory: the cited entry version")
        ] = None,
        entries_after: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=IDENTIFIER_MAX_CHARACTERS,
                description="Memory revision: the previous page's next_entries_after",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, ReadOut]:
        """Read the exact revision (or memory entry version) a citation names: its stored bytes, never the head.

        The text is the stored body unchanged; not_found if that exact revision or version does not exist.
        A memory revision lists its live entries a page at a time: pass next_entries_after as entries_after.
        """
        return _guarded(
            lambda: _result(
                *_read_out(read(scope_id, family, artifact_id, revision, entry_id, entry_version, entries_after))
            )
        )

    @tool(title="Resolve pasted citation lines", annotations=ToolAnnotations(read_only_hint=True))
    def resolve_citation(
        text: Annotated[
            str,
            Field(
                min_length=1,
                max_length=100_000,
                description="The Scope / Artifact / Entry lines of one prepared entry (or one legacy JSON item)",
            ),
        ],
    ) -> Annotated[CallToolResult, ReadOut]:
        """Resolve citation lines pasted from prepared context to the exact bytes they cite (never the head)."""

        def call() -> CallToolResult:
            cited = parse_pasted_citation(text)
            found = read(
                cited.scope_id, cited.family, cited.artifact_id, cited.revision, cited.entry_id, cited.entry_version
            )
            return _result(*_read_out(found))

        return _guarded(call)

    @tool(title="List the readable PowerContext scopes", annotations=ToolAnnotations(read_only_hint=True))
    def list_scopes(
        after: Annotated[
            str | None,
            Field(min_length=1, max_length=IDENTIFIER_MAX_CHARACTERS, description="The previous page's next_after"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="Scopes per page")] = 100,
    ) -> Annotated[CallToolResult, ScopesOut]:
        """List the scopes this API key may read (by scope id): title, whether it may write, readable references.

        A reference to a scope the key may not read is never named; all_references_readable is then false.
        authority is the tier PowerContext's operators gave the scope (current_turn: a turn scope).
        When next_after is not null, call again with after=next_after for the next page.
        """

        def call() -> CallToolResult:
            page = client.list_scopes(after=after, limit=limit)
            out = ScopesOut(
                scopes=[ScopeOut(**scope.model_dump()) for scope in page.scopes], next_after=page.next_after
            )
            return _result(scopes_text(out), out)

        return _guarded(call)

    def resource_text(scope_id: str, family: str, artifact_id: str, revision: str, entry_id=None, version=None) -> str:
        if not revision.isdigit() or not 1 <= int(revision) <= 2**31 - 1:
            raise ResourceError(f"invalid_request: revision must be a whole number from 1, got {revision!r}")
        try:
            text, _ = _read_out(read(scope_id, family, artifact_id, int(revision), entry_id, version))
        except (PowerContextError, CitationTextError) as exc:
            error = _error_of(exc)
            raise ResourceError(error.content[0].text) from None
        return text

    @server.resource(REVISION_TEMPLATE, name="cited-revision", mime_type="text/plain", security=IDENTITIES)
    def cited_revision(scope_id: str, family: str, artifact_id: str, revision: str) -> str:
        """One exact revision of an artifact (percent-encode each identity): its stored body."""
        return resource_text(scope_id, family, artifact_id, revision)

    @server.resource(ENTRY_TEMPLATE, name="cited-entry-version", mime_type="text/plain", security=IDENTITIES)
    def cited_entry_version(scope_id: str, artifact_id: str, revision: str, entry_id: str, entry_version: str) -> str:
        """One memory entry version live at an exact revision: its stored body."""
        return resource_text(scope_id, "memory", artifact_id, revision, entry_id, entry_version)

    return server
