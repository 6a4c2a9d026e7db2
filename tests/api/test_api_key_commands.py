"""create_api_key and revoke_api_key: a key is shown once, stored hashed, and refused once revoked."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import RequestFactory
from rest_framework.exceptions import AuthenticationFailed

from artifacts.auth import ApiKeyAuthentication
from artifacts.models import ApiKey, ApiKeyGrant, Scope
from vocabulary import limits
from vocabulary.text import sha256_text


def create_key(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("create_api_key", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def authenticate(key: str):
    request = RequestFactory().get("/v1/context/prepare", HTTP_AUTHORIZATION=f"Bearer {key}")
    return ApiKeyAuthentication().authenticate(request)


@pytest.fixture
def scopes(db):
    return {scope_id: Scope.objects.create(scope_id=scope_id) for scope_id in ("project:demo", "team:platform")}


def test_create_api_key_prints_a_key_once_that_authenticates_and_stores_only_its_hash(scopes):
    out, err = create_key("host-1", "--read", "project:demo", "team:platform", "--write", "project:demo")
    key = out.strip()
    assert out == key + "\n", "stdout holds the key alone, for scripts"
    assert key not in err
    assert "not shown again" in err

    api_key = ApiKey.objects.get(name="host-1")
    assert api_key.key_sha256 == sha256_text(key)
    assert key.startswith(limits.API_KEY_PREFIX) and len(key) >= 32
    for value in ApiKey.objects.values_list("name", "key_prefix", "key_sha256").get(pk=api_key.pk):
        assert key not in value
    grants = {(g.scope.scope_id, g.can_read, g.can_write) for g in ApiKeyGrant.objects.filter(api_key=api_key)}
    assert grants == {("project:demo", True, True), ("team:platform", True, False)}

    principal, authenticated_key = authenticate(key)
    assert authenticated_key.pk == api_key.pk
    assert principal.can_read(scopes["team:platform"]) and not principal.can_write(scopes["team:platform"])
    assert principal.can_write(scopes["project:demo"])


def test_each_created_key_is_different(scopes):
    first, _ = create_key("host-1", "--read", "project:demo")
    second, _ = create_key("host-2", "--read", "project:demo")
    assert first.strip() != second.strip()


def test_create_api_key_with_an_unknown_scope_names_it_and_creates_nothing(scopes):
    with pytest.raises(CommandError, match="unknown scopes: 'team:nowhere', 'user:nobody'"):
        create_key("host-1", "--read", "project:demo", "team:nowhere", "--write", "user:nobody")
    assert not ApiKey.objects.exists()


def test_create_api_key_refuses_an_existing_name(scopes):
    create_key("host-1", "--read", "project:demo")
    with pytest.raises(CommandError, match="already exists"):
        create_key("host-1", "--read", "project:demo")
    assert ApiKey.objects.count() == 1


def test_create_api_key_refuses_an_invalid_name(scopes):
    with pytest.raises(CommandError, match="name: contains U\\+0000"):
        create_key("host\x00", "--read", "project:demo")
    assert not ApiKey.objects.exists()


def test_revoke_api_key_sets_revoked_at_and_the_key_no_longer_authenticates(scopes):
    out, _ = create_key("host-1", "--read", "project:demo")
    key = out.strip()
    assert authenticate(key) is not None

    revoked = StringIO()
    call_command("revoke_api_key", "host-1", stdout=revoked)
    assert "revoked API key 'host-1'" in revoked.getvalue()
    api_key = ApiKey.objects.get(name="host-1")
    assert api_key.revoked_at is not None
    with pytest.raises(AuthenticationFailed):
        authenticate(key)

    again = StringIO()
    call_command("revoke_api_key", "host-1", stdout=again)
    assert "already revoked" in again.getvalue()
    api_key_after = ApiKey.objects.get(name="host-1")
    assert api_key_after.revoked_at == api_key.revoked_at


def test_revoke_api_key_with_an_unknown_name_fails(db):
    with pytest.raises(CommandError, match="no API key named 'ghost'"):
        call_command("revoke_api_key", "ghost", stdout=StringIO())


def test_create_api_key_refuses_a_scope_id_that_cannot_be_stored(scopes):
    with pytest.raises(CommandError, match="scope 'project:\\\\x00': contains U\\+0000"):
        create_key("host-1", "--read", "project:\x00")
    assert not ApiKey.objects.exists()


def test_revoke_api_key_with_a_name_that_cannot_be_stored_fails_cleanly(db):
    with pytest.raises(CommandError, match="no API key named"):
        call_command("revoke_api_key", "ghost\x00", stdout=StringIO())
