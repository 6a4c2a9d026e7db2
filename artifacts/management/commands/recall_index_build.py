"""Build or update this machine's search-engine index of the large scopes (POWERCONTEXT_SEARCH_INDEX_DIR).

Indexes every scope and family with at least POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS live documents, from
the database (the source of truth), showing progress. Without --rebuild an existing index is brought up to
date incrementally; --follow SECONDS repeats the update until stopped (one process per machine).
"""

from artifacts.management.index_builds import IndexBuildCommand
from artifacts.recall.conf import recall_settings
from artifacts.recall.engine import build, store
from artifacts.recall.index_files import Progress


class Command(IndexBuildCommand):
    help = __doc__
    index_name = "search index"
    pending_writes = "the recall documents"
    unit = "documents"

    def writer_lock(self):
        return store.writer_lock()

    def watermark(self, settle: float) -> int:
        # Raises the engine's WritesOpen, a sql.WritesOpen: documents written meanwhile stay ranked by SQL.
        return build.settled_watermark(settle)

    def targets(self, scope_pks: list[int] | None) -> list[tuple[int, str, int]]:
        minimum = recall_settings().search_index_min_documents
        targets = build.large_scopes(minimum, scope_pks=scope_pks)
        if not targets:
            self.stdout.write(f"no scope has {minimum:,} or more live documents of one family: nothing to index")
        return targets

    def index_update(
        self, scope_pk: int, family: str, *, watermark: int, rebuild: bool, progress: Progress
    ) -> build.UpdateResult:
        return build.index_update(scope_pk, family, watermark=watermark, rebuild=rebuild, progress=progress)

    def counted(self, result: build.UpdateResult) -> str:
        return f"{result.deleted:,} deleted, {result.documents:,} indexed up to document #{result.watermark}"
