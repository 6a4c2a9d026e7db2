"""The operator admin's answer to hostile query strings and posts: what Django gives an invalid lookup, never a 500.

Django's change list redirects to ``?e=1`` (the unfiltered list) when a filter's value cannot be a lookup, but a
few values pass its checks and fail later: a NUL character in a text filter (PostgreSQL refuses it when the query
runs), a date-hierarchy year outside ``datetime``'s range (an ``OverflowError``, or a ``ValueError`` when the year
after 9999 is computed), and a selected row id that is no id at all when an action is posted. ``GuardedAdmin``
turns each into the answer Django gives its other invalid input; every ModelAdmin of the site derives from it
(``operator_tools.admin`` re-registers Django's own user and group admins so).

It also narrows which lookups a change list's URL may carry to the filters the page offers (``lookup_allowed``):
Django lets a URL filter on any of a model's own fields, which let staff who may only view a list probe text the
page hides (a logged query, a key's hash, one character at a time) or send the database a regular expression.

A row's history page asks for the permission before it reads the row (Django reads it first, so staff without the
permission could tell the ids that exist from those that do not), and an autocomplete field redrawn with a posted id
that is no id (text, a number beyond the column) leaves it out instead of looking it up as it is (a 500): the form
says the choice is invalid (``GuardedAutocomplete``, for inlines too).
"""

from django.contrib import messages
from django.contrib.admin import helpers
from django.contrib.admin.filters import SimpleListFilter
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.contrib.admin.widgets import AutocompleteSelect
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connections, models, router
from django.db.models.constants import LOOKUP_SEP

from artifacts.admin.related import RelatedDataAdmin

NUL = "\x00"
PATTERN_LOOKUPS = frozenset({"regex", "iregex"})
"""Refused even on an offered filter: a pattern runs in the database (in Python on SQLite, with no statement
timeout), and one that backtracks holds the worker for minutes."""


class GuardedChangeList(ChangeList):
    """A change list whose filters refuse NUL characters and dates beyond ``datetime`` as invalid lookups, and whose
    ``?o=`` sorts only by the columns its admin's ``sortable_by`` names (Django honours it in the headers alone: a
    URL could sort a large table by any column, an unindexed one included)."""

    def get_ordering_field(self, field_name):
        if self.sortable_by is not None and field_name not in self.sortable_by:
            return None  # as for a column with no ordering: the ``?o=`` index is skipped
        return super().get_ordering_field(field_name)

    def get_filters(self, request):
        for key, values in self.get_filters_params().items():
            if NUL in key or any(NUL in value for value in values):
                # No stored text holds NUL (the API and every form refuse it) and PostgreSQL cannot compare with it.
                raise IncorrectLookupParameters(f"a NUL character in the filter {key!r}")
        try:
            return super().get_filters(request)
        except (OverflowError, ValueError) as exc:  # the date hierarchy's bounds, computed outside Django's check
            raise IncorrectLookupParameters(exc) from exc


def comparable(field: models.Field, value: str, *, using: str) -> bool:
    """True when ``value`` (posted text) is a value of ``field`` the database can compare: one the field can parse and,
    for an integer column, within its range (Python parses any size; the database overflows); never a NUL."""
    try:
        parsed = field.to_python(value)
    except ValidationError:
        return False
    if isinstance(field, models.IntegerField):
        low, high = connections[using].ops.integer_field_range(field.get_internal_type())
        return (low is None or parsed >= low) and (high is None or parsed <= high)
    return NUL not in str(parsed)


class GuardedAutocompleteSelect(AutocompleteSelect):
    """Django's autocomplete widget, redrawn for a form posted with an id that is no id: Django looks every posted id
    up as it is (text in an integer lookup, a number beyond the column: a 500); those are left out, so the form shows
    again with its own error, "select a valid choice"."""

    def optgroups(self, name, value, attr=None):
        remote = self.field.remote_field
        target = remote.model._meta.get_field(remote.field_name)
        using = self.db or router.db_for_read(remote.model)
        empty = self.choices.field.empty_values
        value = [v for v in value if v in empty or comparable(target, str(v), using=using)]
        return super().optgroups(name, value, attr)


class GuardedAutocomplete:
    """Mixed into a ModelAdmin or an inline: its autocomplete fields use ``GuardedAutocompleteSelect``."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if "widget" not in kwargs and db_field.name in self.get_autocomplete_fields(request):
            kwargs["widget"] = GuardedAutocompleteSelect(db_field, self.admin_site, using=kwargs.get("using"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class GuardedAdmin(GuardedAutocomplete, RelatedDataAdmin):
    """A ModelAdmin whose change list, search (the autocomplete's too) and actions answer hostile input as Django
    answers invalid input: the unfiltered list (``?e=1``), no results, or "no items have been changed"; and which
    shows another model's data only to staff who may view that model (``artifacts.admin.related``)."""

    def get_changelist(self, request, **kwargs):
        return GuardedChangeList

    def lookup_allowed(self, lookup, value, request):
        """Only the lookups of the page's own filters: a list filter's field path (and its lookups, e.g.
        ``scope__id__exact``), a custom filter's own parameter exactly, or the date hierarchy's; never a pattern.
        Anything else is Django's answer to a disallowed lookup (400), whatever field the model has."""
        paths, parameters = self._offered_lookups(request)
        if lookup not in parameters and not any(
            lookup == path or lookup.startswith(path + LOOKUP_SEP) for path in paths
        ):
            return False
        if lookup.rsplit(LOOKUP_SEP, 1)[-1] in PATTERN_LOOKUPS:
            return False
        return super().lookup_allowed(lookup, value, request)

    def _offered_lookups(self, request) -> tuple[set[str], set[str]]:
        """The field paths the page filters on (any lookup under them is theirs) and the custom filters' own
        parameters (a name, not a field: nothing under it is a lookup)."""
        paths: set[str] = {self.date_hierarchy} if self.date_hierarchy else set()
        parameters: set[str] = set()
        for item in self.get_list_filter(request):
            if isinstance(item, type) and issubclass(item, SimpleListFilter):
                # Never None on a page that loads: Django refuses a SimpleListFilter without a parameter_name.
                if item.parameter_name is not None:
                    parameters.add(item.parameter_name)
            else:
                # The pages filter on field names, alone or in a (name, filter class) pair.
                path = item[0] if isinstance(item, list | tuple) else item
                if isinstance(path, str):
                    paths.add(path)
        return paths, parameters

    def get_search_results(self, request, queryset, search_term):
        if NUL in search_term:
            # The change list's search form refuses NUL itself; the autocomplete passes its term on unchecked.
            return queryset.none(), False
        return super().get_search_results(request, queryset, search_term)

    # A row's pages ask for the permission before they read the row. Django reads it first: its history page then
    # answered a missing id with a redirect ("doesn't exist") and an existing one with 403, and every page took
    # longer for a row that exists.
    def change_view(self, request, object_id, form_url="", extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        return super().change_view(request, object_id, form_url, extra_context)

    def delete_view(self, request, object_id, extra_context=None):
        if not self.has_delete_permission(request):
            raise PermissionDenied
        return super().delete_view(request, object_id, extra_context)

    def history_view(self, request, object_id, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        return super().history_view(request, object_id, extra_context)

    def response_action(self, request, queryset, *args, **kwargs):
        # Django 6.1 passes more (the action's location on the page); whatever it passes goes on unchanged.
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        if not all(self._is_stored_pk(value, using=queryset.db) for value in selected):
            self.message_user(
                request, "A selected item is not an id of this list. No items have been changed.", messages.WARNING
            )
            return None  # the change list redirects to itself, as Django does for an action that selected nothing
        return super().response_action(request, queryset, *args, **kwargs)

    def _is_stored_pk(self, value: str, *, using: str) -> bool:
        """True when ``value`` is a primary key value the database can compare (not only one Python can parse)."""
        return comparable(self.model._meta.pk, value, using=using)
