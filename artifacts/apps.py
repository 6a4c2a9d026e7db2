from django.apps import AppConfig
from django.core import checks


class ArtifactsConfig(AppConfig):
    name = "artifacts"
    verbose_name = "Artifacts"

    def ready(self) -> None:
        # What this app adds to the project's shared infrastructure, registered from here so that the infrastructure
        # (``infrastructure``, below the apps) never imports an app.
        from artifacts.conf import idempotency_settings, prepare_log_settings
        from artifacts.recall.conf import embeddings_settings, recall_settings
        from artifacts.recall.hybrid import fusion_settings_check
        from artifacts.recall.vectors.lag import recall_vector_lag_text
        from infrastructure import conf, metrics

        metrics.scrape_extra_register(recall_vector_lag_text)
        # Each area's settings checked at start-up (infrastructure/conf.py): a bad value is a check error naming it.
        checks.register(recall_settings.check, conf.SETTINGS_TAG)
        checks.register(embeddings_settings.check, conf.SETTINGS_TAG)
        checks.register(prepare_log_settings.check, conf.SETTINGS_TAG)
        checks.register(idempotency_settings.check, conf.SETTINGS_TAG)
        checks.register(fusion_settings_check, conf.SETTINGS_TAG)
