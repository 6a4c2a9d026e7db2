"""WSGI entry point (gunicorn powercontext.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "powercontext.settings")
application = get_wsgi_application()
