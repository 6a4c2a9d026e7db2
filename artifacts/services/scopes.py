"""Scopes and their ordered direct references."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from artifacts.models import (
    ContextReference,
    Scope,
)
from artifacts.services.common import check_identifier, check_text
from vocabulary.authority import AUTHORITY_TIERS
from vocabulary.errors import InvalidInput
from vocabulary.limits import MAX_SCOPE_REFERENCES, MAX_SCOPE_TITLE_CHARACTERS


def scope_create(
    *, scope_id: str, title: str = "", authority: str | None = None, created_at: datetime | None = None
) -> Scope:
    """Create a scope; its id is any non-empty string up to 200 characters.

    ``authority`` is its tier in the selection policy (``vocabulary.authority``; None: the default). Only trusted
    callers pass one (the fixture loader, operators' tools): no API request reaches this argument. ``created_at``:
    now unless given (a fixture restoring an exported scope gives it).
    """
    check_identifier(scope_id, path="scope_id")
    check_text(title, path="title", max_length=MAX_SCOPE_TITLE_CHARACTERS, allow_empty=True)
    if authority is not None and authority not in AUTHORITY_TIERS:
        raise InvalidInput(f"authority must be one of {', '.join(AUTHORITY_TIERS)}", path="authority")
    return Scope.objects.create(
        scope_id=scope_id, title=title, authority=authority, created_at=created_at or timezone.now()
    )


def scope_references_count_problem(count: int) -> str | None:
    """Why a scope may not have ``count`` direct references, or None when it may (every write path asks)."""
    if count > MAX_SCOPE_REFERENCES:
        return f"a scope references at most {MAX_SCOPE_REFERENCES} scopes, not {count}"
    return None


def scope_references_lock(*, scope_pk: int) -> None:
    """Hold the scope's row until the caller's transaction ends: edits of one scope's references (the admin's
    form, this module's replacement) run one after another, so each counts the rows the other saved.

    A no-key lock: rows inserted meanwhile that point at the scope (its artifacts, its recall documents) check
    their foreign key with a key-share lock, which this does not block."""
    list(Scope.objects.select_for_update(no_key=True).filter(pk=scope_pk).values_list("pk", flat=True))


@transaction.atomic
def scope_references_set(*, scope: Scope, targets: Sequence[Scope]) -> None:
    """Replace the scope's ordered direct references with ``targets`` (positions 1, 2, …)."""
    if (problem := scope_references_count_problem(len(targets))) is not None:
        raise InvalidInput(problem, path="references")
    if any(target.pk == scope.pk for target in targets):
        raise InvalidInput("a scope cannot reference itself", path="references")
    if len({t.pk for t in targets}) != len(targets):
        raise InvalidInput("a scope is referenced twice", path="references")
    scope_references_lock(scope_pk=scope.pk)
    ContextReference.objects.filter(scope=scope).delete()
    ContextReference.objects.bulk_create(
        ContextReference(scope=scope, target=target, position=i) for i, target in enumerate(targets, start=1)
    )
