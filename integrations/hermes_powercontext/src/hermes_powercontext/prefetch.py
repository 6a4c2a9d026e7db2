"""The turn's prepared context: the prepare started when the turn starts, awaited in ``prefetch`` and
injected as the provider's planned memory block.

The provider:

- sends ``assembly`` only when its configuration has an ``assembly`` object; otherwise the request omits it
  (legacy output). It sends ``selection`` (server-side memory selection) likewise only when configured. A
  change of configuration applies from the next turn when ``freeze_per_turn`` is on;
- starts the prepare when the turn starts (the producer) and waits for it in ``prefetch`` (the consumer);
  both build the key with :func:`powercontext_client.prefetch_key`, so text prepared for another query,
  family set, order, limit, budget or selection is never reused;
- validates the response with the strict four-field validator against its own byte budget and returns the
  content unchanged. Content that Hermes' own context fencing would alter is not injected at all;
- fails open: a timeout, a connection error, any 4xx or 5xx, or an invalid response is logged and the
  turn continues without context. Nothing is retried, and a 422 is never retried with a relaxed request;
- plans what it injects with the client's prompt planner: the prepared text is the optional segment
  ``powercontext_memory``, kept whole or dropped whole under ``prompt_max_tokens`` / ``prompt_max_chars``
  (tokens counted by the constructor's ``token_counter``, by default the client's offline estimate). The
  segment decisions of the last turn are :attr:`PowerContextMemoryProvider.segment_decisions` and are logged
  (DEBUG; a dropped segment at WARNING);
- holds the prepared text in a :class:`powercontext_client.RecalledMemory` for the turn's scope and query,
  cleared when a turn with another query starts, when a prepare fails, on a session switch and on
  shutdown, so one question's memory is never injected for another.

Hermes 0.19 lets a memory provider shape only its two own contributions: ``system_prompt_block()`` (static
text in the system prompt, built once per session) and what ``prefetch`` returns (fenced by Hermes inside
the API copy of the user message). It offers no hook to see, order or budget the rest of the prompt, so the
planner here budgets the provider's own block, not Hermes' whole prompt.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from powercontext_client import InvalidRequest, PowerContextError, PrepareSettings, RecalledMemory, SegmentDecision

from .config import ProviderConfig
from .memory_block import plan_memory_block

if TYPE_CHECKING:  # only to declare the provider's state that the hooks use
    from collections.abc import Hashable
    from concurrent.futures import ThreadPoolExecutor

    from powercontext_client import PowerContextClient, PrefetchCache, PromptPlan, TokenCounter, TurnSettings

logger = logging.getLogger("hermes_powercontext")


def _host_keeps_bytes(content: str) -> bool:
    """Whether Hermes' ``<memory-context>`` wrapper injects ``content`` byte for byte."""
    try:
        from agent.memory_manager import sanitize_context
    except ImportError:  # pragma: no cover - every supported Hermes has it
        return True
    unchanged: bool = sanitize_context(content) == content  # Hermes ships no types: its result is Any
    return unchanged


class TurnPrefetch:
    """The prefetch hooks of :class:`~hermes_powercontext.provider.PowerContextMemoryProvider`.

    They use the provider's configuration, client, turn settings, prefetch cache, executor and recalled
    memory, set up by its constructor and ``initialize``.
    """

    _config: ProviderConfig | None
    _client: PowerContextClient | None
    _settings: TurnSettings | None
    _cache: PrefetchCache
    _executor: ThreadPoolExecutor | None
    _session_id: str
    _turn: Hashable | None
    _token_counter: TokenCounter
    _recalled: RecalledMemory
    last_plan: PromptPlan | None
    last_injected: str | None

    # --- the planned memory block ---------------------------------------------------------------

    @property
    def recalled_memory(self) -> RecalledMemory:
        """The prepared text of the current question (its scope and query), or nothing."""
        return self._recalled

    @property
    def segment_decisions(self) -> tuple[SegmentDecision, ...]:
        """The prompt-segment decisions of the last ``prefetch`` (empty when it failed before planning)."""
        return self.last_plan.decisions if self.last_plan is not None else ()

    # --- prefetch -------------------------------------------------------------------------------

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        if self._settings is None:
            return
        turn = (self._session_id, turn_number)
        self._turn = turn
        settings = self._settings.start_turn(turn)
        self._cache.retain_turn(turn)
        config = self._config
        if config is not None:
            # A new question: the previous one's memory must not outlive it, even if this prepare fails.
            self._recalled.retain(config.scope_id, message if isinstance(message, str) else "")
        if config and config.prefetch_on_turn_start and self._executor and isinstance(message, str) and message.strip():
            key = settings.key(scope_id=config.scope_id, turn=turn, query=message)
            with contextlib.suppress(RuntimeError):  # the executor was shut down
                self._cache.submit(key, lambda: self._prepare(message, settings), self._executor)

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        config, settings = self._config, self._settings
        if config is None or settings is None or self._client is None or not query or not query.strip():
            return ""
        self.last_plan = None  # this call's plan, or none when it fails before planning
        # A host that never signals turns gets a fresh identity per call: nothing is reused.
        turn = self._turn if self._turn is not None else ("untracked", uuid.uuid4().hex)
        turn_settings = settings.for_turn(turn)
        key = turn_settings.key(scope_id=config.scope_id, turn=turn, query=query)
        try:
            content = self._cache.resolve(
                key, lambda: self._prepare(query, turn_settings), timeout=config.timeout_seconds + 1.0
            )
        except InvalidRequest as exc:
            self._recalled.clear()
            logger.error(
                "PowerContext refused the prepare request (HTTP 422, not retried); continuing without context: %s %s",
                exc,
                [f"{field.path}: {field.message}" for field in exc.fields],
            )
            return ""
        except (PowerContextError, FutureTimeout, ValueError) as exc:
            self._recalled.clear()
            logger.warning("PowerContext prefetch failed; continuing without context: %s", exc)
            return ""
        except Exception:  # noqa: BLE001 - a memory provider must never break the turn
            self._recalled.clear()
            logger.exception("PowerContext prefetch failed unexpectedly; continuing without context")
            return ""
        if content and not _host_keeps_bytes(content):
            self._recalled.clear()
            logger.warning(
                "PowerContext content contains Hermes memory-context fencing that the host would strip; "
                "not injecting it, since its bytes must reach the model unchanged"
            )
            return ""
        self._recalled.install(config.scope_id, query, content or None)
        try:
            block = self._planned_block(config, query)
        except Exception:  # noqa: BLE001 - e.g. a faulty token counter; a memory provider must never break the turn
            logger.exception("PowerContext prompt planning failed; continuing without context")
            return ""
        if block:
            self.last_injected = block
        return block

    def _planned_block(self, config: ProviderConfig, query: str) -> str:
        """The memory block of this scope and query as planned under the provider's budgets ('' if dropped)."""
        self.last_plan = plan = plan_memory_block(
            self._recalled.segment(config.scope_id, query),
            max_chars=config.prompt_max_chars,
            max_tokens=config.prompt_max_tokens,
            token_counter=self._token_counter,
        )
        return plan.text

    def _prepare(self, query: str, settings: PrepareSettings) -> str | None:
        """One prepare call (no retries); the validated content, or None when empty."""
        assert self._client is not None and self._config is not None
        result = self._client.prepare_context(
            self._config.scope_id,
            query,
            max_bytes=settings.max_bytes,
            assembly=settings.assembly,
            selection=settings.selection,
        )
        return result.content

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """No-op: a prepare is keyed by its turn's query, which is known only when that turn starts."""

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "", **kwargs: Any) -> None:
        """No-op: PowerContext stores curated, cited knowledge through explicit writes, not transcripts."""
