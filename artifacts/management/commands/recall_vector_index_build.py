"""Build or update this machine's dense (HNSW) index of the large scopes' vectors (under POWERCONTEXT_SEARCH_INDEX_DIR).

Indexes every scope and family with at least POWERCONTEXT_DENSE_INDEX_MIN_VECTORS vectors by the configured
embeddings model, from the database (the source of truth), showing progress. Without --rebuild an existing index is
brought up to date incrementally (a missing or damaged one is rebuilt); --follow SECONDS repeats the update until
stopped (one process per machine).
"""

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from artifacts.management.index_builds import IndexBuildCommand
from artifacts.recall.conf import recall_settings
from artifacts.recall.sql import WritesOpen
from artifacts.recall.vectors.ann import build, store
from artifacts.recall.vectors.providers import configured_provider


class Command(IndexBuildCommand):
    help = __doc__
    index_name = "dense index"
    pending_writes = "the recall vectors"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--threads",
            type=int,
            default=None,
            help=f"threads to add vectors on (default: every core but one, {build.default_threads()} here)",
        )

    def handle(self, *args, **options):
        threads = options.pop("threads")
        if threads is not None and threads < 1:
            raise CommandError("--threads must be 1 or more")
        self.threads = threads
        super().handle(*args, **options)

    def prepare(self) -> None:
        try:
            provider = configured_provider()
        except ImproperlyConfigured as exc:
            raise CommandError(f"the embeddings settings are invalid: {exc}") from exc
        if provider is None:
            raise CommandError("no embeddings provider is configured: there are no vectors to index")
        self.model_id, self.dimension = provider.model_id, provider.dimension

    def update_all(self, *, rebuild: bool, scope_pks: list[int] | None, settle: float) -> None:
        model_id, dimension = self.model_id, self.dimension
        minimum = recall_settings().dense_index_min_vectors
        with store.writer_lock():
            try:
                watermark = build.vector_watermark(settle)
            except WritesOpen as exc:
                # Their vectors stay ranked exactly (the unindexed tail) until a later pass indexes them.
                self.stderr.write(f"not updated: {exc}; the next pass tries again")
                return
            targets = build.large_pairs(minimum, model_id=model_id, dimension=dimension, scope_pks=scope_pks)
            if not targets:
                message = f"no scope has {minimum:,} or more vectors of one family by {model_id}: nothing to index"
                self.stdout.write(message)
            for scope_pk, family, vectors in targets:
                label = f"scope #{scope_pk} {family} ({vectors:,} vectors)"
                result = build.index_update(
                    scope_pk,
                    family,
                    model_id=model_id,
                    dimension=dimension,
                    watermark=watermark,
                    rebuild=rebuild,
                    progress=self.progress(label, "vectors to add"),
                    threads=self.threads,
                )
                self.stdout.write(
                    f"{label}: {'rebuilt' if result.rebuilt else 'updated'}, {result.added:,} added, "
                    f"{result.removed:,} removed, {result.vectors:,} indexed up to vector #{result.watermark} "
                    f"in {result.seconds:.1f}s"
                )
