"""The hashes that make stored history verifiable: each revision's content hash and the chain linking revisions.

One home for every place that computes them: the write services (inside the writing transaction), the fixture
loader's checks, the benchmark bulk loads, ``manage.py verify_history``, the admin's revision page (which recompute
them from the rows) and migration 0022, which verifies every stored chain under encoding 1
(``revision_chain_v1_sha256``) and writes it again under encoding 2. Each encoding's function is frozen by its number:
what a chain covers changes only with a new encoding, a new function and a migration that writes it. Migration 0011
holds a frozen copy of encoding 1 for its backfill (``tests/unit/vocabulary/test_history.py`` proves the copy
computes the same).

A revision's ``chain_sha256`` (encoding 2, ``revision_chain_sha256``) covers every byte an exact read, a history page,
a prepare or the selection policy serves or uses of the revision and where it sits: the artifact's identity, the
revision number, its predecessor's chain hash (``""`` for revision 1), its content hash, its author, its time, the
hash of its texts (``texts_sha256``: title, summary and body, stored beside them, since the content hash of an
experience, a profile or a body-only family covers its body only), and the exact entry versions born (each with its
ids, content hash, slot and time) and retired in it. Changing any stored row of an artifact's history, even with the
triggers lifted, breaks the chain from there on unless every later hash is recomputed too, which an anchor kept
elsewhere (``verify_history --write-anchor``) reveals. An erasure blanks texts but keeps every hash: the chain of an
erased revision still verifies from its stored ``texts_sha256`` and ``content_sha256``.

Entry versions are objects with ``entry_id``, ``version_id`` and ``content_sha256`` attributes, and optionally
``conflict_key`` (model instances, or any record with those names; a record without it has no slot); the chain
(encoding 2) also reads a born version's ``created_at``.

A version's conflict slot (``conflict_key``, seeds/003) is covered by the content hash only when it has one: its item
in ``added`` is then ``[entry_id, version_id, content_sha256, conflict_key]`` instead of the three-item form, so a
version without a slot hashes exactly as before slots existed (served content hashes never change).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from vocabulary.escaping import json_literal
from vocabulary.text import canonical_json, sha256_text

CHAIN_ENCODING = 2
"""The version of the chain's canonical encoding: a change to what it covers needs a new number (and a migration
that verifies the stored chains under the old one and writes the new one, as 0022 does from 1 to 2)."""

ERASED_HASHES = ("content_sha256", "texts_sha256")
"""The mismatches an erasure explains: a revision's blanked texts no longer hash to these, which its chain keeps."""


class EntryVersionRef(Protocol):
    """An entry version as the hashes read it: a model row, or a frozen dataclass (read-only attributes)."""

    @property
    def entry_id(self) -> str: ...

    @property
    def version_id(self) -> str: ...

    @property
    def content_sha256(self) -> str: ...


def _added_item(version: EntryVersionRef) -> list[str]:
    """A born version as the hashes cover it: its slot appended only when it has one (see the module docstring)."""
    item = [version.entry_id, version.version_id, version.content_sha256]
    slot = getattr(version, "conflict_key", None)
    return item if slot is None else [*item, slot]


def entry_changes(added: Iterable[EntryVersionRef], retired: Iterable[EntryVersionRef]) -> dict[str, list[list[str]]]:
    """The entry versions born and retired in one revision, in the order every hash over them uses.

    A retired version is named by its ids only: its body and slot were covered by the revision that bore it.
    """
    return {
        "added": sorted(_added_item(v) for v in added),
        "retired": sorted([v.entry_id, v.version_id] for v in retired),
    }


def memory_revision_sha256(previous: str, added: Iterable[EntryVersionRef], retired: Iterable[EntryVersionRef]) -> str:
    """A memory revision's content hash: a chain over the changes, chained to the previous revision's content hash.

    O(change) to compute, yet it identifies the whole live set.
    """
    return sha256_text(canonical_json({"previous": previous, **entry_changes(added, retired)}))


def topic_memory_sha256(*, title: str | None, summary: str | None, body: str | None) -> str:
    """The content hash of a topic-memory revision (title, summary and optional detail)."""
    return sha256_text(canonical_json({"title": title, "summary": summary, "body": body}))


def single_text_sha256(*, family: str, body: str | None, title: str | None, summary: str | None) -> str:
    """The content hash of a revision of any family but memory, from its stored texts."""
    if family == "topic_memory":
        return topic_memory_sha256(title=title, summary=summary, body=body)
    return sha256_text(body if body is not None else "")


def revision_chain_v1_sha256(
    *,
    previous_chain: str,
    scope_id: str,
    family: str,
    artifact_id: str,
    revision: int,
    content_sha256: str,
    author: str,
    born: Iterable[EntryVersionRef] = (),
    retired: Iterable[EntryVersionRef] = (),
) -> str:
    """The chain hash of one revision under encoding 1 (before migration 0022): its identity, number, predecessor,
    content hash, author and entry changes, not its time nor the texts its content hash leaves out."""
    return sha256_text(
        canonical_json(
            {
                "encoding": 1,
                "scope_id": scope_id,
                "family": family,
                "artifact_id": artifact_id,
                "revision": revision,
                "previous": previous_chain,
                "content_sha256": content_sha256,
                "author": author,
                **entry_changes(born, retired),
            }
        )
    )


def history_time_text(value: datetime.datetime) -> str:
    """A stored time as the chain covers it: UTC, ISO 8601 with microseconds (what both engines store)."""
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def revision_texts_sha256(*, title: str | None, summary: str | None, body: str | None) -> str:
    """The hash of every text a revision serves (``texts_sha256``), whatever its family (memory: all null)."""
    return topic_memory_sha256(title=title, summary=summary, body=body)


def _chained_item(version: EntryVersionRef) -> list[str | None]:
    """A born version as the chain (encoding 2) covers it: its ids, content hash, slot (or null) and time."""
    return [
        version.entry_id,
        version.version_id,
        version.content_sha256,
        getattr(version, "conflict_key", None),
        history_time_text(version.created_at),  # type: ignore[attr-defined]  # a stored version has one; the ref protocol omits it
    ]


def revision_chain_sha256(
    *,
    previous_chain: str,
    scope_id: str,
    family: str,
    artifact_id: str,
    revision: int,
    content_sha256: str,
    texts_sha256: str | None,
    author: str,
    created_at: datetime.datetime,
    born: Iterable[EntryVersionRef] = (),
    retired: Iterable[EntryVersionRef] = (),
) -> str:
    """The chain hash of one revision (encoding 2; see the module's docstring for what it covers). A born version's
    ``created_at`` is read besides its ids, content hash and slot."""
    return sha256_text(
        canonical_json(
            {
                "encoding": CHAIN_ENCODING,
                "scope_id": scope_id,
                "family": family,
                "artifact_id": artifact_id,
                "revision": revision,
                "previous": previous_chain,
                "content_sha256": content_sha256,
                "texts_sha256": texts_sha256,
                "author": author,
                "created_at": history_time_text(created_at),
                "added": sorted(_chained_item(v) for v in born),  # version ids are unique: never compares a null
                "retired": sorted([v.entry_id, v.version_id] for v in retired),
            }
        )
    )


@dataclass(frozen=True)
class StoredRevision:
    """One revision's columns as stored, for recomputing its hashes."""

    revision: int
    body: str | None
    title: str | None
    summary: str | None
    content_sha256: str
    author: str
    entries_born: int | None
    entries_retired: int | None
    chain_sha256: str | None
    created_at: datetime.datetime
    texts_sha256: str | None


@dataclass(frozen=True)
class Mismatch:
    """One stored value that differs from what the rows recompute to."""

    what: str
    stored: object
    computed: object

    def __str__(self) -> str:
        return f"{self.what}: stored {self.stored}, recomputed {self.computed}"


def revision_mismatches(
    *,
    scope_id: str,
    family: str,
    artifact_id: str,
    stored: StoredRevision,
    previous_content: str,
    previous_chain: str,
    born: Sequence[EntryVersionRef],
    retired: Sequence[EntryVersionRef],
) -> list[Mismatch]:
    """What of one revision differs from its recomputation: its content hash (memory: chained to
    ``previous_content`` over ``born`` and ``retired``), the hash of its texts, its declared counts, and its link to
    ``previous_chain`` (which covers its time, its author and the born versions' times and slots).

    O(that revision): every link of a chain is checked against its stored predecessor, so one changed row shows
    where it is.
    """
    if family == "memory":
        content = memory_revision_sha256(previous_content, born, retired)
    else:
        content = single_text_sha256(family=family, body=stored.body, title=stored.title, summary=stored.summary)
    chain = revision_chain_sha256(
        previous_chain=previous_chain,
        scope_id=scope_id,
        family=family,
        artifact_id=artifact_id,
        revision=stored.revision,
        content_sha256=stored.content_sha256,
        texts_sha256=stored.texts_sha256,
        author=stored.author,
        created_at=stored.created_at,
        born=born,
        retired=retired,
    )
    texts = revision_texts_sha256(title=stored.title, summary=stored.summary, body=stored.body)
    found = [
        Mismatch("content_sha256", stored.content_sha256, content),
        Mismatch("texts_sha256", stored.texts_sha256, texts),
        Mismatch("entries born", stored.entries_born or 0, len(born)),
        Mismatch("entries retired", stored.entries_retired or 0, len(retired)),
        Mismatch("chain_sha256", stored.chain_sha256, chain),
    ]
    return [m for m in found if m.stored != m.computed]


def entry_version_mismatch(version: EntryVersionRef, body: str) -> Mismatch | None:
    """The entry version's stored content hash against its body's, or None when they agree."""
    computed = sha256_text(body)
    if computed == version.content_sha256:
        return None
    name = f"{json_literal(version.entry_id)}@{json_literal(version.version_id)}"
    return Mismatch(f"entry {name} content_sha256", version.content_sha256, computed)


ERASURE_ENCODING = 1
"""The version of the erasure chain's canonical encoding."""


def erased_digest(hashes: Iterable[str]) -> str:
    """What several erased rows were: the SHA-256 over their content hashes, sorted (one row: its own hash)."""
    hashes = sorted(hashes)
    return hashes[0] if len(hashes) == 1 else sha256_text(canonical_json(hashes))


def erasure_chain_sha256(
    *,
    previous: str,
    sequence: int,
    kind: str,
    scope_id: str,
    family: str | None,
    artifact_id: str | None,
    revision: int | None,
    entry_id: str | None,
    version_id: str | None,
    rows_erased: int,
    erased_sha256: str,
    revisions_through: int | None,
    versions_through: int | None,
    reason: str,
    erased_by: str,
    erased_at: str,
) -> str:
    """The chain hash of one erasure record: every column of it, chained to the previous record's hash (``""`` for
    the first), so that no record can be changed, removed or put in another place without the chain showing it."""
    return sha256_text(
        canonical_json(
            {
                "encoding": ERASURE_ENCODING,
                "previous": previous,
                "sequence": sequence,
                "kind": kind,
                "scope_id": scope_id,
                "family": family,
                "artifact_id": artifact_id,
                "revision": revision,
                "entry_id": entry_id,
                "version_id": version_id,
                "rows_erased": rows_erased,
                "erased_sha256": erased_sha256,
                "revisions_through": revisions_through,
                "versions_through": versions_through,
                "reason": reason,
                "erased_by": erased_by,
                "erased_at": erased_at,
            }
        )
    )
