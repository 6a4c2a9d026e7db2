"""``manage.py revoke_api_key NAME``: revoke a key; every later request with it answers 401."""

from django.core.management.base import BaseCommand, CommandError

from artifacts import selectors, services
from vocabulary.text import stored_text_problem


class Command(BaseCommand):
    help = "Revoke an API key by name. Requests with it are refused from now on (401); revoking is final."

    def add_arguments(self, parser):
        parser.add_argument("name", help="the key's name")

    def handle(self, *args, name, **options):
        api_key = None if stored_text_problem(name) else selectors.api_key_find_by_name(name=name)
        if api_key is None:
            raise CommandError(f"no API key named {name!r}")
        if api_key.revoked_at is not None:
            self.stdout.write(f"API key {name!r} was already revoked at {api_key.revoked_at.isoformat()}")
            return
        api_key = services.api_key_revoke(api_key=api_key)
        self.stdout.write(self.style.SUCCESS(f"revoked API key {name!r} at {api_key.revoked_at.isoformat()}"))
