"""Operator admin. Revisions and entry versions are immutable: their pages are read-only.

Stored text is shown exactly and never interpreted as HTML; when it holds invisible or control
characters (a bidi override, a zero-width space, a tab) it is also shown with each of them escaped as
``\\uXXXX``, so what an agent saw can be read unambiguously. The operator tools (citation resolver,
prepare inspector) live in the ``operator_tools`` app, which links them from the admin index.

One module a subject. The ModelAdmins:

- ``history``: artifacts, their revisions and memory entry versions (read-only);
- ``scopes``: scopes and their references, the authority tier;
- ``profiles``: profile candidates, committed or rejected;
- ``keys``: API keys and their grants;
- ``erasure``: the erasure records, and the erase page of a revision, an entry version or a scope.

What they share, public to the operator tools' admin pages too:

- ``display``: stored text and identities shown exactly (``text_shown``, ``identity_column``, ``ReadOnlyAdmin``);
- ``related``: another model's data only to staff who may view it (``may_view``, ``viewer_display``);
- ``guards``: hostile query strings and posts answered as invalid input (``GuardedAdmin``);
- ``filters`` and ``paging``: list filters and counts whose cost does not grow with the table.

Django's autodiscover imports this package: importing the modules below registers their ModelAdmins.
"""

from artifacts.admin import erasure, history, keys, profiles, scopes

__all__ = ["erasure", "history", "keys", "profiles", "scopes"]
