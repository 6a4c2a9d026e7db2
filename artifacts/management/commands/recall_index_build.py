"""Build or update this machine's search-engine index of the large scopes (POWERCONTEXT_SEARCH_INDEX_DIR).

Indexes every scope and family with at least POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS live documents, from
the database (the source of truth), showing progress. Without --rebuild an existing index is brought up to
date incrementally; --follow SECONDS repeats the update until stopped (one process per machine).
"""

import time

from django.core.management.base import BaseCommand, CommandError

from artifacts.models import Scope
from artifacts.recall.conf import recall_settings
from artifacts.recall.engine import build, store


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--rebuild", action="store_true", help="drop every index's content and rebuild it")
        parser.add_argument("--scope", action="append", default=None, help="only this scope id (repeatable)")
        parser.add_argument("--follow", type=float, default=None, metavar="SECONDS", help="update again every SECONDS")
        parser.add_argument(
            "--settle",
            type=float,
            default=30.0,
            help="PostgreSQL: the longest to wait, in seconds, for writes to the recall documents still open when a "
            "pass starts (it indexes no further than its previous update until they end; default 30)",
        )

    def handle(self, *args, rebuild: bool, scope: list[str] | None, follow: float | None, settle: float, **options):
        if not recall_settings().search_index_dir:
            raise CommandError("POWERCONTEXT_SEARCH_INDEX_DIR is not set: there is no search index to build")
        scope_pks = None
        if scope is not None:
            found = dict(Scope.objects.filter(scope_id__in=scope).values_list("scope_id", "pk"))
            if missing := sorted(set(scope) - set(found)):
                raise CommandError(f"unknown scope(s): {', '.join(missing)}")
            scope_pks = list(found.values())
        while True:
            self._update_all(rebuild=rebuild, scope_pks=scope_pks, settle=settle)
            if follow is None:
                return
            rebuild = False  # --rebuild applies to the first pass only
            time.sleep(max(0.1, follow))

    def _update_all(self, *, rebuild: bool, scope_pks: list[int] | None, settle: float) -> None:
        minimum = recall_settings().search_index_min_documents
        with store.writer_lock():
            try:
                watermark = build.settled_watermark(settle)
            except build.WritesOpen as exc:
                # Their documents stay ranked exactly by SQL (the unindexed tail) until a later pass indexes them.
                self.stderr.write(f"not updated: {exc}; the next pass tries again")
                return
            targets = build.large_scopes(minimum, scope_pks=scope_pks)
            if not targets:
                self.stdout.write(f"no scope has {minimum:,} or more live documents of one family: nothing to index")
            for scope_pk, family, documents in targets:
                label = f"scope #{scope_pk} {family} ({documents:,} documents)"
                result = build.index_update(
                    scope_pk, family, watermark=watermark, rebuild=rebuild, progress=self._progress(label)
                )
                self.stdout.write(
                    f"{label}: {'rebuilt' if result.rebuilt else 'updated'}, {result.added:,} added, "
                    f"{result.deleted:,} deleted, {result.documents:,} indexed up to document "
                    f"#{result.watermark} in {result.seconds:.1f}s"
                )

    def _progress(self, label: str):
        shown = {"tenth": -1}

        def progress(done: int, total: int) -> None:
            # One line per tenth (a log stays readable), and always the last one.
            tenth = 10 if total == 0 else done * 10 // total
            if tenth != shown["tenth"]:
                shown["tenth"] = tenth
                percent = 100 if total == 0 else done * 100 // total
                self.stderr.write(f"  {label}: {done:,}/{total:,} documents to add ({percent}%)")

        return progress
