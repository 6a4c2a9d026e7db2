"""Read replicas: whether a replica may serve a read now, and the database router that sends it there.

Generic: this package knows which replicas are usable, not which reads are safe on them. The selectors choose
those (reads of immutable rows) and run them through ``replica_read``; every other query — prepare (below), writes,
authentication and grants, anything that must see the latest head — goes to the primary, because the router
sends a read to a replica only inside ``replica_read``.

A replica is used only when it is the primary's: a server in recovery (a hot standby) of the primary's cluster
(the same system identifier), on the primary's timeline and in the same database (``replica_identity_mismatch``).
A server that is not in recovery, belongs to another cluster, follows another timeline or serves another
database would answer rows the primary may not have: it is refused, whatever it holds. A replica that fails
that check, does not answer, fails mid-read or replays more than ``POWERCONTEXT_REPLICA_MAX_LAG_SECONDS``
behind (``replica_lag_seconds``) is skipped for ``POWERCONTEXT_REPLICA_SKIP_SECONDS`` (per process; counted in
``powercontext_replica_skips`` and logged once per outage), and its reads go to the primary: replica trouble
never reaches a client. The lag check is only about efficiency (a lagging replica mostly misses): correctness
rests on the selectors, which read again on the primary whatever a replica has not replayed yet. With
``POWERCONTEXT_REPLICA_HEALTH_DIR`` the worker processes of one machine share each replica's last verdict.

Prepares (``replica_serve``, opt-in with ``POWERCONTEXT_PREPARE_ON_REPLICAS``) run on a replica only when it has
replayed the consistency token the caller's last write answered with (``ConsistencyTokenMiddleware``), so the
caller reads its own writes; the whole prepare then reads the replica (``reads_on``), and any failure there runs
it again on the primary.

One module a subject, imported one way (``prepares`` asks ``routing``, both ask ``health``; never the reverse):

- ``health``: which replicas are usable (identity, lag, skips, the verdicts shared between workers);
- ``routing``: routing exact reads (``replica_read``, ``ReplicaRouter``);
- ``prepares``: prepares on replicas and consistency tokens (``replica_serve``, ``ConsistencyTokenMiddleware``).

The package exports what callers use (``from infrastructure import replicas``; the dotted paths in settings). The
statements and intervals (``REPLICA_IDENTITY_SQL``, ``LAG_CHECK_SECONDS``, …) stay in their modules only: a test
that replaces one must patch the module that reads it, and a patch left on the package fails for want of the name
instead of silently missing.
"""

from infrastructure.replicas.health import (
    ServerIdentity,
    primary_identity,
    replica_failed,
    replica_health_reset,
    replica_identity,
    replica_identity_mismatch,
    replica_lag_seconds,
)
from infrastructure.replicas.prepares import (
    SERVED_BY_HEADER,
    ConsistencyTokenMiddleware,
    consistency_token,
    consistency_token_valid,
    prepare_on_replicas,
    reads_on,
    replica_serve,
)
from infrastructure.replicas.routing import (
    ReplicaBehind,
    ReplicaRouter,
    reading_from_replica,
    replica_alias,
    replica_read,
    replicas_configured,
)
from vocabulary.headers import CONSISTENCY_TOKEN_HEADER  # the views and tests read it here, beside SERVED_BY_HEADER

__all__ = [
    "CONSISTENCY_TOKEN_HEADER",
    "SERVED_BY_HEADER",
    "ConsistencyTokenMiddleware",
    "ReplicaBehind",
    "ReplicaRouter",
    "ServerIdentity",
    "consistency_token",
    "consistency_token_valid",
    "prepare_on_replicas",
    "primary_identity",
    "reading_from_replica",
    "reads_on",
    "replica_alias",
    "replica_failed",
    "replica_health_reset",
    "replica_identity",
    "replica_identity_mismatch",
    "replica_lag_seconds",
    "replica_read",
    "replica_serve",
    "replicas_configured",
]
