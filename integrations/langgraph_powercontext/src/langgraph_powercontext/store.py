"""A LangGraph ``BaseStore`` over PowerContext memory, thin over ``powercontext_client``.

Mapping: the store is bound to one scope; a namespace is one memory artifact (its labels joined by ``.``, which
LangGraph forbids inside a label, so the mapping is one to one); a key is an entry id; a value is the entry body
as canonical JSON. ``put`` writes a create or update revision, conditional on the head it read; ``delete`` (and
``put(..., None)``) writes a removal revision, so the history remains. Reads come from one exact revision, and
every item carries the citation of the entry version it holds.

A namespace may be shared with other writers, who write plain text: ``("memory",)`` is the artifact the API's
memory writes and MCP ``remember`` default to, Hermes mirrors into ``("hermes-memory",)`` and ``("hermes-user",)``.
An entry whose body is not a JSON object is not the store's: ``get`` and ``search`` leave it out (logged once per
entry version and store), never raise on it. A ``put`` or ``delete`` of its key still replaces or removes it (a
new revision; the history keeps its text).

``search(namespace, query=…)`` ranks with PowerContext's memory search (``POST /v1/memory/search``, prepare's own
recall): it asks for the scope's best memory hits (16, the most one search returns) and keeps those of the
namespace's artifact, in the order recall ranked them (the search covers every memory artifact of the scope and of
the scopes it references, and cannot be narrowed to one artifact: the store filters the hits itself), then applies
``filter``, ``offset`` and ``limit``. Each item's ``score`` is the hit's: the learned ranker's estimate or the fused
score under hybrid recall, the BM25 score as given (not normalized) under lexical recall. A query that is empty or
only whitespace lists, as LangGraph's own stores do for an empty one.

What does not map, and is refused rather than faked: ``list_namespaces`` (the API has no listing of a scope's
artifacts; so ``search`` reads only the artifact its prefix names, not the namespaces below it), TTLs (revisions
never expire); a per-item ``index`` is ignored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from powercontext_client import Citation, ExactRevision, NotFound, PowerContextClient, SearchHit

FAMILY = "memory"
SEARCH_HITS = 16
"""The memory hits a query search asks for: the most one search returns for one family and scope."""

logger = logging.getLogger("langgraph_powercontext")


def canonical_json(value: dict[str, Any]) -> str:
    """The entry body of ``value``: sorted keys, no insignificant whitespace, non-ASCII kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def stored_value(body: str) -> dict[str, Any] | None:
    """The value an entry body holds if the store could have written it (a JSON object), else ``None``."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # not JSON; nested deeper than the parser goes
        return None
    return value if isinstance(value, dict) else None


def hit_score(hit: SearchHit) -> float | None:
    """A search hit's score as an item's: the learned or fused score under hybrid recall, else the BM25 score."""
    return hit.scores.score if hit.scores.score is not None else hit.scores.lexical


def artifact_id_for(namespace: tuple[str, ...]) -> str:
    """The memory artifact a namespace is stored in (labels joined by ``.``, which no label may contain)."""
    if not namespace or any(not label or "." in label for label in namespace):
        raise ValueError(f"namespace {namespace!r}: labels must be non-empty and must not contain '.'")
    return ".".join(namespace)


class CitedItem(SearchItem):
    """A store item that also carries the exact citation of the entry version it was read from.

    ``created_at`` and ``updated_at`` are both the time of the cited revision (the snapshot the read came from);
    the entry's own history is ``PowerContextClient.artifact_history``.
    """

    def __init__(self, *, citation: Citation, **fields: Any) -> None:
        super().__init__(**fields)
        self.citation = citation


class PowerContextStore(BaseStore):
    """A ``BaseStore`` whose namespaces are PowerContext memory artifacts of one scope."""

    supports_ttl = False

    def __init__(self, client: PowerContextClient, scope_id: str) -> None:
        self.client = client
        self.scope_id = scope_id
        self._skipped: set[tuple[str, str | None, str | None]] = set()  # (artifact, entry, version) already logged
        self._skipped_lock = threading.Lock()  # abatch runs batch in worker threads

    # --- reads ----------------------------------------------------------------------------

    def head(self, namespace: tuple[str, ...]) -> ExactRevision | None:
        """The head revision of the namespace's artifact, read exactly; ``None`` before its first write.

        Every live entry, page by page (bounded: the client refuses a revision of more than DEFAULT_MAX_ENTRIES).
        """
        artifact_id = artifact_id_for(namespace)
        try:
            page = self.client.artifact_history(self.scope_id, FAMILY, artifact_id, limit=1)
        except NotFound:
            return None
        if not page.revisions:
            return None
        revision = page.revisions[0].citation.revision
        return self.client.read_exact_memory_revision(self.scope_id, artifact_id, revision)

    def _items(self, namespace: tuple[str, ...], head: ExactRevision | None) -> list[CitedItem]:
        """The head's entries the store could have written, as items; any other entry is left out (logged once)."""
        if head is None:
            return []
        items = []
        for entry in head.entries or ():
            citation = Citation(
                scope_id=head.scope_id,
                family=FAMILY,
                artifact_id=head.artifact_id,
                revision=head.revision,
                entry_id=entry.id,
                entry_version=entry.version,
            )
            item = self._item(namespace, citation, entry.body, head.created_at)
            if item is not None:
                items.append(item)
        return items

    def _item(
        self,
        namespace: tuple[str, ...],
        citation: Citation,
        body: str,
        created_at: datetime,
        score: float | None = None,
    ) -> CitedItem | None:
        """The item of one cited entry version, or ``None`` (logged once) when its body is not the store's."""
        value = stored_value(body)
        if value is None:
            self._skipped_once(citation)
            return None
        return CitedItem(
            namespace=namespace,
            key=citation.entry_id,
            value=value,
            created_at=created_at,
            updated_at=created_at,
            score=score,
            citation=citation,
        )

    def _skipped_once(self, citation: Citation) -> None:
        seen = (citation.artifact_id, citation.entry_id, citation.entry_version)
        with self._skipped_lock:
            if seen in self._skipped:
                return
            self._skipped.add(seen)
        logger.warning(
            "skipping entry %s (version %s) of memory artifact %s in scope %s, revision %s: its body is not a "
            "JSON object, so another writer stored it; get and search leave it out",
            citation.entry_id,
            citation.entry_version,
            citation.artifact_id,
            citation.scope_id,
            citation.revision,
        )

    def _get(self, op: GetOp) -> Item | None:
        found = [item for item in self._items(op.namespace, self.head(op.namespace)) if item.key == op.key]
        return found[0] if found else None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query is not None and op.query.strip():
            items = self._ranked(op.namespace_prefix, op.query)
        else:
            items = self._items(op.namespace_prefix, self.head(op.namespace_prefix))
        wanted = op.filter or {}
        matching: list[SearchItem] = [item for item in items if all(item.value.get(k) == v for k, v in wanted.items())]
        return matching[op.offset : op.offset + op.limit]

    def _ranked(self, namespace: tuple[str, ...], query: str) -> list[CitedItem]:
        """The namespace's items among the scope's best memory hits for ``query``, in recall's order, scored.

        The search cannot be narrowed to one artifact: hits of the scope's other artifacts, and of the scopes it
        references, are dropped here. An unknown or unreadable scope reads as empty, as a list search does.
        """
        artifact_id = artifact_id_for(namespace)
        try:
            result = self.client.search_memories(self.scope_id, query, families=[FAMILY], limit=SEARCH_HITS)
        except NotFound:
            return []
        hits = [
            hit
            for hit in result.hits
            if hit.citation.scope_id == self.scope_id and hit.citation.artifact_id == artifact_id
        ]
        # A hit cites the revision it was read from (the head, unless a write raced the search): its time is the
        # items' created_at and updated_at, as for a list search.
        times = {
            revision: self.client.read_exact_revision(
                self.scope_id, FAMILY, artifact_id, revision, entries_limit=1
            ).created_at
            for revision in {hit.citation.revision for hit in hits}
        }
        items = []
        for hit in hits:
            item = self._item(namespace, hit.citation, hit.body, times[hit.citation.revision], hit_score(hit))
            if item is not None:
                items.append(item)
        return items

    # --- writes ---------------------------------------------------------------------------

    def _put(self, op: PutOp) -> None:
        if op.ttl is not None:
            raise NotImplementedError("PowerContext revisions do not expire: ttl is not supported")
        artifact_id = artifact_id_for(op.namespace)
        head = self.head(op.namespace)
        present = any(entry.id == op.key for entry in (head.entries or ())) if head else False
        expected = head.revision if head else None  # None: not sent (the client leaves unset fields out)
        if op.value is None:
            if present:
                self.client.remove_memory_entry(
                    self.scope_id, op.key, artifact_id=artifact_id, expected_head_revision=expected
                )
            return
        write = self.client.update_memory_entry if present else self.client.create_memory_entry
        # PutOp's value is typed a Mapping; LangGraph passes the dict it was given (json.dumps needs one).
        body = canonical_json(dict(op.value))
        write(self.scope_id, op.key, body, artifact_id=artifact_id, expected_head_revision=expected)

    # --- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run each operation in order (one HTTP exchange or a few per operation; no cross-operation atomicity)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                raise NotImplementedError("PowerContext has no listing of a scope's memory artifacts")
            else:
                raise TypeError(f"unknown store operation {op!r}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread (the client is synchronous)."""
        return await asyncio.to_thread(self.batch, list(ops))
