from django.apps import AppConfig


class AssemblyConfig(AppConfig):
    name = "assembly"
    verbose_name = "Context assembly"
