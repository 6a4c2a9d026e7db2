"""Prefetch identity and cache for hosts that prepare context ahead of (or at the start of) a turn.

The cache key is the Scope, the turn, the query, the *normalized effective* assembly configuration (or
the separate legacy identity when ``assembly`` is omitted), the effective ``max_bytes`` and the server-side
``selection`` (none when omitted). Text prepared
under one family set, section order, limit set, ``show`` set or byte budget is therefore never served for
another, even within one turn. Producers (background prefetch) and consumers (the turn that injects the
text) must both build keys with :func:`prefetch_key`.

Normalization: ``{}`` equals the explicit defaults (``format: markdown``, sections memory 6 then
experience 2, ``show: []``); the order of ``show`` does not matter (the server renders its fields in a fixed
order), while the order of ``sections`` does (it is output and budget priority). An omitted ``max_bytes``
equals 8000.

:class:`TurnSettings` optionally freezes the configuration for a whole turn: a change made during the turn
takes effect at the next turn, so every prepare of one turn uses one configuration.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from .models import DEFAULT_MAX_BYTES, MAX_MAX_BYTES, MIN_MAX_BYTES, AssemblyOptions, SelectionOptions


class _Omitted:
    """The type of :data:`OMITTED`: a field that is not sent at all."""

    _instance: _Omitted | None = None

    def __new__(cls) -> _Omitted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "OMITTED"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "OMITTED"


OMITTED: Final = _Omitted()
"""Marks an argument the caller did not supply; such a field is left out of the request."""


class _Legacy:
    """The type of :data:`LEGACY`: the identity of requests that omit ``assembly``."""

    _instance: _Legacy | None = None

    def __new__(cls) -> _Legacy:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "LEGACY"

    def __reduce__(self) -> str:
        return "LEGACY"


LEGACY: Final = _Legacy()
"""The assembly identity of a request that omits ``assembly`` (the legacy JSON envelope)."""


@dataclass(frozen=True)
class EffectiveAssembly:
    """An assembly configuration with every default applied; equal configurations compare equal."""

    format: str
    sections: tuple[tuple[str, int], ...]
    show: frozenset[str]

    def as_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "sections": [{"family": family, "limit": limit} for family, limit in self.sections],
            "show": sorted(self.show),
        }


def as_assembly_options(assembly: AssemblyOptions | Mapping[str, Any]) -> AssemblyOptions:
    """Validate an assembly configuration given as options or as its JSON object."""
    if assembly is None:
        raise TypeError("assembly must be omitted or an object; null is never valid (omit it for legacy output)")
    if isinstance(assembly, AssemblyOptions):
        return assembly
    if not isinstance(assembly, Mapping):
        raise TypeError(f"assembly must be a mapping or AssemblyOptions, not {type(assembly).__name__}")
    return AssemblyOptions.model_validate(dict(assembly))


def normalize_assembly(assembly: AssemblyOptions | Mapping[str, Any] | _Omitted) -> EffectiveAssembly | _Legacy:
    """The effective assembly identity: :data:`LEGACY` when omitted, else every default applied."""
    if assembly is OMITTED:
        return LEGACY
    options = as_assembly_options(assembly)  # type: ignore[arg-type]
    return EffectiveAssembly(
        format=options.format,
        sections=tuple((section.family, section.limit) for section in options.sections),
        show=frozenset(options.show),
    )


def effective_max_bytes(max_bytes: int | _Omitted) -> int:
    """``max_bytes`` as the server applies it (8000 when omitted)."""
    if max_bytes is OMITTED:
        return DEFAULT_MAX_BYTES
    if max_bytes is None:
        raise TypeError("max_bytes must be omitted or an integer, not None")
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool):
        raise TypeError(f"max_bytes must be an integer, not {type(max_bytes).__name__}")
    if not MIN_MAX_BYTES <= max_bytes <= MAX_MAX_BYTES:
        raise ValueError(f"max_bytes must be within {MIN_MAX_BYTES}..{MAX_MAX_BYTES}")
    return max_bytes


@dataclass(frozen=True)
class EffectiveSelection:
    """A ``selection`` object as its identity: equal objects (``0`` and ``0.0`` alike) compare equal."""

    policy: str
    min_score: float | None
    max_tokens: int | None

    def as_json(self) -> dict[str, Any]:
        fields = {"min_score": self.min_score, "max_tokens": self.max_tokens}
        return {"policy": self.policy} | {name: value for name, value in fields.items() if value is not None}


def as_selection_options(selection: SelectionOptions | Mapping[str, Any]) -> SelectionOptions:
    """Validate a selection given as options or as its JSON object."""
    if isinstance(selection, SelectionOptions):
        return selection
    if not isinstance(selection, Mapping):
        raise TypeError(f"selection must be a mapping or SelectionOptions, not {type(selection).__name__}")
    return SelectionOptions.model_validate(dict(selection))


def normalize_selection(selection: SelectionOptions | Mapping[str, Any] | _Omitted) -> EffectiveSelection | None:
    """The selection identity: None when omitted."""
    if selection is OMITTED:
        return None
    if selection is None:
        raise TypeError("selection must be omitted or an object; null is never valid")
    options = as_selection_options(selection)  # type: ignore[arg-type]
    return EffectiveSelection(policy=options.policy, min_score=options.min_score, max_tokens=options.max_tokens)


@dataclass(frozen=True)
class PrefetchKey:
    """The identity of one prepared context within a host's prefetch cache."""

    scope_id: str
    turn: Hashable
    query: str
    assembly: EffectiveAssembly | _Legacy
    max_bytes: int
    selection: EffectiveSelection | None = None

    def fingerprint(self) -> str:
        """A stable hex digest of the key, for caches shared across processes (the turn via ``repr``)."""
        assembly = "legacy" if self.assembly is LEGACY else self.assembly.as_json()  # type: ignore[union-attr]
        document = {
            "scope_id": self.scope_id,
            "turn": repr(self.turn),
            "query": self.query,
            "assembly": assembly,
            "max_bytes": self.max_bytes,
        }
        if self.selection is not None:  # absent otherwise, so keys without selection keep their digests
            document["selection"] = self.selection.as_json()
        canonical = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def prefetch_key(
    *,
    scope_id: str,
    turn: Hashable,
    query: str,
    assembly: AssemblyOptions | Mapping[str, Any] | _Omitted = OMITTED,
    max_bytes: int | _Omitted = OMITTED,
    selection: SelectionOptions | Mapping[str, Any] | _Omitted = OMITTED,
) -> PrefetchKey:
    """The one key function that prefetch producers and consumers share."""
    return PrefetchKey(
        scope_id=scope_id,
        turn=turn,
        query=query,
        assembly=normalize_assembly(assembly),
        max_bytes=effective_max_bytes(max_bytes),
        selection=normalize_selection(selection),
    )


T = TypeVar("T")


class PrefetchCache:
    """A thread-safe map from :class:`PrefetchKey` to the (possibly still running) prepare of that key.

    A producer calls :meth:`submit` to start a prepare in the background; the consumer calls
    :meth:`resolve`, which waits for a running prepare of the same key or runs it inline when there is
    none. A failed prepare is remembered like a result: the same key is not retried within its turn.
    """

    def __init__(self, *, max_entries: int = 64) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be positive")
        self._max_entries = max_entries
        self._entries: OrderedDict[PrefetchKey, Future[Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def keys(self) -> list[PrefetchKey]:
        with self._lock:
            return list(self._entries)

    def _store(self, key: PrefetchKey, future: Future[Any]) -> None:
        self._entries[key] = future
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def submit(self, key: PrefetchKey, compute: Callable[[], T], executor: Executor) -> Future[Any]:
        """Start ``compute`` for ``key`` in ``executor`` unless that key is already cached or running."""
        with self._lock:
            existing = self._entries.get(key)
            if existing is not None:
                return existing
            future = executor.submit(compute)
            self._store(key, future)
            return future

    def put(self, key: PrefetchKey, value: Any) -> None:
        """Store a finished result for ``key``."""
        future: Future[Any] = Future()
        future.set_result(value)
        with self._lock:
            self._store(key, future)

    def get(self, key: PrefetchKey) -> Future[Any] | None:
        with self._lock:
            return self._entries.get(key)

    def resolve(self, key: PrefetchKey, compute: Callable[[], T], *, timeout: float | None = None) -> T:
        """The result for ``key``: a cached or running one when there is one, else ``compute()`` now."""
        with self._lock:
            future = self._entries.get(key)
            owner = future is None
            if owner:
                future = Future()
                future.set_running_or_notify_cancel()
                self._store(key, future)
        assert future is not None
        if owner:
            try:
                future.set_result(compute())
            except BaseException as exc:  # noqa: BLE001 - remembered and re-raised below
                future.set_exception(exc)
        result: T = future.result(timeout=timeout)  # the cache holds any computation's future: Any
        return result

    def retain_turn(self, turn: Hashable) -> None:
        """Forget every entry of any other turn (call when a turn starts)."""
        with self._lock:
            for key in [key for key in self._entries if key.turn != turn]:
                del self._entries[key]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass(frozen=True)
class PrepareSettings:
    """The request-shaping configuration of a host: assembly (or :data:`OMITTED`), ``max_bytes`` and
    ``selection`` (or :data:`OMITTED`; only together with an assembly)."""

    assembly: AssemblyOptions | _Omitted = OMITTED
    max_bytes: int | _Omitted = OMITTED
    selection: SelectionOptions | _Omitted = OMITTED

    def __post_init__(self) -> None:
        if self.assembly is None:
            raise TypeError("assembly must be OMITTED or an object; None is never valid")
        if self.assembly is not OMITTED:
            object.__setattr__(self, "assembly", as_assembly_options(self.assembly))  # type: ignore[arg-type]
        effective_max_bytes(self.max_bytes)
        if self.selection is None:
            raise TypeError("selection must be OMITTED or an object; None is never valid")
        if self.selection is not OMITTED:
            if self.assembly is OMITTED:
                raise ValueError("selection is only allowed together with assembly")
            object.__setattr__(self, "selection", as_selection_options(self.selection))  # type: ignore[arg-type]

    def key(self, *, scope_id: str, turn: Hashable, query: str) -> PrefetchKey:
        return prefetch_key(
            scope_id=scope_id,
            turn=turn,
            query=query,
            assembly=self.assembly,
            max_bytes=self.max_bytes,
            selection=self.selection,
        )


class TurnSettings:
    """The live :class:`PrepareSettings` of a host, optionally frozen for the whole of each turn.

    With ``freeze_per_turn`` (the default), :meth:`start_turn` takes a snapshot and :meth:`for_turn`
    returns it for that turn even if :meth:`update` installs new settings meanwhile; the new settings apply
    from the next turn. Without it, an update applies at once; the prefetch key still changes with it, so
    text prepared under the old settings is never reused.
    """

    def __init__(self, settings: PrepareSettings, *, freeze_per_turn: bool = True) -> None:
        self._live = settings
        self._freeze = freeze_per_turn
        self._frozen_turn: Hashable | None = None
        self._frozen: PrepareSettings | None = None
        self._lock = threading.Lock()

    @property
    def freeze_per_turn(self) -> bool:
        return self._freeze

    @property
    def live(self) -> PrepareSettings:
        with self._lock:
            return self._live

    def update(self, settings: PrepareSettings) -> None:
        with self._lock:
            self._live = settings

    def start_turn(self, turn: Hashable) -> PrepareSettings:
        with self._lock:
            self._frozen_turn, self._frozen = turn, self._live
            return self._live

    def for_turn(self, turn: Hashable) -> PrepareSettings:
        with self._lock:
            if self._freeze and self._frozen is not None and self._frozen_turn == turn:
                return self._frozen
            return self._live
