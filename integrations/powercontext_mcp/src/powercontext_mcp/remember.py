"""How ``remember`` writes once: the head a call is made against, its idempotency key, and the scope check.

A retried call (its answer lost) or the same words again while still live derive the same idempotency key as the
write they repeat, so the server answers that write's citation instead of writing twice.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from powercontext_client import HistoryPage, PowerContextClient

IDEMPOTENCY_PREFIX = "mcp-remember-"
REMEMBER_LOOKBACK = 20
"""How many of the memory's newest revisions ``remember`` reads to tell a retried call from a new one."""


def remember_base_revision(
    history: HistoryPage | None, *, entry_id: str, body: str, conflict_key: str | None, update: bool
) -> int:
    """The memory head a ``remember`` call is made against, from the memory's newest revisions (None: no memory).

    The head, unless the newest revision that touched the entry wrote exactly this call's version (this body and
    conflict key, updated or created as asked): the call then repeats that write (a retry whose answer was lost,
    or the same words again while they are still live) and was made against the revision before it, so it
    derives that write's idempotency key and is answered that write's citation, never writing twice.
    """
    if history is None or not history.revisions:
        return 0
    head = history.revisions[0].citation.revision
    for revision in history.revisions:  # newest first
        added = [version for version in revision.added or () if version.id == entry_id]
        retired = [version for version in revision.retired or () if version.id == entry_id]
        if not added and not retired:
            continue
        # The entry's last change: a write of this very version (an update retires the one it replaces).
        same = len(added) == 1 and (added[0].body, added[0].conflict_key) == (body, conflict_key)
        if same and bool(retired) == update:
            return revision.citation.revision - 1  # revisions are numbered one after another
        return head
    return head


def scope_readable(client: PowerContextClient, scope_id: str) -> bool:
    """Whether the client's key may read ``scope_id``: ``GET /v1/scopes`` lists it when asked for it alone.

    One request whatever the number of the key's scopes (paging through them all would grow with them).
    """
    return any(scope.scope_id == scope_id for scope in client.list_scopes(scope_id=scope_id, limit=1).scopes)


def remember_idempotency_key(arguments: dict[str, Any]) -> str:
    """``mcp-remember-`` and the sha256 of the call's arguments as canonical JSON: the same call writes once.

    ``arguments`` includes the head the call is made against (:func:`remember_base_revision`): the same words
    after the memory changed are a new write, not a replay of an older one.
    """
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return IDEMPOTENCY_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
