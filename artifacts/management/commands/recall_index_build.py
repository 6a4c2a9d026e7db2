"""Build or update this machine's search-engine index of the large scopes (POWERCONTEXT_SEARCH_INDEX_DIR).

Indexes every scope and family with at least POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS live documents, from
the database (the source of truth), showing progress. Without --rebuild an existing index is brought up to
date incrementally; --follow SECONDS repeats the update until stopped (one process per machine).
"""

from artifacts.management.index_builds import IndexBuildCommand
from artifacts.recall.conf import recall_settings
from artifacts.recall.engine import build, store


class Command(IndexBuildCommand):
    help = __doc__
    index_name = "search index"
    pending_writes = "the recall documents"

    def update_all(self, *, rebuild: bool, scope_pks: list[int] | None, settle: float) -> None:
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
                    scope_pk,
                    family,
                    watermark=watermark,
                    rebuild=rebuild,
                    progress=self.progress(label, "documents to add"),
                )
                self.stdout.write(
                    f"{label}: {'rebuilt' if result.rebuilt else 'updated'}, {result.added:,} added, "
                    f"{result.deleted:,} deleted, {result.documents:,} indexed up to document "
                    f"#{result.watermark} in {result.seconds:.1f}s"
                )
