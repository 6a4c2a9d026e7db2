"""What the index-building commands share (``recall_index_build``, ``recall_vector_index_build``): their options,
the scopes named, the passes repeated with --follow, each pass's steps and report, and one progress line per tenth of
the work."""

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from artifacts.models import Scope
from artifacts.recall.conf import recall_settings
from artifacts.recall.index_files import Progress, UpdateResult
from artifacts.recall.sql import WritesOpen


class IndexBuildCommand(BaseCommand):
    """A command that builds or updates this machine's indexes of the large scopes, pass after pass with --follow."""

    index_name = "index"
    """What the command builds, as its errors name it."""
    pending_writes = "rows"
    """The writes a pass waits for on PostgreSQL (--settle), as its help names them."""
    unit: str
    """What the index holds, as the progress and report lines count it (no default: each command names its own)."""

    def add_arguments(self, parser):
        parser.add_argument("--rebuild", action="store_true", help="drop every index's content and rebuild it")
        parser.add_argument("--scope", action="append", default=None, help="only this scope id (repeatable)")
        parser.add_argument("--follow", type=float, default=None, metavar="SECONDS", help="update again every SECONDS")
        parser.add_argument(
            "--settle",
            type=float,
            default=30.0,
            help=f"PostgreSQL: the longest to wait, in seconds, for writes to {self.pending_writes} still open when "
            "a pass starts (it indexes no further than its previous update until they end; default 30)",
        )

    def handle(self, *args, rebuild: bool, scope: list[str] | None, follow: float | None, settle: float, **options):
        if not recall_settings().search_index_dir:
            raise CommandError(f"POWERCONTEXT_SEARCH_INDEX_DIR is not set: there is no {self.index_name} to build")
        self.prepare()
        scope_pks = None
        if scope is not None:
            found = dict(Scope.objects.filter(scope_id__in=scope).values_list("scope_id", "pk"))
            if missing := sorted(set(scope) - set(found)):
                raise CommandError(f"unknown scope(s): {', '.join(missing)}")
            scope_pks = list(found.values())
        while True:
            self.update_all(rebuild=rebuild, scope_pks=scope_pks, settle=settle)
            if follow is None:
                return
            rebuild = False  # --rebuild applies to the first pass only
            time.sleep(max(0.1, follow))

    def prepare(self) -> None:
        """Check what the passes need before the first (raise ``CommandError`` if it is missing)."""

    def update_all(self, *, rebuild: bool, scope_pks: list[int] | None, settle: float) -> None:
        """One pass over every large scope (of ``scope_pks``, when given), under this machine's writer lock of the
        index: each index of ``targets`` brought up to one watermark, and reported on a line."""
        with self.writer_lock():
            try:
                watermark = self.watermark(settle)
            except WritesOpen as exc:
                # What they write stays ranked exactly (the unindexed tail) until a later pass indexes it.
                self.stderr.write(f"not updated: {exc}; the next pass tries again")
                return
            for scope_pk, family, held in self.targets(scope_pks):
                label = f"scope #{scope_pk} {family} ({held:,} {self.unit})"
                progress = self.progress(label, f"{self.unit} to add")
                result = self.index_update(scope_pk, family, watermark=watermark, rebuild=rebuild, progress=progress)
                self.stdout.write(
                    f"{label}: {'rebuilt' if result.rebuilt else 'updated'}, {result.added:,} added, "
                    f"{self.counted(result)} in {result.seconds:.1f}s"
                )

    def writer_lock(self) -> AbstractContextManager[Any]:
        """This machine's writer lock of the index: one build or update at a time."""
        raise NotImplementedError

    def watermark(self, settle: float) -> int:
        """The highest row id this pass indexes up to; raises ``WritesOpen`` while writes open more than ``settle``
        seconds keep it from being known."""
        raise NotImplementedError

    def targets(self, scope_pks: list[int] | None) -> list[tuple[int, str, int]]:
        """(scope pk, family, what it holds) of every index to update (of ``scope_pks``, when given); when there is
        none, say why on stdout."""
        raise NotImplementedError

    def index_update(
        self, scope_pk: int, family: str, *, watermark: int, rebuild: bool, progress: Progress
    ) -> UpdateResult:
        """Bring one index up to ``watermark`` (from scratch with ``rebuild``), reporting to ``progress``."""
        raise NotImplementedError

    def counted(self, result: Any) -> str:
        """What the report line of one update says after what it added: what it removed and what the index holds
        (``result``: the index's own ``UpdateResult``)."""
        raise NotImplementedError

    def progress(self, label: str, unit: str) -> Callable[[int, int], None]:
        """``progress(done, total)`` writing ``label: done/total unit (percent)`` to stderr once per tenth, and always
        the last one (``total`` 0: nothing to do, shown as done), so a log stays readable."""
        shown = {"tenth": -1}

        def progress(done: int, total: int) -> None:
            tenth = 10 if total == 0 else done * 10 // total
            if tenth != shown["tenth"]:
                shown["tenth"] = tenth
                percent = 100 if total == 0 else done * 100 // total
                self.stderr.write(f"  {label}: {done:,}/{total:,} {unit} ({percent}%)")

        return progress
