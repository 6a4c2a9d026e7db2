"""Safe retries: a write made with an ``Idempotency-Key`` happens once, its response kept for replays.

The record and the write commit in one transaction: a client whose 201 was lost (a killed worker, a
dropped connection) retries with the same key and gets the same citation, and no new revision exists.

A replay is an acknowledgement too, so on PostgreSQL it is not answered before the synchronous standby has the
write (``_replay``): a write whose commit was still waiting for the standby when the primary crashed is
committed by the primary's recovery all the same, and a replay answered from it at once would acknowledge a
write a failover can still lose.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable

from django.db import IntegrityError, transaction
from django.utils import timezone

from artifacts.conf import idempotency_settings
from artifacts.models import IdempotentWrite
from artifacts.services.common import rows_purge
from vocabulary.errors import InvalidInput
from vocabulary.headers import IDEMPOTENCY_HEADER

IDEMPOTENCY_KEY_MAX_CHARACTERS = 200
IDEMPOTENCY_KEY_CHARACTER = "[ -~]"
"""One character of a key: printable ASCII, space to tilde (the published schema's pattern repeats it)."""
_KEY = re.compile(f"{IDEMPOTENCY_KEY_CHARACTER}{{1,{IDEMPOTENCY_KEY_MAX_CHARACTERS}}}")


def idempotency_key_problem(key: str) -> str | None:
    """Why a header value cannot be an idempotency key (1–200 printable ASCII characters), or None."""
    if not _KEY.fullmatch(key):
        return f"must be 1 to {IDEMPOTENCY_KEY_MAX_CHARACTERS} printable ASCII characters"
    return None


def _retention_cutoff() -> datetime.datetime:
    return timezone.now() - datetime.timedelta(hours=idempotency_settings().retention_hours)


def _replay(record: IdempotentWrite, request_sha256: str) -> tuple[int, dict]:
    if record.request_sha256 != request_sha256:
        raise InvalidInput("this Idempotency-Key was already used for a different request", path=IDEMPOTENCY_HEADER)
    _commit_waits_for_the_standby(record)
    return record.status, json.loads(record.response_body)


def _commit_waits_for_the_standby(record: IdempotentWrite) -> None:
    """Rewrite the record (same values): on PostgreSQL a transaction waits for the synchronous standby at commit
    only when it has an ID and wrote to the log before its commit record, and a replay otherwise reads alone.
    With the write, its commit (``synchronous_commit`` on, a synchronous standby configured) waits until the
    standby has all the log up to it: the replayed write's own commit included (module docstring)."""
    IdempotentWrite.objects.filter(pk=record.pk).update(status=record.status)


@transaction.atomic
def idempotent_write_run(
    *, api_key_id: int, key: str, request_sha256: str, write: Callable[[], tuple[int, dict]]
) -> tuple[int, dict, bool]:
    """Run ``write`` once per (API key, idempotency key); returns (status, body, replayed).

    The same key with the same request returns the original response; with a different request it is
    refused (422). Records older than the retention no longer count.
    """
    IdempotentWrite.objects.filter(api_key_id=api_key_id, key=key, created_at__lt=_retention_cutoff()).delete()
    existing = IdempotentWrite.objects.filter(api_key_id=api_key_id, key=key).first()
    if existing is not None:
        return (*_replay(existing, request_sha256), True)
    try:
        # Claimed before the write: a concurrent request with the same key waits here for this one to commit.
        with transaction.atomic():
            record = IdempotentWrite.objects.create(api_key_id=api_key_id, key=key, request_sha256=request_sha256)
    except IntegrityError:
        return (*_replay(IdempotentWrite.objects.get(api_key_id=api_key_id, key=key), request_sha256), True)
    status, body = write()
    IdempotentWrite.objects.filter(pk=record.pk).update(status=status, response_body=json.dumps(body))
    return status, body, False


def idempotent_writes_purge(*, batch: int = 1000, progress: Callable[[int], None] = lambda deleted: None) -> int:
    """Delete records past the retention in batches; ``progress`` gets the running total. Returns it."""
    return rows_purge(
        queryset=IdempotentWrite.objects.filter(created_at__lt=_retention_cutoff()), batch=batch, progress=progress
    )
