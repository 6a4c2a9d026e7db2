"""Which permission each operator tool needs (docs/deployment.md, "Staff roles"), in one table.

The URL wiring (``powercontext/urls.py``), the admin index and every page that links a tool read it, so a tool's
link shows only to staff who may use it, and staff without its permissions get 403 (never the tool's form).
Tenants' text is the guarded thing: the inspector prepares it (as the operator over every scope, or as any key
over that key's scopes: one permission for both, since either shows what tenants stored), and logged queries and
re-rendered content are a separate permission from the prepare log's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import wraps

from django.contrib import admin
from django.core.exceptions import PermissionDenied

RUN_PREPARE_INSPECTOR = "artifacts.run_prepare_inspector"
VIEW_PREPARE_LOG_CONTENT = "artifacts.view_prepare_log_content"


@dataclass(frozen=True)
class OperatorTool:
    """One operator tool: its URL name, its link on the admin index, and every permission it needs."""

    url_name: str
    title: str
    help: str
    permissions: tuple[str, ...]

    def allowed(self, user) -> bool:
        return user.is_active and user.is_staff and user.has_perms(self.permissions)


RESOLVER = OperatorTool(
    url_name="admin-citation-resolve",
    title="Resolve a citation",
    help="Paste a citation from prepared content; open that exact revision or entry version.",
    # It opens either page: a revision's, or an entry version's.
    permissions=("artifacts.view_artifactrevision", "artifacts.view_memoryentryversion"),
)
INSPECTOR = OperatorTool(
    url_name="admin-prepare-inspect",
    title="Prepare inspector",
    help="Run a prepare read-only; see its content and every candidate's decision.",
    permissions=(RUN_PREPARE_INSPECTOR,),
)
PREPARE_LOG = OperatorTool(
    url_name="admin:artifacts_preparelog_changelist",
    title="Prepare log",
    help="Every past prepare: the exact text the agent got, re-rendered and proven, and why.",
    # The log's metadata; its queries and content also need VIEW_PREPARE_LOG_CONTENT (prepare_log_admin).
    permissions=("artifacts.view_preparelog",),
)
TOOLS = (RESOLVER, INSPECTOR, PREPARE_LOG)
TOOLS_BY_URL_NAME = {tool.url_name: tool for tool in TOOLS}


def tool_view(tool: OperatorTool, view):
    """``view`` for staff who hold ``tool``'s permissions: others log in (``admin_view``) or get 403."""

    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not tool.allowed(request.user):
            raise PermissionDenied(f"{tool.title} needs the permissions {', '.join(tool.permissions)}")
        return view(request, *args, **kwargs)

    return admin.site.admin_view(guarded)
