"""Delete prepare log entries older than POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS, then the oldest beyond
POWERCONTEXT_PREPARE_LOG_MAX_MB, showing progress; on SQLite, then checkpoint and truncate the write-ahead log."""

from django.core.management.base import BaseCommand

from artifacts.conf import prepare_log_settings
from artifacts.services import database_wal_checkpoint, prepare_log_purge


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=1000, help="entries deleted per statement (default 1000)")

    def handle(self, *args, batch: int, **options):
        log = prepare_log_settings()
        days, cap = log.retention_days, log.max_mb
        cap_text = f", then the oldest beyond {cap} MB" if cap else ""
        self.stderr.write(f"purging prepare log entries older than {days} days{cap_text}")
        deleted = prepare_log_purge(batch=max(1, batch), progress=lambda n: self.stderr.write(f"  {n} deleted"))
        self.stdout.write(f"{deleted} prepare log {'entry' if deleted == 1 else 'entries'} purged")
        checkpoint = database_wal_checkpoint()
        if checkpoint is not None:
            frames, checkpointed = checkpoint
            self.stderr.write(f"SQLite write-ahead log checkpointed: {checkpointed} of {frames} frames")
