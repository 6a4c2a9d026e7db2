"""Permissions of this app's models that Django's four per model do not cover (declared in each model's ``Meta``)."""

CHANGE_SCOPE_AUTHORITY = "artifacts.change_scope_authority"
"""Set a scope's authority tier on its admin form (with ``change_scope``, or ``add_scope`` for a new scope): the
tier decides which stored fact wins a conflict slot in every prepare reading the scope (seeds/003), so it is
granted apart from editing a scope's title and references; without it the tier is shown read-only."""
