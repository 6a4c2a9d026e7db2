"""The admin index links the operator tools (citation resolver, prepare inspector) above the model list."""

from django.contrib import admin

admin.site.index_template = "admin/operator_tools/index.html"
