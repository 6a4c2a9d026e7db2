"""List filters whose cost does not grow with the data: a change list's sidebar must not read its whole table.

Django's own filters list what is stored: ``AllValuesFieldListFilter`` (a plain field in ``list_filter``) runs a
``SELECT DISTINCT`` over the filtered table on every view, ``RelatedOnlyFieldListFilter`` too (over the foreign
keys), and ``RelatedFieldListFilter`` lists every row of the related table (10,000 scopes, 10,000 links). On the
prepare log, millions of rows, each is a scan per page view. Here a field's choices come from a fixed vocabulary
(no statement at all), and a relation's from a bounded read of the related table: the first rows in its admin's
order and the chosen one. Their URL parameters are Django's, so links and ``GuardedAdmin.lookup_allowed`` (which
accepts a list filter's own field path) are unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.utils import timezone

from artifacts.admin.related import may_view

RELATED_FILTER_CHOICES = 20
"""Rows of a related table a filter lists at most (besides the chosen one); search finds the others."""
ROW_ID_TEXT = re.compile(r"[0-9]{1,18}")
"""A row's primary key as staff type it or a URL carries it: digits, few enough for any integer column (a longer
number names no row)."""


def vocabulary_filter(values: Iterable[object]) -> type[admin.AllValuesFieldListFilter]:
    """A filter on a field whose values are the fixed ``values`` (the code's own constants), never read from the
    table: the same parameters and choices as Django's filter of a plain field, without its ``SELECT DISTINCT``."""
    choices = tuple(values)

    class VocabularyFieldListFilter(admin.AllValuesFieldListFilter):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.lookup_choices = choices  # in place of the DISTINCT query Django built (lazily, never run)

    return VocabularyFieldListFilter


class BoundedRelatedFieldListFilter(admin.RelatedFieldListFilter):
    """A relation's filter listing at most ``RELATED_FILTER_CHOICES`` related rows (its admin's order) and the
    chosen one, in at most two bounded statements; its title says when there are more (the search box finds them).

    Only to staff who may view the related table: the rows listed are that table's, not the ones this list shows
    (the prepare log's key filter would otherwise name every API key to staff who may read the log but not the
    keys). Others see no rows here, and a value chosen by URL as its id alone."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.more:
            self.title = f"{self.lookup_title} (the first {RELATED_FILTER_CHOICES}; search for others)"

    def field_choices(self, field, request, model_admin):
        self.more = False
        if not may_view(request.user, field.remote_field.model):
            return [(int(value), f"id {value}") for value in self.lookup_val or () if ROW_ID_TEXT.fullmatch(value)]
        related = field.remote_field.model._default_manager.all()
        ordering = self.field_admin_ordering(field, request, model_admin)
        if ordering:
            related = related.order_by(*ordering)
        rows = list(related[: RELATED_FILTER_CHOICES + 1])
        self.more = len(rows) > RELATED_FILTER_CHOICES
        rows = rows[:RELATED_FILTER_CHOICES]
        listed = {str(row.pk) for row in rows}
        chosen = [value for value in self.lookup_val or () if ROW_ID_TEXT.fullmatch(value) and value not in listed]
        if chosen:
            rows += list(related.filter(pk__in=chosen))
        return [(row.pk, str(row)) for row in rows]


class RecentListFilter(admin.SimpleListFilter):
    """Rows created within a fixed period before now (the last hour, today, the last 7 or 30 days): one indexed
    range on the creation time, with choices computed from the clock, not a ``SELECT DISTINCT`` of the table's dates
    as Django's date hierarchy runs per view. Its one parameter (``time``) is no field of the model, so
    ``GuardedAdmin.lookup_allowed`` accepts it alone, never a lookup on the field."""

    title = "time"
    parameter_name = "time"
    field_path = "created_at"
    PERIODS = {
        "hour": ("Last hour", timedelta(hours=1)),
        "today": ("Today", None),  # since the current time zone's midnight
        "7d": ("Last 7 days", timedelta(days=7)),
        "30d": ("Last 30 days", timedelta(days=30)),
    }

    def lookups(self, request, model_admin):
        return [(period, label) for period, (label, _) in self.PERIODS.items()]

    def queryset(self, request, queryset):
        period = self.value()
        if period is None:
            return queryset
        if period not in self.PERIODS:
            raise IncorrectLookupParameters(f"no period {period!r}")  # the unfiltered list (?e=1), as Django's own
        return queryset.filter(**{f"{self.field_path}__gte": self.start(period, timezone.now())})

    @classmethod
    def start(cls, period: str, now: datetime) -> datetime:
        """When ``period`` began at ``now``."""
        length = cls.PERIODS[period][1]
        if length is None:
            return timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
        return now - length
