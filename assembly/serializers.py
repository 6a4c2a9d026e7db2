"""Moved to ``assembly.api.serializers``; kept only for the prepare inspector's import.

Delete once the operator tools (assembly/admin_views.py, being moved to their own app) import
``assembly.api.serializers``.
"""

from assembly.api.serializers import PrepareContextRequestSerializer

__all__ = ["PrepareContextRequestSerializer"]
