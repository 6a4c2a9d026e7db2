"""Reads of scopes and their references."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from django.db import connection
from django.db.models import Q

from artifacts.models import (
    ApiKeyGrant,
    ContextReference,
    Scope,
)
from vocabulary.authority import AUTHORITY_DEFAULT
from vocabulary.errors import Forbidden, NotFound
from vocabulary.limits import MAX_SCOPE_REFERENCES


class Reader(Protocol):
    """A caller that may or may not read a scope (an API key's principal, the operator's)."""

    def can_read(self, scope: Scope) -> bool: ...


class Writer(Reader, Protocol):
    """A caller that may also write."""

    def can_write(self, scope: Scope) -> bool: ...


class GrantHolder(Writer, Protocol):
    """An API key's principal: its grants are rows to join to."""

    api_key_id: int


def scope_get(*, scope_id: str) -> Scope:
    """The scope with this public id, or NotFound."""
    try:
        return Scope.objects.get(scope_id=scope_id)
    except Scope.DoesNotExist as exc:
        raise NotFound("scope not found") from exc


def scope_get_writable(*, principal: GrantHolder, scope_id: str) -> Scope:
    """The scope if the principal may write it.

    NotFound when it may neither read nor write it, exactly like an unknown scope: the scope is looked up through
    the key's grant, so such a scope is no row at all, as an unknown one is (read whole and then refused, it made
    that 404 measurably slower than an unknown scope's). Forbidden when it may read but not write.
    """
    try:
        scope = Scope.objects.get(
            Q(grants__can_read=True) | Q(grants__can_write=True),
            scope_id=scope_id,
            grants__api_key_id=principal.api_key_id,
        )
    except Scope.DoesNotExist as exc:
        raise NotFound("scope not found") from exc
    if not principal.can_write(scope):
        if principal.can_read(scope):
            raise Forbidden("the API key may not write to this scope")
        raise NotFound("scope not found")
    return scope


def _scope_with_references_sql(*, through_grant: bool) -> str:
    grant = (
        f"JOIN {ApiKeyGrant._meta.db_table} g ON g.scope_id = s.id AND g.api_key_id = %s AND g.can_read "
        if through_grant
        else ""
    )
    return (
        f"SELECT s.id, s.scope_id, s.authority, t.id, t.scope_id, t.authority FROM {Scope._meta.db_table} s "
        + grant
        + f"LEFT JOIN {ContextReference._meta.db_table} r ON r.scope_id = s.id "
        f"LEFT JOIN {Scope._meta.db_table} t ON t.id = r.target_id "
        "WHERE s.scope_id = %s ORDER BY r.position LIMIT %s"
    )


_SCOPE_WITH_REFERENCES_SQL = _scope_with_references_sql(through_grant=False)
_READABLE_SCOPE_WITH_REFERENCES_SQL = _scope_with_references_sql(through_grant=True)


def scope_get_readable_with_references(*, principal: Reader, scope_id: str) -> tuple[Scope, list[Scope]]:
    """The scope if the principal may read it, and its direct references in order, in one statement.

    Unknown and unreadable are the same NotFound, after the same statement. Whether the principal may
    read the references is the caller's to decide (prepare refuses the whole request). The scopes carry
    their primary key, public id and operator-set authority tier (the selection policy's); their other fields load
    on first access. Every prepare starts here, so the statement is written once rather than compiled by the ORM
    per request. It reads at most one reference more than MAX_SCOPE_REFERENCES (only a scope stored around the
    services has more): more than the limit returned means more stored.

    An API key's statement joins the scope through the key's grant to read it: a scope the key may not read comes
    back as no row at all, as an unknown one does, so neither its references nor a model instance are read for it
    (they made an unreadable scope's 404 measurably slower than an unknown one's: its existence showed in timing).
    """
    api_key_id = getattr(principal, "api_key_id", None)
    with connection.cursor() as cursor:
        if api_key_id is None:  # the operator's principal (the inspector): its own rule, below
            cursor.execute(_SCOPE_WITH_REFERENCES_SQL, [scope_id, MAX_SCOPE_REFERENCES + 1])
        else:
            cursor.execute(_READABLE_SCOPE_WITH_REFERENCES_SQL, [api_key_id, scope_id, MAX_SCOPE_REFERENCES + 1])
        rows = cursor.fetchall()
    if not rows:
        raise NotFound("scope not found")
    scope = _scope_loaded(*rows[0][:3])
    if not principal.can_read(scope):
        raise NotFound("scope not found")
    return scope, [_scope_loaded(*row[3:]) for row in rows if row[3] is not None]


def _scope_loaded(pk: int, scope_id: str, authority: str | None) -> Scope:
    # from_db marks the instance as loaded from the database, with the fields not read deferred.
    return Scope.from_db(connection.alias, ["id", "scope_id", "authority"], [pk, scope_id, authority])


def scope_references_list(*, scope: Scope) -> list[Scope]:
    """The scope's direct references in their configured order (no transitive closure)."""
    references = ContextReference.objects.filter(scope=scope).select_related("target").order_by("position")
    return [reference.target for reference in references]


def scope_get_many(*, scope_ids) -> dict[str, Scope]:
    """The stored scopes among ``scope_ids``, keyed by public id (absent ids are simply missing)."""
    return {scope.scope_id: scope for scope in Scope.objects.filter(scope_id__in=list(scope_ids))}


@dataclass(frozen=True)
class ReadableScope:
    """One scope a key may read: whether it may also write it, and its direct references it may read, in order.

    ``all_references_readable`` is False when some reference is to a scope the key may not read; such a
    reference's id is never given (exactly what a prepare reveals: it refuses with 403 ``forbidden``
    without naming the scope). ``authority`` is the scope's effective tier in the selection policy (the default when
    no operator set one), so a host can tell which scope is its turn scope.
    """

    scope_id: str
    title: str
    authority: str
    can_write: bool
    references: list[str]
    all_references_readable: bool


@dataclass(frozen=True)
class ReadableScopePage:
    scopes: list[ReadableScope]
    next_after: str | None


def scope_list_readable(
    *, principal: GrantHolder, scope_id: str | None = None, after: str | None = None, limit: int
) -> ReadableScopePage:
    """The scopes the principal may read in scope-id order, from just after ``after``, at most ``limit``.

    With ``scope_id``, only that scope: a host asks whether its key may read one scope in one bounded request,
    and learns nothing of a scope it may not read (its absence looks like an unknown scope's).

    Two statements whatever the page or the key's grants: the page's scopes (joined to the key's grants, so a
    key with thousands of grants sends no list of them), then the page's references. Whether a reference is
    readable is answered from the grants read with the key.
    """
    scopes = Scope.objects.filter(grants__api_key_id=principal.api_key_id, grants__can_read=True)
    if scope_id is not None:
        scopes = scopes.filter(scope_id=scope_id)
    if after is not None:
        scopes = scopes.filter(scope_id__gt=after)
    page = list(scopes.order_by("scope_id").only("id", "scope_id", "title", "authority")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    references: dict[int, list[Scope]] = {scope.pk: [] for scope in page}
    rows = (
        ContextReference.objects.filter(scope_id__in=list(references))
        .order_by("scope_id", "position")
        .values_list("scope_id", "target_id", "target__scope_id")
    )
    for scope_pk, target_pk, target_scope_id in rows:
        references[scope_pk].append(Scope(pk=target_pk, scope_id=target_scope_id))
    listed = [
        ReadableScope(
            scope_id=scope.scope_id,
            title=scope.title,
            authority=scope.authority if scope.authority is not None else AUTHORITY_DEFAULT,
            can_write=principal.can_write(scope),
            references=[target.scope_id for target in references[scope.pk] if principal.can_read(target)],
            all_references_readable=all(principal.can_read(target) for target in references[scope.pk]),
        )
        for scope in page
    ]
    return ReadableScopePage(scopes=listed, next_after=page[-1].scope_id if more else None)
