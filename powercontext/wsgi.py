"""WSGI entry point (gunicorn powercontext.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "powercontext.settings")
application = get_wsgi_application()

# gunicorn runs no system checks: a bad setting stops it here, as the check would stop runserver or migrate.
from infrastructure.conf import refuse_bad_settings  # noqa: E402 (settings must be configured first)

refuse_bad_settings()

# Deferred vectors (the default): this process embeds what writes left without a vector, those written while no
# server ran included (artifacts/recall/vectors/drainer.py).
from artifacts.recall.vectors.drainer import drainer_start  # noqa: E402

drainer_start()
