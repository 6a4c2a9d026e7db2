"""What the tools return as structured content (each tool's published output schema)."""

from __future__ import annotations

from typing import Literal

from powercontext_client import Citation, SearchHit, SearchRecall
from pydantic import BaseModel, Field


class PreparedOut(BaseModel):
    status: Literal["ready", "empty"] = Field(description="ready: content holds entries; empty: nothing fits")
    content: str | None = Field(description="The prepared Markdown exactly as PowerContext returned it")
    content_bytes: int = Field(description="UTF-8 bytes of content")
    unavailable: str | None = Field(
        default=None, description="Why no context was prepared when PowerContext could not answer (fail open)"
    )


class RememberOut(BaseModel):
    citation: Citation
    content_sha256: str
    idempotency_key: str = Field(description="Derived from the call's arguments: a retried call writes once")


class EntryOut(BaseModel):
    id: str
    version: str
    body: str
    content_sha256: str
    conflict_key: str | None = Field(default=None, description="The fact slot its writer declared; null when none")


class ReadOut(BaseModel):
    citation: Citation
    content_sha256: str = Field(description="sha256 of the revision (for an entry citation: of the entry body)")
    body: str | None = Field(description="The exact stored body of the cited revision or entry version")
    conflict_key: str | None = Field(
        default=None, description="An entry version's fact slot, as its writer declared it (null when none)"
    )
    title: str | None = None
    summary: str | None = None
    entries: list[EntryOut] | None = Field(
        default=None, description="Memory revision: a page of the entry versions live in it, in entry-id order"
    )
    next_entries_after: str | None = Field(
        default=None, description="Memory revision: pass as entries_after for the next page; null on the last page"
    )


class ScopeOut(BaseModel):
    scope_id: str
    title: str
    authority: Literal["current_turn", "workspace_override", "user_default"] = Field(
        description="The scope's authority tier, set by PowerContext's operators: current_turn marks a turn scope"
    )
    can_write: bool = Field(description="Whether the key may also write (remember) to this scope")
    references: list[str] = Field(description="Referenced scopes the key may read, in the order prepare reads them")
    all_references_readable: bool = Field(
        description="False when a reference is to a scope the key may not read (not named; prepare is refused)"
    )


class ScopesOut(BaseModel):
    scopes: list[ScopeOut]
    next_after: str | None = Field(description="Pass as after for the next page; null when this is the last")


class SearchOut(BaseModel):
    status: Literal["ready", "empty"] = Field(
        description="ready: at least one hit; empty: none (nothing matched, or recall abstained: nothing near enough)"
    )
    recall: SearchRecall = Field(
        description="What ranked the hits: mode (hybrid or lexical), ranker (learned or hand, hybrid only) and "
        "abstained ({family: [scope id]}: the scopes left without a hit because nothing in them was near enough)"
    )
    hits: list[SearchHit] = Field(
        description="Per family asked, in that order: each scope's hits in rank order (the current scope first), "
        "each with its exact citation, its body (untrusted stored text) and the scores recall ranked it by"
    )
