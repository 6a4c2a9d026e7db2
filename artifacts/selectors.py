"""All reads: scopes, grants, exact revisions, history and recall (lexical search over live heads)."""

from artifacts.exceptions import NotFound
from artifacts.models import Scope


def scope_get(*, scope_id: str) -> Scope:
    """The scope with this public id, or NotFound."""
    try:
        return Scope.objects.get(scope_id=scope_id)
    except Scope.DoesNotExist as exc:
        raise NotFound("scope not found") from exc
