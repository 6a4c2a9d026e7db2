from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class ArtifactsConfig(AppConfig):
    name = "artifacts"
    verbose_name = "Artifacts"

    def ready(self) -> None:
        # What this app adds to the project's shared infrastructure, registered from here so that the infrastructure
        # (``powercontext.metrics``, below the apps) never imports an app.
        from artifacts.recall.fusion import weights_by_model
        from artifacts.recall.vectors.lag import recall_vector_lag_text
        from powercontext import metrics

        metrics.scrape_extra_register(recall_vector_lag_text)
        # A bad fusion setting stops start-up, whatever runs it (a server, a worker, a command), naming the variable.
        try:
            weights_by_model(settings.POWERCONTEXT_RECALL_FUSION)
        except ValueError as exc:
            raise ImproperlyConfigured(f"POWERCONTEXT_RECALL_FUSION: {exc}") from None
