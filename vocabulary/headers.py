"""HTTP header names of the API that more than one layer reads (the services, the views and the middleware)."""

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""A write's retry key: the write is made once, its response kept for replays (artifacts.services.idempotency)."""

CONSISTENCY_TOKEN_HEADER = "PowerContext-Consistency-Token"
"""A write's consistency token (the primary's WAL position after it), for the next prepare (docs/scaling.md §11)."""
