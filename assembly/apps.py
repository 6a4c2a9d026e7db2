from django.apps import AppConfig
from django.core import checks
from django.utils.module_loading import import_string

from assembly.conf import assembly_settings
from infrastructure.conf import SETTINGS_TAG
from vocabulary.families import ASSEMBLED_FAMILIES


class AssemblyConfig(AppConfig):
    name = "assembly"
    verbose_name = "Context assembly"

    def ready(self) -> None:
        checks.register(recall_configuration_check)
        # This app's settings checked at start-up (infrastructure/conf.py): a bad value is a check error naming it.
        checks.register(assembly_settings.check, SETTINGS_TAG)


def recall_configuration_check(app_configs: object, **kwargs: object) -> list[checks.CheckMessage]:
    """Refuse to start with a recall source or reranker that cannot be imported.

    A broken dotted path is a deployment mistake: it should stop start-up, not turn into 503s.
    """
    errors: list[checks.CheckMessage] = []
    if assembly_settings.problems():
        return errors  # the settings' own check (powercontext.E090) names them
    configured = assembly_settings()
    for family, path in configured.recall_sources.items():
        if family not in ASSEMBLED_FAMILIES:
            errors.append(checks.Error(f"POWERCONTEXT_RECALL_SOURCES names unknown family {family!r}", id="pc.E001"))
        elif path:
            errors += _importable(f"POWERCONTEXT_RECALL_SOURCES[{family!r}]", path)
    if configured.memory_reranker:
        errors += _importable("POWERCONTEXT_MEMORY_RERANKER", configured.memory_reranker)
    return errors


def _importable(name: str, path: str) -> list[checks.CheckMessage]:
    try:
        import_string(path)
    except ImportError as exc:
        return [checks.Error(f"{name} = {path!r} cannot be imported: {exc}", id="pc.E002")]
    return []
