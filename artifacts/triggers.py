"""Running a set of per-engine trigger statements (``TriggerStatements``: the history guards' in ``immutability``, the
corpus generation's in ``recall.generation``): ``flush`` and benchmark bulk loads drop and reinstall the history
guards here. Migrations run their own frozen copy of the statements, and of this loop, so what they do never changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TriggerStatements = Mapping[str, tuple[Sequence[str], Sequence[str]]]
"""Per database vendor, (statements that install, statements that drop)."""


def triggers_run(connection, statements: TriggerStatements, *, install: bool) -> None:
    """Install (or drop) one set of triggers on this connection's database; both directions are idempotent."""
    if connection.vendor not in statements:
        raise NotImplementedError(f"triggers are not written for {connection.vendor}")
    with connection.cursor() as cursor:
        for statement in statements[connection.vendor][0 if install else 1]:
            cursor.execute(statement)
