"""Template tags of the operator pages: which operator tools the logged-in user may use (``operator_tools.access``)."""

from django import template

from operator_tools.access import TOOLS, TOOLS_BY_URL_NAME

register = template.Library()


@register.simple_tag
def operator_tools_for(user) -> list:
    """The tools ``user`` may use, in the admin index's order."""
    return [tool for tool in TOOLS if tool.allowed(user)]


@register.filter
def may_use(user, url_name: str) -> bool:
    """``{% if request.user|may_use:"admin-prepare-inspect" %}``: whether a link to that tool may be shown."""
    return TOOLS_BY_URL_NAME[url_name].allowed(user)
