"""Delete idempotency records older than POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS, showing progress."""

from django.core.management.base import BaseCommand

from artifacts.conf import idempotency_settings
from artifacts.services.idempotency import idempotent_writes_purge


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=1000, help="records deleted per statement (default 1000)")

    def handle(self, *args, batch: int, **options):
        hours = idempotency_settings().retention_hours
        self.stderr.write(f"purging idempotency records older than {hours} h")
        deleted = idempotent_writes_purge(batch=max(1, batch), progress=lambda n: self.stderr.write(f"  {n} deleted"))
        self.stdout.write(f"{deleted} idempotency record{'s' if deleted != 1 else ''} purged")
