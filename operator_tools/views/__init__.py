"""The operator tools' views, wired in ``powercontext/urls.py`` behind each tool's permissions (``access``)."""

from operator_tools.views.inspect import prepare_inspect_view
from operator_tools.views.resolve import citation_resolve_view

__all__ = ["citation_resolve_view", "prepare_inspect_view"]
