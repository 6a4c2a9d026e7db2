"""Model instances from hand-written joins: one statement where the ORM would send one per model.

The API's exact reads join the scope, the key's grant, the artifact, the revision and its entry versions in one
statement (the ORM's five round trips, and its compilation of each, cost more than the rows). Each model's
columns are selected in its concrete field order (``columns``) and turned back into an instance with Django's
own converters (``instance``), exactly as the ORM would have loaded it (SQLite returns datetimes as text).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from django.db import connections
from django.db.models import Model

M = TypeVar("M", bound=Model)


@functools.cache
def _fields(model: type[Model]) -> tuple:
    return tuple(model._meta.concrete_fields)


def columns(model: type[Model], alias: str) -> str:
    """The model's columns, as ``alias."column"``, in the order ``instance`` reads them."""
    return ", ".join(f'{alias}."{field.column}"' for field in _fields(model))


def width(model: type[Model]) -> int:
    """How many columns ``columns`` selects."""
    return len(_fields(model))


def table(model: type[Model]) -> str:
    return f'"{model._meta.db_table}"'


@functools.cache
def _converters(model: type[Model], db: str) -> tuple[tuple[int, Callable, object], ...]:
    connection = connections[db]
    converters = []
    for index, field in enumerate(_fields(model)):
        expression = field.get_col(model._meta.db_table)
        for converter in connection.ops.get_db_converters(expression) + expression.get_db_converters(connection):
            converters.append((index, converter, expression))
    return tuple(converters)


def instance(model: type[M], db: str, values: Sequence) -> M | None:
    """The instance these columns (``columns``' order) hold, as loaded by the ORM; None for an outer join's miss."""
    if values[0] is None:  # the primary key: no row joined
        return None
    values = list(values)
    connection = connections[db]
    for index, converter, expression in _converters(model, db):
        values[index] = converter(values[index], expression, connection)
    return model.from_db(db, [field.attname for field in _fields(model)], values)


def joined(model: type[M], db: str, values: Sequence) -> M:
    """``instance`` for an inner join's columns, which always hold a row."""
    found = instance(model, db, values)
    if found is None:
        raise ValueError(f"an inner join's {model.__name__} columns hold no row")
    return found
