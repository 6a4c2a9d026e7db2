"""What the index-building commands share (``recall_index_build``, ``recall_vector_index_build``): their options,
the scopes named, the passes repeated with --follow, and one progress line per tenth of the work."""

import time
from collections.abc import Callable

from django.core.management.base import BaseCommand, CommandError

from artifacts.models import Scope
from artifacts.recall.conf import recall_settings


class IndexBuildCommand(BaseCommand):
    """A command that builds or updates this machine's indexes of the large scopes, pass after pass with --follow."""

    index_name = "index"
    """What the command builds, as its errors name it."""
    pending_writes = "rows"
    """The writes a pass waits for on PostgreSQL (--settle), as its help names them."""

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
        """One pass over every large scope (of ``scope_pks``, when given)."""
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
