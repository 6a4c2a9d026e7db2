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
from artifacts.recall.index_files import Progress
from artifacts.recall.vectors.ann import build, store
from artifacts.recall.vectors.providers import configured_provider


class Command(IndexBuildCommand):
    help = __doc__
    index_name = "dense index"
    pending_writes = "the recall vectors"
    unit = "vectors"

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

    def writer_lock(self):
        return store.writer_lock()

    def watermark(self, settle: float) -> int:
        return build.vector_watermark(settle)

    def targets(self, scope_pks: list[int] | None) -> list[tuple[int, str, int]]:
        minimum = recall_settings().dense_index_min_vectors
        targets = build.large_pairs(minimum, model_id=self.model_id, dimension=self.dimension, scope_pks=scope_pks)
        if not targets:
            message = f"no scope has {minimum:,} or more vectors of one family by {self.model_id}: nothing to index"
            self.stdout.write(message)
        return targets

    def index_update(
        self, scope_pk: int, family: str, *, watermark: int, rebuild: bool, progress: Progress
    ) -> build.UpdateResult:
        return build.index_update(
            scope_pk,
            family,
            model_id=self.model_id,
            dimension=self.dimension,
            watermark=watermark,
            rebuild=rebuild,
            progress=progress,
            threads=self.threads,
        )

    def counted(self, result: build.UpdateResult) -> str:
        return f"{result.removed:,} removed, {result.vectors:,} indexed up to vector #{result.watermark}"
