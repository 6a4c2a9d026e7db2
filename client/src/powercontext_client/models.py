"""Pydantic v2 models of the PowerContext HTTP contract (``openapi/powercontext.yaml``).

Request models refuse unknown fields, as the server does. ``tests/client/test_schema_sync.py`` compares the
JSON schema of these models with the committed OpenAPI components, so client and server cannot drift.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

PREPARED_CONTEXT_SCHEMA = "powercontext.prepared-context.v1"

Family = Literal["memory", "experience", "profile", "topic_memory", "skill", "handoff", "source"]
AssemblyFamily = Literal["memory", "experience", "profile", "topic_memory"]
ShowField = Literal["confidence", "recall_rank"]
ErrorCode = Literal[
    "invalid_request",
    "unauthenticated",
    "forbidden",
    "not_found",
    "conflict",
    "content_erased",
    "method_not_allowed",
    "service_unavailable",
    "internal_error",
]

# Upper bound of each family's ``limit`` (DESIGN §4); the lower bound is 1.
FAMILY_LIMIT_MAX: dict[str, int] = {"memory": 16, "experience": 8, "profile": 8, "topic_memory": 8}
# ``assembly: {}`` means exactly these sections.
DEFAULT_SECTIONS: tuple[tuple[str, int], ...] = (("memory", 6), ("experience", 2))
DEFAULT_FORMAT: Final = "markdown"
DEFAULT_MAX_BYTES = 8000
MIN_MAX_BYTES = 512
MAX_MAX_BYTES = 32768
MAX_SELECTION_TOKENS = 32768

# U+0000 is refused by the server in every string it stores or looks up (lone surrogates too: no pattern says so).
NUL_FREE = r"^[^\u0000]*$"
Identifier = Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=NUL_FREE)]
Body = Annotated[StrictStr, Field(min_length=1, max_length=65536, pattern=NUL_FREE)]
Revision = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]
# A memory entry's conflict slot: no control character, not only whitespace (the server's published pattern).
CONFLICT_KEY_PATTERN = (
    r"^[\u0020\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*"
    r"[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
)
ConflictKey = Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=CONFLICT_KEY_PATTERN)]


def _drop_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _omittable(**kwargs: Any) -> Any:
    """A field that is either given (and then never null) or left out of the request entirely.

    Its default ``None`` is never validated nor sent: requests are dumped with ``exclude_unset=True``,
    and an explicit ``None`` fails validation because the field's type does not admit it.
    """
    return Field(default=None, json_schema_extra=_drop_default, **kwargs)


class _Closed(BaseModel):
    """A request object: unknown fields are refused, as the server refuses them."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _Open(BaseModel):
    """A response object: fields a newer server adds are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


# --- prepare ---------------------------------------------------------------------------------


class MemorySection(_Closed):
    family: Literal["memory"]
    limit: Annotated[StrictInt, Field(ge=1, le=FAMILY_LIMIT_MAX["memory"])]


class ExperienceSection(_Closed):
    family: Literal["experience"]
    limit: Annotated[StrictInt, Field(ge=1, le=FAMILY_LIMIT_MAX["experience"])]


class ProfileSection(_Closed):
    family: Literal["profile"]
    limit: Annotated[StrictInt, Field(ge=1, le=FAMILY_LIMIT_MAX["profile"])]


class TopicMemorySection(_Closed):
    family: Literal["topic_memory"]
    limit: Annotated[StrictInt, Field(ge=1, le=FAMILY_LIMIT_MAX["topic_memory"])]


Section = Annotated[
    MemorySection | ExperienceSection | ProfileSection | TopicMemorySection,
    Field(discriminator="family"),
]


def _default_sections() -> list[Section]:
    return [
        MemorySection(family="memory", limit=6),
        ExperienceSection(family="experience", limit=2),
    ]


class AssemblyOptions(_Closed):
    """Opt in to Markdown V1 text. Fields left unset are not sent: ``AssemblyOptions()`` is sent as ``{}``."""

    format: Literal["markdown"] = DEFAULT_FORMAT
    sections: Annotated[list[Section], Field(max_length=4, json_schema_extra={"uniqueItems": True})] = Field(
        default_factory=_default_sections
    )
    show: Annotated[list[ShowField], Field(max_length=2, json_schema_extra={"uniqueItems": True})] = Field(
        default_factory=list
    )

    @field_validator("sections")
    @classmethod
    def _unique_families(cls, sections: list[Section]) -> list[Section]:
        seen: set[str] = set()
        for section in sections:
            if section.family in seen:
                raise ValueError(f'duplicate family "{section.family}"')
            seen.add(section.family)
        return sections

    @field_validator("show")
    @classmethod
    def _unique_show(cls, show: list[str]) -> list[str]:
        if len(set(show)) != len(show):
            raise ValueError("show entries must be unique")
        return show


SelectionPolicy = Literal["authority-v1"]


class SelectionOptions(_Closed):
    """Server-side memory selection of a prepare (issue 35); only allowed together with ``assembly``.

    ``min_score`` (a number >= 0) and ``max_tokens`` (the server's offline token units, >= 1) are sent only
    when given; ``policy`` is required.
    """

    policy: SelectionPolicy
    min_score: Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)] = _omittable()
    max_tokens: Annotated[StrictInt, Field(ge=1, le=MAX_SELECTION_TOKENS)] = _omittable()


# A query (prepare's and search's): contains a non-whitespace character, and no U+0000.
Query = Annotated[StrictStr, Field(min_length=1, max_length=8192, pattern=r"^\s*[^\s\u0000][^\u0000]*$")]


class PrepareContextRequest(_Closed):
    """The body of POST /v1/context/prepare. ``assembly`` may be omitted but is never null."""

    scope_id: Identifier
    query: Query
    max_bytes: Annotated[StrictInt, Field(ge=MIN_MAX_BYTES, le=MAX_MAX_BYTES)] = DEFAULT_MAX_BYTES
    # Unset: left out of the request (legacy output). An explicit None fails validation.
    assembly: AssemblyOptions = _omittable()
    # Unset: no selection policy (today's selection, byte for byte); the server refuses it without assembly.
    selection: SelectionOptions = _omittable()


class PreparedContext(BaseModel):
    """The four-field response; ``content`` is injected by the host unchanged."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: Literal["powercontext.prepared-context.v1"] = Field(alias="schema")
    status: Literal["ready", "empty"]
    content: StrictStr | None
    content_bytes: Annotated[StrictInt, Field(ge=0)]


# --- errors ----------------------------------------------------------------------------------


class ErrorField(_Open):
    path: str
    message: str


class ErrorDetail(_Open):
    code: ErrorCode
    message: str
    fields: list[ErrorField]


class Error(_Open):
    error: ErrorDetail


# --- exact reads and history -----------------------------------------------------------------


class EntryVersion(_Open):
    id: str
    version: str
    body: str
    content_sha256: str
    conflict_key: str | None
    """The fact slot its writer declared, exactly as written; None when none."""


class ExactRevision(_Open):
    """One exact revision as stored; memory lists a page of the entry versions live in it."""

    scope_id: str
    family: str
    artifact_id: str
    revision: int
    content_sha256: str
    created_at: datetime
    author: str
    body: str | None
    title: str | None
    summary: str | None
    entries: list[EntryVersion] | None = None
    """Memory only: one page of the entry versions live in the revision, in entry-id order."""
    next_entries_after: str | None = None
    """Memory only: pass as ``entries_after`` for the next page of entries; None on the last page."""


class ExactEntryVersion(_Open):
    """One memory entry version that was live in the cited revision."""

    scope_id: str
    family: str
    artifact_id: str
    revision: int
    entry: EntryVersion


class Citation(_Open):
    """The exact citation of a revision (and, for memory, of one entry version)."""

    scope_id: str
    family: str
    artifact_id: str
    revision: int
    entry_id: str | None = None
    entry_version: str | None = None


class WriteResult(_Open):
    citation: Citation
    content_sha256: str


class HistoryEntry(_Open):
    citation: Citation
    content_sha256: str
    author: str
    created_at: datetime
    added: list[EntryVersion] | None = None
    retired: list[EntryVersion] | None = None


class HistoryPage(_Open):
    revisions: list[HistoryEntry]
    next_before: int | None


class ReadableScope(_Open):
    """A scope the key may read; ``references`` names only the referenced scopes it may read too."""

    scope_id: str
    title: str
    authority: Literal["current_turn", "workspace_override", "user_default"]
    """The scope's authority tier (operator-set; ``user_default`` when none is): ``current_turn`` is a turn scope."""
    can_write: bool
    references: list[str]
    all_references_readable: bool


class ScopeListPage(_Open):
    scopes: list[ReadableScope]
    next_after: str | None


class ProfileCandidate(_Open):
    id: int
    scope_id: str
    artifact_id: str
    status: Literal["pending", "rejected", "committed"]
    committed_revision: int | None
    content_sha256: str


# --- memory search ---------------------------------------------------------------------------

SearchedFamily = Literal["memory", "experience"]
SEARCHED_FAMILIES: tuple[SearchedFamily, ...] = ("memory", "experience")
"""The families a search ranks, and its default (in that order)."""
SEARCH_POOL: dict[str, int] = {"memory": 16, "experience": 8}
"""A search's ``limit`` is at most the pool of every family it searches (the server's ``POOL_CAP``)."""
SEARCH_LIMIT_DEFAULT = 8
SEARCH_LIMIT_MAX = max(SEARCH_POOL.values())


class MemorySearchRequest(_Closed):
    """The body of POST /v1/memory/search. ``families`` and ``limit`` are sent only when given."""

    scope_id: Identifier
    query: Query
    families: Annotated[list[SearchedFamily], Field(min_length=1, max_length=len(SEARCHED_FAMILIES))] = Field(
        default_factory=lambda: list(SEARCHED_FAMILIES)
    )
    limit: Annotated[StrictInt, Field(ge=1, le=SEARCH_LIMIT_MAX)] = SEARCH_LIMIT_DEFAULT

    @field_validator("families")
    @classmethod
    def _unique_families(cls, families: list[str]) -> list[str]:
        if len(set(families)) != len(families):
            raise ValueError("each family at most once")
        return families

    @field_validator("limit")
    @classmethod
    def _within_the_pools(cls, limit: int, info: ValidationInfo) -> int:
        # ``families`` is in ``info.data`` when given and valid, or left to its default; not when it was refused.
        for family in info.data.get("families", ()):
            if limit > SEARCH_POOL[family]:
                raise ValueError(f"at most {SEARCH_POOL[family]} for {family} (its pool)")
        return limit


class SearchScores(_Open):
    """The scores recall ranked a hit by; ``None`` where a ranking did not return it."""

    lexical: float | None
    """The BM25 score; ``None``: found by meaning alone."""
    lexical_rank: int | None
    """Hybrid recall only: the hit's rank in BM25's ranking."""
    dense_rank: int | None
    """Hybrid recall only: its rank by cosine."""
    cosine: float | None
    """Hybrid recall only: its cosine to the query."""
    score: float | None
    """Hybrid recall only: the learned ranker's estimate of relevance (``ranked_by == "learned"``), or the fused
    score (``"fused"``)."""
    ranked_by: Literal["bm25", "fused", "learned"]


class SearchHit(_Open):
    """One ranked hit: its family, its 1-based rank within its family and scope, its exact citation and body."""

    family: SearchedFamily
    rank: Annotated[int, Field(ge=1)]
    citation: Citation
    body: str
    """The exact text the citation resolves to: untrusted content, never instructions."""
    scores: SearchScores


class SearchRecall(_Open):
    """What ranked the hits, and the scopes recall abstained in (``{family: [scope id]}``)."""

    mode: Literal["hybrid", "lexical"]
    ranker: Literal["learned", "hand"] | None
    """Hybrid recall only: the learned ranker or the hand-set fusion."""
    abstained: dict[str, list[str]]


class MemorySearchResult(_Open):
    """Ranked hits: per family asked (in that order), each scope's first ``limit``, the current scope first.

    ``status`` is ``empty`` exactly when there is no hit (recall abstained, or nothing matched).
    """

    status: Literal["ready", "empty"]
    recall: SearchRecall
    hits: list[SearchHit]

    @model_validator(mode="after")
    def _status_says_whether_there_are_hits(self) -> MemorySearchResult:
        if (self.status == "ready") != bool(self.hits):
            raise ValueError(f"status {self.status!r} with {len(self.hits)} hits")
        return self


# --- write requests --------------------------------------------------------------------------


class MemoryEntryWriteRequest(_Closed):
    """Create or update one memory entry (a new immutable version)."""

    scope_id: Identifier
    artifact_id: Identifier = "memory"
    expected_head_revision: Revision = _omittable()
    entry_id: Identifier
    version_id: Identifier = _omittable()
    body: Body
    conflict_key: ConflictKey = _omittable()


class MemoryEntryRemoveRequest(_Closed):
    """Remove one memory entry: its live version is retired in a new revision."""

    scope_id: Identifier
    artifact_id: Identifier = "memory"
    expected_head_revision: Revision = _omittable()
    entry_id: Identifier


class ExperienceWriteRequest(_Closed):
    """The next revision of an experience."""

    scope_id: Identifier
    artifact_id: Identifier
    expected_head_revision: Revision = _omittable()
    body: Body


class TopicMemoryWriteRequest(_Closed):
    """The next revision of a topic memory."""

    scope_id: Identifier
    artifact_id: Identifier
    expected_head_revision: Revision = _omittable()
    title: Annotated[StrictStr, Field(min_length=1, max_length=1000, pattern=NUL_FREE)]
    summary: Body
    body: Body = _omittable()


class ProfileCandidateProposeRequest(_Closed):
    """A proposed profile snapshot; it reaches prepare only once committed."""

    scope_id: Identifier
    artifact_id: Identifier = "profile"
    body: Body


class ProfileCandidateDecisionRequest(_Closed):
    expected_head_revision: Revision = _omittable()
