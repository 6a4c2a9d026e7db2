"""API-key authentication: ``Authorization: Bearer <key>``, checked against stored hashes."""

from dataclasses import dataclass, field

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from artifacts import selectors
from artifacts.models import Scope
from vocabulary.text import sha256_text


@dataclass(frozen=True)
class ApiKeyPrincipal:
    """The authenticated host: one API key and its per-scope grants (read with the key)."""

    api_key_id: int
    name: str
    grants: dict[int, tuple[bool, bool]] = field(repr=False)

    is_authenticated = True
    is_anonymous = False

    def can_read(self, scope: Scope) -> bool:
        return self.grants.get(scope.pk, (False, False))[0]

    def can_write(self, scope: Scope) -> bool:
        return self.grants.get(scope.pk, (False, False))[1]


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """Resolve a Bearer key to its principal; unknown and revoked keys are refused alike."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request)
        if not header:
            return None
        try:
            scheme, _, key = header.decode("ascii").partition(" ")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("invalid API key") from exc
        if scheme.lower() != "bearer" or not key.strip():
            raise exceptions.AuthenticationFailed("expected 'Authorization: Bearer <key>'")
        active = selectors.api_key_get_active(key_sha256=sha256_text(key.strip()))
        if active is None:
            raise exceptions.AuthenticationFailed("invalid or revoked API key")
        return ApiKeyPrincipal(api_key_id=active.api_key_id, name=active.name, grants=active.grants), active

    def authenticate_header(self, request) -> str:
        return self.keyword


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "artifacts.auth.ApiKeyAuthentication"
    name = "ApiKeyBearer"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A PowerContext API key."}
