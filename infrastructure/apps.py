from django.apps import AppConfig
from django.core import checks


class InfrastructureConfig(AppConfig):
    """Registers the infrastructure's own settings checks (each area's accessor, ``infrastructure/conf.py``); it has
    no models."""

    name = "infrastructure"
    verbose_name = "Infrastructure"

    def ready(self) -> None:
        from infrastructure import conf
        from infrastructure.admin_conf import admin_settings
        from infrastructure.database_conf import database_settings
        from infrastructure.metrics_conf import metrics_settings
        from infrastructure.replicas.conf import replica_settings

        for accessor in (replica_settings, metrics_settings, admin_settings, database_settings):
            checks.register(accessor.check, conf.SETTINGS_TAG)
