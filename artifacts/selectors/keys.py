"""Reads of API keys and grants."""

from __future__ import annotations

from artifacts.models import (
    ApiKey,
    ApiKeyGrant,
)


def api_key_get_active(*, key_sha256: str) -> ApiKey | None:
    """The unrevoked key with this hash, or None."""
    return ApiKey.objects.filter(key_sha256=key_sha256, revoked_at__isnull=True).first()


def api_key_grants_map(*, api_key_id: int) -> dict[int, tuple[bool, bool]]:
    """Scope primary key → (may read, may write) for one key."""
    return {
        scope_pk: (can_read, can_write)
        for scope_pk, can_read, can_write in ApiKeyGrant.objects.filter(api_key_id=api_key_id).values_list(
            "scope_id", "can_read", "can_write"
        )
    }


def api_key_find_by_name(*, name: str) -> ApiKey | None:
    """The key with this name, revoked or not, or None."""
    return ApiKey.objects.filter(name=name).first()


def api_key_find_by_sha256(*, key_sha256: str) -> ApiKey | None:
    """The key with this hash, revoked or not, or None."""
    return ApiKey.objects.filter(key_sha256=key_sha256).first()


def api_key_grant_list(*, api_key: ApiKey) -> list[ApiKeyGrant]:
    """Every grant of one key, with its scope, in scope-id order."""
    return list(ApiKeyGrant.objects.filter(api_key=api_key).select_related("scope").order_by("scope__scope_id"))
