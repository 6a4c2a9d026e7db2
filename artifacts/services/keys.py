"""API keys and their per-scope grants; only a key's SHA-256 is stored."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from artifacts.models import (
    ApiKey,
    ApiKeyGrant,
    Scope,
)
from artifacts.services.common import check_identifier
from vocabulary.limits import (
    API_KEY_PREFIX,
    API_KEY_SHOWN_PREFIX_CHARACTERS,
)
from vocabulary.text import sha256_text


@transaction.atomic
def api_key_create(
    *,
    name: str,
    read_scopes: Sequence[Scope] = (),
    write_scopes: Sequence[Scope] = (),
    key: str | None = None,
) -> tuple[ApiKey, str]:
    """Create a key with grants; returns the plaintext key, which is never stored."""
    check_identifier(name, path="name")
    plaintext = key or API_KEY_PREFIX + secrets.token_urlsafe(32)
    api_key = ApiKey.objects.create(
        name=name, key_prefix=plaintext[:API_KEY_SHOWN_PREFIX_CHARACTERS], key_sha256=sha256_text(plaintext)
    )
    rights: dict[int, dict] = {}
    for scope in read_scopes:
        rights.setdefault(scope.pk, {"can_read": False, "can_write": False})["can_read"] = True
    for scope in write_scopes:
        rights.setdefault(scope.pk, {"can_read": False, "can_write": False})["can_write"] = True
    ApiKeyGrant.objects.bulk_create(ApiKeyGrant(api_key=api_key, scope_id=pk, **r) for pk, r in rights.items())
    return api_key, plaintext


def api_key_grant_set(*, api_key: ApiKey, scope: Scope, can_read: bool, can_write: bool) -> ApiKeyGrant:
    """Set what a key may do in a scope."""
    grant, _ = ApiKeyGrant.objects.update_or_create(
        api_key=api_key, scope=scope, defaults={"can_read": can_read, "can_write": can_write}
    )
    return grant


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke a key: every later request with it answers 401."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key
