"""WSGI entry point (gunicorn powercontext.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "powercontext.settings")
application = get_wsgi_application()

# gunicorn runs no system checks: a bad setting stops it here, as the check would stop runserver or migrate.
from infrastructure.conf import refuse_bad_settings  # noqa: E402 (settings must be configured first)

refuse_bad_settings()
