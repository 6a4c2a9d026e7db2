"""Delete prepare log entries older than POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS, showing progress."""

from django.conf import settings
from django.core.management.base import BaseCommand

from artifacts.services import prepare_log_purge


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=1000, help="entries deleted per statement (default 1000)")

    def handle(self, *args, batch: int, **options):
        days = settings.POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS
        self.stderr.write(f"purging prepare log entries older than {days} days")
        deleted = prepare_log_purge(batch=max(1, batch), progress=lambda n: self.stderr.write(f"  {n} deleted"))
        self.stdout.write(f"{deleted} prepare log {'entry' if deleted == 1 else 'entries'} purged")
