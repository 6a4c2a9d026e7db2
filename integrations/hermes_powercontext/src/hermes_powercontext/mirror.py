"""The mirroring of Hermes' memory writes into PowerContext memory entries.

The provider mirrors the writes of Hermes' built-in ``memory`` tool (``on_memory_write``) into PowerContext, unless
``write_memory`` is off: each Hermes target (``memory``, ``user``) is the memory artifact ``hermes-<target>``
of the configured scope, and each Hermes entry is one memory entry whose id is derived from its text
(:func:`memory_entry_id`). ``add`` creates that entry; ``replace`` and ``remove`` read the artifact's head,
find the one live entry containing Hermes' ``old_text`` (as Hermes itself does) and create the new entry and
retire the old one, each conditional on the head just read. Every write carries a fresh ``Idempotency-Key``
and is retried once with that same key after a timeout, a connection error or a 503, so a write whose answer
was lost is not doubled. A write that still fails, or that cannot be mirrored, is logged at WARNING with the
reason; the agent's turn always continues.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from powercontext_client import (
    Conflict,
    EntryVersion,
    NotFound,
    PowerContextError,
    ServiceUnavailable,
    Timeout,
    TransportError,
    WriteResult,
)

if TYPE_CHECKING:  # only to declare the provider's state that the hook uses
    import threading

    from powercontext_client import PowerContextClient

    from .config import ProviderConfig

logger = logging.getLogger("hermes_powercontext")
T = TypeVar("T")

MIRRORED_PREFIX = "hermes-"
MEMORY_FAMILY = "memory"
# Failures after which the server may or may not have written: the one retry reuses the Idempotency-Key.
_RETRIED_ERRORS = (Timeout, TransportError, ServiceUnavailable)


def memory_artifact_id(target: str) -> str:
    """The memory artifact mirroring one Hermes memory target: ``memory`` -> ``hermes-memory``."""
    return MIRRORED_PREFIX + (target or "memory")


def memory_entry_id(text: str) -> str:
    """The entry id of a mirrored Hermes memory entry, derived from its text.

    The same text is always the same entry, so a second ``add`` of a text that is already live is refused
    by PowerContext (409) instead of being stored twice.
    """
    return MIRRORED_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class _NotMirrored(Exception):
    """A Hermes memory write that cannot be mirrored; the message says why."""


def _entry_containing(entries: Sequence[EntryVersion], old_text: str) -> EntryVersion | None:
    """The live entry whose body contains ``old_text`` (Hermes' own rule), None if none does.

    Several entries with one identical body count as one (the first), as in Hermes; several different
    bodies are ambiguous and raise :class:`_NotMirrored` rather than retiring a guess.
    """
    matches = [entry for entry in entries if old_text in entry.body]
    if len({entry.body for entry in matches}) > 1:
        raise _NotMirrored(f"{len(matches)} different entries contain old_text {old_text!r}; none is retired")
    return matches[0] if matches else None


class MemoryWriteMirror:
    """The ``on_memory_write`` hook of :class:`~hermes_powercontext.provider.PowerContextMemoryProvider`.

    It reads the provider's configuration, client, agent context and write lock, set up by ``initialize``.
    """

    _config: ProviderConfig | None
    _client: PowerContextClient | None
    _agent_context: str
    _write_lock: threading.Lock

    def on_memory_write(self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None) -> None:
        """Mirror one committed write of Hermes' built-in memory tool into PowerContext.

        Runs in the tool call (so writes land in Hermes' order and before the turn goes on), bounded by
        ``timeout_seconds`` per request. Never raises: a write that is not mirrored is logged at WARNING
        with the reason. Only the primary agent's writes are mirrored (a cron, subagent or flush agent's
        are skipped, as Hermes asks of providers).
        """
        config = self._config
        if config is None or not config.write_memory:
            return
        what = f"Hermes memory {action!r} on {target!r}"
        if self._agent_context != "primary":
            logger.info("%s not mirrored to PowerContext: written by a %s agent", what, self._agent_context)
            return
        if self._client is None:
            logger.warning("%s not mirrored to PowerContext: the provider is not initialized", what)
            return
        try:
            with self._write_lock:  # one mirrored write at a time: each reads the head the previous one left
                self._mirror(action, target, (content or "").strip(), str((metadata or {}).get("old_text") or ""))
        except _NotMirrored as exc:
            logger.warning("%s not mirrored to PowerContext: %s", what, exc)
        except PowerContextError as exc:
            logger.warning("%s not mirrored to PowerContext: %s: %s", what, type(exc).__name__, exc)
        except Exception:  # noqa: BLE001 - a memory provider must never break the turn
            logger.exception("%s not mirrored to PowerContext: unexpected error", what)

    def _mirror(self, action: str, target: str, text: str, old_text: str) -> None:
        """The PowerContext writes of one Hermes memory write (``text`` and ``old_text`` as Hermes stores them)."""
        assert self._client is not None and self._config is not None
        client, scope_id = self._client, self._config.scope_id
        artifact_id = memory_artifact_id(target)
        old_text = old_text.strip()
        if action == "add":
            if not text:
                raise _NotMirrored("the entry is empty")
            self._create(artifact_id, text, head=None, action=action)
            return
        if action not in ("replace", "remove"):
            raise _NotMirrored(f"unknown action {action!r}")
        if not old_text:
            raise _NotMirrored("Hermes gave no old_text, so the entry to change cannot be found")
        if action == "replace" and not text:
            raise _NotMirrored("the new entry is empty")
        head, entries = self._head(artifact_id)
        old = _entry_containing(entries, old_text)
        if action == "replace":
            new_id = memory_entry_id(text)
            if old is not None and old.id == new_id:
                logger.info("Hermes memory replace on %r keeps the same text; PowerContext is unchanged", target)
                return
            # The new entry first, then the old one retired: a failure in between leaves one entry too many
            # rather than none.
            if all(entry.id != new_id for entry in entries):
                created = self._create(artifact_id, text, head=head, action=action)
                head = created.citation.revision if created is not None else head
        if old is None:
            done = "the new entry is written, but " if action == "replace" else ""
            raise _NotMirrored(
                f"{done}no live entry of {artifact_id!r} contains old_text {old_text!r}, so none is retired "
                "(was it written before the mirror was on?)"
            )
        result = self._write(
            action,
            "retire",
            lambda key: client.remove_memory_entry(
                scope_id, old.id, artifact_id=artifact_id, expected_head_revision=head, idempotency_key=key
            ),
        )
        logger.info("Hermes memory %s on %r retired PowerContext entry %s: %s", action, target, old.id, result.citation)

    def _create(self, artifact_id: str, text: str, *, head: int | None, action: str) -> WriteResult | None:
        """Create the entry of ``text`` (conditional on ``head`` unless None).

        Unconditionally, a 409 can only mean that this very text is live already: that is success, and None.
        """
        assert self._client is not None and self._config is not None
        client, scope_id = self._client, self._config.scope_id
        entry_id = memory_entry_id(text)
        try:
            result = self._write(
                action,
                "create",
                lambda key: client.create_memory_entry(
                    scope_id,
                    entry_id,
                    text,
                    artifact_id=artifact_id,
                    expected_head_revision=head,
                    idempotency_key=key,
                ),
            )
        except Conflict:
            if head is not None:  # conditional: the head moved, so what was read is stale
                raise
            # Without a head condition the only conflict is that this very text is live already.
            logger.info("Hermes memory %s: entry %s of %r is already in PowerContext", action, entry_id, artifact_id)
            return None
        logger.info("Hermes memory %s mirrored to PowerContext: %s", action, result.citation)
        return result

    def _head(self, artifact_id: str) -> tuple[int, list[EntryVersion]]:
        """The head revision of the mirrored artifact and its live entries (0 and none before its first write)."""
        assert self._client is not None and self._config is not None
        client, scope_id = self._client, self._config.scope_id
        try:
            page = self._retrying(lambda: client.artifact_history(scope_id, MEMORY_FAMILY, artifact_id, limit=1))
        except NotFound:  # never written (an unreadable scope fails the write that follows, with its reason)
            return 0, []
        if not page.revisions:
            return 0, []
        head = page.revisions[0].citation.revision
        # Every live entry, page by page (bounded: the client refuses a revision of more than DEFAULT_MAX_ENTRIES).
        revision = self._retrying(lambda: client.read_exact_memory_revision(scope_id, artifact_id, head))
        return head, list(revision.entries or [])

    def _write(self, action: str, step: str, call: Callable[[str], WriteResult]) -> WriteResult:
        """One PowerContext write under a fresh Idempotency-Key (reused by its one retry)."""
        key = f"hermes-{action}-{step}-{uuid.uuid4().hex}"
        return self._retrying(lambda: call(key))

    @staticmethod
    def _retrying(call: Callable[[], T]) -> T:
        """``call()``, once more after a timeout, a connection error or a 503; any other error at once."""
        try:
            return call()
        except _RETRIED_ERRORS as exc:
            logger.info("PowerContext request failed (%s: %s); retrying once", type(exc).__name__, exc)
            return call()
