from django.apps import AppConfig


class OperatorToolsConfig(AppConfig):
    name = "operator_tools"
    verbose_name = "Operator tools"
