"""Routing exact reads: ``replica_read`` runs a read on a usable replica, and ``ReplicaRouter`` sends it there.

A read goes to a replica only inside ``replica_read`` (or a prepare's ``reads_on``): the router answers the alias
``routed_to`` set for the current context, else the primary.
"""

from __future__ import annotations

import contextvars
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from infrastructure.metrics import REPLICA_READS
from infrastructure.replicas.conf import replica_settings
from infrastructure.replicas.health import replica_read_failed, replica_usable

T = TypeVar("T")

_routed: contextvars.ContextVar[str | None] = contextvars.ContextVar("powercontext_replica", default=None)


class ReplicaBehind(Exception):
    """Raised by a read that finds its replica behind the primary; ``replica_read`` reads again on the primary."""


class ReplicaRouter:
    """Django's database router: reads to the replica ``replica_read`` chose, everything else to the primary."""

    def db_for_read(self, model, **hints):
        # Outside replica_read even a lazy load of an object read from a replica goes to the primary
        # (Django would otherwise follow the object to its alias).
        return _routed.get() or DEFAULT_DB_ALIAS

    def db_for_write(self, model, **hints):
        # Never the replica an object was read from (a hot standby refuses writes anyway).
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints):
        # The primary and its replicas hold the same rows.
        same_data = {DEFAULT_DB_ALIAS, *_replica_aliases()}
        return True if {obj1._state.db, obj2._state.db} <= same_data else None

    def allow_migrate(self, db, app_label, **hints):
        # Replicas follow the primary's schema through replication.
        return False if db in _replica_aliases() else None


def _replica_aliases() -> tuple[str, ...]:
    # Django consults the router while its system checks run (6.1's field checks ask allow_migrate): a bad replica
    # setting must reach the operator as its own check error (powercontext.E020), not as this router's exception.
    try:
        return replica_settings().aliases
    except ImproperlyConfigured:
        return ()


def replica_read(read: Callable[[], T], *, misses: tuple[type[BaseException], ...] = ()) -> T:
    """``read()`` on a usable replica, else on the primary; again on the primary when the replica cannot answer.

    Only for reads whose answer on a replica, when found there, is the primary's (immutable rows). ``read``
    must finish its queries before it returns (lists, not lazy querysets). It is read again on the primary
    when it raises one of ``misses`` or ``ReplicaBehind`` (not replicated yet: never a false not-found) or a
    database error (the replica is then skipped for a while).
    """
    if not replicas_configured():  # the read as it is, nothing more
        return read()
    alias = replica_alias()
    if alias is None:
        return read()
    missed: tuple[type[BaseException], ...] = (ReplicaBehind, *misses)
    try:
        with routed_to(alias):
            result = read()
    except missed:
        REPLICA_READS.labels(outcome="miss").inc()
        return read()
    except DatabaseError as exc:
        REPLICA_READS.labels(outcome=replica_read_failed(alias, exc)).inc()
        return read()
    REPLICA_READS.labels(outcome="replica").inc()
    return result


def replicas_configured() -> bool:
    """Whether any read replica is configured (without one, ``replica_read`` is the read itself)."""
    return bool(replica_settings().aliases)


def reading_from_replica() -> bool:
    """Whether the current read runs on a replica (inside ``replica_read``), e.g. to check it is caught up."""
    return _routed.get() is not None


def replica_alias() -> str | None:
    """The alias of a replica fit to serve a read now, or None: read from the primary.

    Several usable replicas share the reads at random. A replica is measured at most every
    ``LAG_CHECK_SECONDS`` per process.
    """
    aliases = list(replica_settings().aliases)
    random.shuffle(aliases)
    for alias in aliases:
        if replica_usable(alias):
            return alias
    return None


@contextmanager
def routed_to(alias: str) -> Iterator[None]:
    """Within the block, the router sends this context's reads to ``alias``.

    The package's own, not exported by it: ``replica_read`` and ``prepares.reads_on`` are the only ways onto a
    replica.
    """
    token = _routed.set(alias)
    try:
        yield
    finally:
        _routed.reset(token)
