"""The admin index links the operator tools (citation resolver, prepare inspector) above the model list."""

from django.contrib import admin

admin.site.index_template = "admin/operator_tools/index.html"

from operator_tools import prepare_log_admin  # noqa: E402,F401 - registers the prepare log's admin
