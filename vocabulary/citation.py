"""The exact identity of what prepared content cites, and a recalled candidate carrying one.

One frozen type serves the assembly core (origins and decisions), recall (candidates), the citation
parser (what an operator pastes), the operator tools and the fixture loader.
"""

from __future__ import annotations

from dataclasses import dataclass

from .escaping import artifact_label, json_literal, short_identity


@dataclass(frozen=True, slots=True)
class Citation:
    """Exact identity of an immutable revision; for memory optionally one entry version live in it.

    Prepared content always names the entry of a memory citation (see ``Candidate``); a memory
    citation without one denotes the memory revision itself, which lists its live entry versions.
    """

    scope_id: str
    family: str
    artifact_id: str
    revision: int
    entry_id: str | None = None
    entry_version: str | None = None

    def __post_init__(self) -> None:
        has_entry = self.entry_id is not None
        if has_entry != (self.entry_version is not None):
            raise ValueError("entry_id and entry_version must be given together")
        if has_entry and self.family != "memory":
            raise ValueError("only memory citations name an entry")
        if isinstance(self.revision, bool) or not isinstance(self.revision, int) or self.revision < 1:
            raise ValueError("revision must be a positive integer")

    @property
    def has_entry(self) -> bool:
        return self.entry_id is not None

    def describe(self) -> str:
        """A one-line, visibly escaped description for messages."""
        text = f"revision {self.revision} of {artifact_label(self.family, self.artifact_id)}"
        text += f" in scope {json_literal(self.scope_id)}"
        if self.entry_id is not None and self.entry_version is not None:  # has_entry, both given together
            text += f", entry {short_identity(self.entry_id)} version {short_identity(self.entry_version)}"
        return text


@dataclass(frozen=True, slots=True)
class Candidate:
    """One recall hit in retrieval order, its body already projected for display.

    Recall sources return candidates; the assembly core selects among them. A memory candidate
    always names its entry version: prepared content cites entries, not whole memory revisions.
    """

    citation: Citation
    body: str | None
    # What the selection policy (seeds/003) ranks and arbitrates by; the RFC's assembly never reads them.
    score: float | None = None
    """The recall source's relevance score (higher is better), as the source computed it."""
    captured_at: str | None = None
    """When the cited revision (or memory entry version) was written: UTC, ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (one
    fixed width, so string order is time order and the pure core needs no clock type)."""
    conflict_key: str | None = None
    """The fact slot its writer declared (memory entries only), as stored; normalized by the policy."""

    def __post_init__(self) -> None:
        if (self.citation.family == "memory") != self.citation.has_entry:
            raise ValueError("a memory citation needs entry_id and entry_version; other families have none")
