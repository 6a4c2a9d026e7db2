"""API-key authentication: ``Authorization: Bearer <key>``, checked against stored hashes."""

from dataclasses import dataclass, field

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from artifacts import selectors
from artifacts.models import Scope
from vocabulary.text import sha256_text


@dataclass
class ApiKeyPrincipal:
    """The authenticated host: one API key and its per-scope grants (loaded once per request)."""

    api_key_id: int
    name: str
    _grants: dict[int, tuple[bool, bool]] | None = field(default=None, repr=False)

    is_authenticated = True
    is_anonymous = False

    def _grant(self, scope: Scope) -> tuple[bool, bool]:
        if self._grants is None:
            self._grants = selectors.api_key_grants_map(api_key_id=self.api_key_id)
        return self._grants.get(scope.pk, (False, False))

    def can_read(self, scope: Scope) -> bool:
        return self._grant(scope)[0]

    def can_write(self, scope: Scope) -> bool:
        return self._grant(scope)[1]


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
        api_key = selectors.api_key_get_active(key_sha256=sha256_text(key.strip()))
        if api_key is None:
            raise exceptions.AuthenticationFailed("invalid or revoked API key")
        return ApiKeyPrincipal(api_key_id=api_key.pk, name=api_key.name), api_key

    def authenticate_header(self, request) -> str:
        return self.keyword


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "artifacts.auth.ApiKeyAuthentication"
    name = "ApiKeyBearer"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A PowerContext API key."}
