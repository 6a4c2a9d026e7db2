"""Query-period state of recalled memory (seeds/003, "运行时重新组装").

A host installs the prepared memory of one question, ``(scope_id, query)``, and asks for the memory prompt
segment when it assembles the prompt. The segment has text only for that same scope and query: asking for
any other pair, or :meth:`RecalledMemory.retain` with another pair at the start of a turn, clears the state
first, and the segment is then empty (the planner logs it as ``empty``: the memory segment is inactive).
The previous question's memory therefore never reaches the next question, nor another scope, even when the
next prepare fails or is still running.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .prompt import PromptSegment

MEMORY_SEGMENT = "recalled_memory"
"""The default name of the memory prompt segment."""


@dataclass(frozen=True)
class _Recalled:
    scope_id: str
    query: str
    text: str | None
    source: str | None


class RecalledMemory:
    """The prepared memory of one ``(scope_id, query)``, as an optional :class:`PromptSegment`.

    ``name``, ``priority`` and ``budget_priority`` shape the segment it yields (the memory is never
    required: a tight budget may drop it whole). Thread-safe.
    """

    def __init__(self, *, name: str = MEMORY_SEGMENT, priority: int = 0, budget_priority: int = 0) -> None:
        PromptSegment(name, "", priority=priority, budget_priority=budget_priority)  # validates the shape
        self._name = name
        self._priority = priority
        self._budget_priority = budget_priority
        self._state: _Recalled | None = None
        self._lock = threading.Lock()

    @property
    def key(self) -> tuple[str, str] | None:
        """The ``(scope_id, query)`` whose memory is held, or None."""
        with self._lock:
            state = self._state
        return None if state is None else (state.scope_id, state.query)

    def install(self, scope_id: str, query: str, text: str | None, *, source: str | None = None) -> None:
        """Hold ``text`` (a prepared ``content``; None when the prepare was empty) for this scope and query.

        Replaces whatever was held, for any scope and query. ``source`` defaults to ``powercontext:<scope_id>``.
        """
        if not isinstance(scope_id, str) or not isinstance(query, str):
            raise TypeError("scope_id and query must be strings")
        if text is not None and not isinstance(text, str):
            raise TypeError(f"text must be a string or None, not {type(text).__name__}")
        state = _Recalled(scope_id, query, text, source if source is not None else f"powercontext:{scope_id}")
        with self._lock:
            self._state = state

    def retain(self, scope_id: str, query: str) -> None:
        """Clear the held memory unless it is for exactly this scope and query (call when a turn starts)."""
        with self._lock:
            if self._state is not None and (self._state.scope_id, self._state.query) != (scope_id, query):
                self._state = None

    def segment(self, scope_id: str, query: str) -> PromptSegment:
        """The memory segment for this scope and query.

        Its text is empty (the planner logs it as ``empty`` and renders nothing) when nothing is held, when
        the held prepare was empty, or when the held memory is for another scope or query, which is then
        cleared.
        """
        with self._lock:
            state = self._state
            if state is not None and (state.scope_id, state.query) != (scope_id, query):
                self._state = state = None
        return PromptSegment(
            self._name,
            (state.text or "") if state is not None else "",
            required=False,
            priority=self._priority,
            budget_priority=self._budget_priority,
            source=state.source if state is not None else None,
        )

    def clear(self) -> None:
        """Forget the held memory (the question ended, the session switched, the host shut down)."""
        with self._lock:
            self._state = None
