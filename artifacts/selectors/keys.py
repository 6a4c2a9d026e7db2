"""Reads of API keys and grants."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from artifacts.models import (
    ApiKey,
    ApiKeyGrant,
)


@dataclass(frozen=True)
class ActiveKey:
    """An unrevoked key and what it may do: scope primary key → (may read, may write)."""

    api_key_id: int
    name: str
    grants: dict[int, tuple[bool, bool]]

    @property
    def pk(self) -> int:
        return self.api_key_id


_ACTIVE_KEY_SQL = (
    f"SELECT k.id, k.name, g.scope_id, g.can_read, g.can_write FROM {ApiKey._meta.db_table} k "
    f"LEFT JOIN {ApiKeyGrant._meta.db_table} g ON g.api_key_id = k.id "
    "WHERE k.key_sha256 = %s AND k.revoked_at IS NULL"
)


def api_key_get_active(*, key_sha256: str) -> ActiveKey | None:
    """The unrevoked key with this hash and all its grants, in one statement; None when there is none.

    Grants are read with the key, before any scope is looked at: a request for a scope the key may not
    read then does exactly the work of a request for an unknown scope (no timing difference to measure).
    Every API request starts here, so the statement is written once rather than compiled by the ORM per
    request (the compilation cost more than the query).
    """
    with connection.cursor() as cursor:
        cursor.execute(_ACTIVE_KEY_SQL, [key_sha256])
        return _active_from_rows(cursor.fetchall())


def api_key_get_active_by_id(*, api_key_id: int) -> ActiveKey | None:
    """The unrevoked key with this primary key and its grants (the inspector runs as it); None otherwise."""
    return _active(ApiKey.objects.filter(pk=api_key_id, revoked_at__isnull=True))


def _active(keys) -> ActiveKey | None:
    return _active_from_rows(
        list(keys.values_list("pk", "name", "grants__scope_id", "grants__can_read", "grants__can_write"))
    )


def _active_from_rows(rows: list[tuple]) -> ActiveKey | None:
    if not rows:
        return None
    grants = {
        # SQLite returns booleans as 0 and 1.
        scope_pk: (bool(can_read), bool(can_write))
        for _, _, scope_pk, can_read, can_write in rows
        if scope_pk is not None
    }
    return ActiveKey(api_key_id=rows[0][0], name=rows[0][1], grants=grants)


def api_key_find_by_name(*, name: str) -> ApiKey | None:
    """The key with this name, revoked or not, or None."""
    return ApiKey.objects.filter(name=name).first()


def api_key_find_by_id(*, api_key_id: int) -> ApiKey | None:
    """The key with this primary key, revoked or not, or None (the inspector's key typed by its id)."""
    return ApiKey.objects.filter(pk=api_key_id).first()


def api_key_find_by_sha256(*, key_sha256: str) -> ApiKey | None:
    """The key with this hash, revoked or not, or None."""
    return ApiKey.objects.filter(key_sha256=key_sha256).first()


def api_key_grant_list(*, api_key: ApiKey) -> list[ApiKeyGrant]:
    """Every grant of one key, with its scope, in scope-id order."""
    return list(ApiKeyGrant.objects.filter(api_key=api_key).select_related("scope").order_by("scope__scope_id"))
