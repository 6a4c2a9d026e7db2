"""Reads of profile candidates."""

from __future__ import annotations

import functools

from django.db import DEFAULT_DB_ALIAS, connections

from artifacts.models import (
    ApiKeyGrant,
    Artifact,
    ProfileCandidate,
    Scope,
)
from artifacts.selectors import rows
from artifacts.selectors.scopes import GrantHolder
from vocabulary.errors import Forbidden, NotFound
from vocabulary.limits import MAX_ROW_ID


def profile_candidate_list_all(*, artifact: Artifact) -> list:
    """Every candidate proposed for a profile artifact (any status), oldest first."""
    return list(artifact.candidates.order_by("created_at", "id"))


@functools.cache
def _candidate_sql() -> str:
    # Inner joins down to the key's grant: a candidate in a scope the key may neither read nor write is no row, exactly
    # like an id that does not exist, after the same one statement.
    return (
        f"SELECT {rows.columns(ProfileCandidate, 'c')}, {rows.columns(Artifact, 'a')}, {rows.columns(Scope, 's')} "
        f"FROM {rows.table(ProfileCandidate)} c "
        f"JOIN {rows.table(Artifact)} a ON a.id = c.artifact_id "
        f"JOIN {rows.table(Scope)} s ON s.id = a.scope_id "
        f"JOIN {rows.table(ApiKeyGrant)} g ON g.scope_id = s.id AND g.api_key_id = %s AND (g.can_read OR g.can_write) "
        "WHERE c.id = %s"
    )


def profile_candidate_get_writable(*, principal: GrantHolder, candidate_id: int) -> ProfileCandidate:
    """The candidate with its artifact and scope if the key may write its scope, in one statement, on the primary.

    NotFound("candidate not found") alike for an unknown id and a candidate in a scope the key may neither read nor
    write, after the same statement; Forbidden when it may read the scope but not write it.
    """
    if not 0 < candidate_id <= MAX_ROW_ID:  # no such row; SQLite's driver cannot bind a larger int (a 500)
        raise NotFound("candidate not found")
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_candidate_sql(), [principal.api_key_id, candidate_id])
        row = cursor.fetchone()
    if row is None:
        raise NotFound("candidate not found")
    a_start = rows.width(ProfileCandidate)
    s_start = a_start + rows.width(Artifact)
    candidate = rows.joined(ProfileCandidate, DEFAULT_DB_ALIAS, row[:a_start])
    candidate.artifact = rows.joined(Artifact, DEFAULT_DB_ALIAS, row[a_start:s_start])
    candidate.artifact.scope = scope = rows.joined(Scope, DEFAULT_DB_ALIAS, row[s_start:])
    # The key's own grants (read with it) decide, as everywhere else; the joined grant only narrows what is read.
    if principal.can_write(scope):
        return candidate
    if principal.can_read(scope):
        raise Forbidden("the API key may not write to this scope")
    raise NotFound("candidate not found")
