"""What an admin page shows of another model: only to staff who hold that model's view permission too.

A page needs its own model's permission (``view_<model>``), but a row on it may carry another model's data: a memory
revision's live entry versions and their bodies, an author naming an API key (``api-key:<name>``) or a staff user
(``admin:<username>``), a prepare log entry's key, who changed a row (its history), a scope's references, a link to
another model's page. Each of those shows only to staff who also hold that model's view permission; others get a
redacted form that says which permission shows it (``api-key:…``, a key as ``id 7``, a link as its text alone), or
no column. The identity a citation carries (scope id, family, artifact id, revision, entry and version ids) names
the row itself: it shows with the row's own permission.

Django calls a page's display methods with the row alone, so a field or column whose value depends on who reads it
is an admin method ``(self, obj, user)`` marked with ``viewer_display``; ``RelatedDataAdmin`` binds it to the
request's user wherever the page names its fields and columns (``ViewerField``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_permission_codename, get_user_model
from django.utils.html import format_html

from artifacts.models import ApiKey
from vocabulary.escaping import short_identity

HIDDEN = "…"
"""What stands for a hidden name (``api-key:…``, a history's user)."""


def view_permission(model) -> str:
    """``model``'s view permission as ``has_perm`` takes it (``artifacts.view_apikey``)."""
    options = model._meta
    return f"{options.app_label}.{get_permission_codename('view', options)}"


def may_view(user, model) -> bool:
    """Whether ``user`` may view ``model``'s rows, and so see its data on other models' pages."""
    return user.has_perm(view_permission(model))


def hidden(shown: str, model, *, explained: bool = False):
    """``shown``, a redacted form, marked as hidden for want of ``model``'s view permission: its title says so, and on
    a row's page (``explained``) its text too (a list column keeps to the title)."""
    permission = view_permission(model)
    marked = format_html('<span class="powercontext-hidden" title="hidden: needs {}">{}</span>', permission, shown)
    if not explained:
        return marked
    return format_html('{} <span class="help">(hidden: needs the permission {})</span>', marked, permission)


def _named_authors() -> tuple[tuple[str, type], ...]:
    """The authors that name a row of another model: a write with an API key records ``api-key:<name>``, a profile
    candidate committed in the admin ``admin:<username>``."""
    return (("api-key:", ApiKey), ("admin:", get_user_model()))


def author_shown(author: str, user, *, explained: bool = False):
    """An author (a revision's, a candidate's proposer) as ``user`` may read it: one naming an API key or a staff user
    is ``api-key:…`` or ``admin:…`` without that model's view permission; any other (``fixture``) as stored."""
    for prefix, model in _named_authors():
        if author.startswith(prefix) and not may_view(user, model):
            return hidden(f"{prefix}{HIDDEN}", model, explained=explained)
    return short_identity(author)


def author_names_shown(user) -> bool:
    """Whether ``user`` reads every author whole (and may sort by it: the order would tell a hidden name)."""
    return all(may_view(user, model) for _, model in _named_authors())


def author_display(path: str, description: str, *, explained: bool = False):
    """A ``viewer_display`` field showing the author in ``path`` (``author``, ``proposed_by``) as ``author_shown``
    does: a list column, sortable by it for staff who read every author whole, or (``explained``) a row page's field.
    An admin's attribute: ``author_column = author_display("author", "author")``."""

    @viewer_display(description=description, ordering=path, sortable_for=author_names_shown)
    def shown(model_admin, obj, user):
        return author_shown(getattr(obj, path), user, explained=explained)

    return shown


@dataclass(frozen=True)
class _ViewerDisplay:
    description: str
    ordering: str | None
    sortable_for: Callable[[object], bool] | None


def viewer_display(
    *, description: str, ordering: str | None = None, sortable_for: Callable[[object], bool] | None = None
):
    """``admin.display`` for an admin method ``(self, obj, user)`` whose value depends on the viewer's permissions.
    Its column sorts by ``ordering`` only for viewers ``sortable_for`` accepts (all, when not given). The name an
    admin gives it is never a model field's (Django looks fields up by name)."""

    def decorate(method):
        method.viewer_display = _ViewerDisplay(description, ordering, sortable_for)
        return method

    return decorate


class ViewerField:
    """A ``viewer_display`` method bound to the user reading the page: Django calls it with the row alone, as any
    display callable. Django finds a page's fields by name (``field in readonly_fields``, ``field in form.fields``),
    so it equals the name the admin gives the method, whichever list bound it; the page's HTML names it so too."""

    def __init__(self, name: str, method, user):
        display = method.viewer_display
        self.method, self.user = method, user
        self.__name__ = name
        self.short_description = display.description
        if display.ordering is not None and (display.sortable_for is None or display.sortable_for(user)):
            self.admin_order_field = display.ordering

    def __call__(self, obj):
        return self.method(obj, self.user)

    def __eq__(self, other):
        if isinstance(other, ViewerField | str):
            return self.__name__ == (other if isinstance(other, str) else other.__name__)
        return NotImplemented

    def __hash__(self):
        return hash(self.__name__)

    def __repr__(self):
        return f"<ViewerField {self.__name__}>"


class _HiddenUser:
    """Who changed a row, to staff who may not view users: a history page reads its name from this."""

    def get_username(self):
        return hidden(HIDDEN, get_user_model())

    def get_full_name(self):
        return ""

    def __str__(self):
        return HIDDEN


class _HistoryEntryShown:
    """A history page's entry as the viewer may read it: the entry itself but for who made it and what it names."""

    def __init__(self, entry: LogEntry, user, change_message: str):
        self._entry, self.user, self._change_message = entry, user, change_message

    def get_change_message(self):
        return self._change_message

    def __getattr__(self, name):
        return getattr(self._entry, name)


class RelatedDataAdmin(admin.ModelAdmin):
    """A ModelAdmin whose ``viewer_display`` fields and columns are bound to the request's user, and whose history
    page names who changed the row and the inline rows a change added, changed or deleted only to staff who may view
    those models."""

    def _bind(self, request, item):
        if isinstance(item, list | tuple):  # fields shown on one line
            return type(item)(self._bind(request, name) for name in item)
        method = getattr(self, item, None) if isinstance(item, str) else None
        return ViewerField(item, method, request.user) if hasattr(method, "viewer_display") else item

    def get_list_display(self, request):
        return [self._bind(request, item) for item in super().get_list_display(request)]

    def get_readonly_fields(self, request, obj=None):
        return [self._bind(request, item) for item in super().get_readonly_fields(request, obj)]

    def get_fieldsets(self, request, obj=None):
        return [
            (name, {**options, "fields": [self._bind(request, item) for item in options["fields"]]})
            for name, options in super().get_fieldsets(request, obj)
        ]

    def history_view(self, request, object_id, extra_context=None):
        response = super().history_view(request, object_id, extra_context)
        page = getattr(response, "context_data", {}).get("action_list")
        if page is not None:
            page.object_list = [self._history_entry_shown(request, entry) for entry in page.object_list]
        return response

    def _history_entry_shown(self, request, entry: LogEntry):
        user = entry.user if may_view(request.user, get_user_model()) else _HiddenUser()
        # A change of inline rows names each one ("Added API key grant “ci → project:demo: read”"): its text only to
        # staff who may view that model.
        inline_models = {str(inline.model._meta.verbose_name): inline.model for inline in self.inlines}
        try:
            parts = json.loads(entry.change_message)
        except json.JSONDecodeError:
            parts = None
        if isinstance(parts, list):
            for part in parts:
                for change in part.values() if isinstance(part, dict) else ():
                    name = change.get("name") if isinstance(change, dict) else None
                    model = inline_models.get(name) if isinstance(name, str) else None
                    if model is not None and "object" in change and not may_view(request.user, model):
                        change["object"] = f"{HIDDEN} (hidden: needs {view_permission(model)})"
            message = LogEntry(change_message=json.dumps(parts)).get_change_message()
        else:
            message = entry.get_change_message()
        return _HistoryEntryShown(entry, user, message)
