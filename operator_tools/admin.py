"""The admin site as operators get it: the operator tools linked above the model list, every ModelAdmin guarded.

Django's own user and group admins are registered again with ``GuardedAdmin`` mixed in, so that they too answer
hostile query strings and posts as invalid input, never with a 500 (``artifacts.admin.guards``).
"""

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User

from artifacts.admin.guards import GuardedAdmin

admin.site.index_template = "admin/operator_tools/index.html"

for _model, _admin in ((User, UserAdmin), (Group, GroupAdmin)):
    admin.site.unregister(_model)
    admin.site.register(_model, type(_admin.__name__, (GuardedAdmin, _admin), {}))

from operator_tools import prepare_log_admin  # noqa: E402,F401 - registers the prepare log's admin
