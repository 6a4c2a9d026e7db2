"""Running a set of per-engine trigger statements: the history guards (``immutability``) and the corpus
generation (``recall.generation``) each define theirs; migrations and ``flush`` install or drop them here."""

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
