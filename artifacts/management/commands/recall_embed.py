"""Embed every live recall document without a vector by the configured model (POWERCONTEXT_EMBEDDINGS).

Resumable: each run picks up the documents still without a vector. Shows progress on stderr: on a terminal one line
redrawn in place (done/total, percent, rate, time left), else a line per batch (counts and rate).
--follow SECONDS keeps polling for new documents until SIGINT or SIGTERM, which stop it after the batch in hand.
--long, once after upgrading past issue 52: embeds again every document with a vector whose text is longer than one
piece (1,024 characters): such vectors stored before the bound embedded the whole text, where a write now embeds
its first pieces (at most four, their vectors' mean). Stopped, it keeps what it replaced; run again, it starts over.
"""

import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from artifacts.recall.vectors.providers import PASSAGE_CHUNK_CHARS, EmbeddingUnavailable, configured_provider
from artifacts.recall.vectors.selectors import long_documents_count, recall_vector_lag
from artifacts.recall.vectors.services import DEFAULT_BATCH_SIZE, EmbedProgress, recall_vectors_embed_pending


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="documents per batch")
        parser.add_argument(
            "--follow", type=float, default=None, metavar="SECONDS", help="embed new documents every SECONDS"
        )
        parser.add_argument(
            "--long",
            action="store_true",
            help=f"embed again the documents with a vector longer than {PASSAGE_CHUNK_CHARS:,} characters (once, "
            "after upgrading: vectors stored before issue 52 embedded the whole text)",
        )

    def handle(self, *args, batch_size: int, follow: float | None, long: bool, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        if long and follow is not None:
            raise CommandError("--long is one pass: it does not go with --follow")
        provider = configured_provider()
        if provider is None:
            raise CommandError("POWERCONTEXT_EMBEDDINGS_PROVIDER is off: there is nothing to embed with")
        if long:
            if pending := long_documents_count(model_id=provider.model_id, dimension=provider.dimension):
                self._embed(provider, batch_size, pending, threading.Event(), follow=False, long_again=True)
            else:
                self.stdout.write(f"{provider.model_id}: no document longer than {PASSAGE_CHUNK_CHARS:,} characters")
            return
        stop = threading.Event()
        restore = self._stop_on_signals(stop) if follow is not None else {}
        try:
            while True:
                pending = recall_vector_lag(model_id=provider.model_id, dimension=provider.dimension)
                if pending:
                    self._embed(provider, batch_size, pending, stop, follow=follow is not None)
                elif follow is None:
                    self.stdout.write(f"{provider.model_id}: every document has a vector")
                if follow is None or stop.wait(max(0.1, follow)):
                    return
        finally:
            for number, handler in restore.items():
                signal.signal(number, handler)

    def _embed(
        self, provider, batch_size: int, pending: int, stop: threading.Event, *, follow: bool, long_again: bool = False
    ) -> None:
        # On a terminal one line is redrawn in place; into a file or a pipe (a log), a line per batch.
        terminal = self.stderr.isatty()
        drawn = False

        def progress(state: EmbedProgress) -> None:
            nonlocal drawn
            if terminal:
                drawn = True
                # Plain, not the error style Django gives stderr on a terminal; \x1b[K clears a longer line's rest.
                line = progress_line(provider.model_id, state, pending)
                self.stderr.write(f"\r{line}\x1b[K", ending="", style_func=str)
                self.stderr.flush()
                return
            self.stderr.write(
                f"  {provider.model_id}: {state.embedded:,}/{pending:,} documents embedded "
                f"({state.rate:,.1f}/s, {state.seconds:,.1f}s)"
            )

        try:
            try:
                state = recall_vectors_embed_pending(
                    provider=provider,
                    batch_size=batch_size,
                    progress=progress,
                    should_stop=stop.is_set,
                    long_again=long_again,
                )
            finally:
                if drawn:
                    self.stderr.write("")  # ends the redrawn line
        except EmbeddingUnavailable as exc:
            if not follow:
                raise CommandError(f"embedding stopped: {exc}; run again to resume") from None
            self.stderr.write(f"embedding stopped: {exc}; the next round tries again")
            return
        if long_again:
            self.stdout.write(
                f"{provider.model_id}: {state.embedded:,} documents longer than {PASSAGE_CHUNK_CHARS:,} characters "
                f"embedded again in {state.seconds:.1f}s"
            )
            return
        self.stdout.write(
            f"{provider.model_id}: {state.embedded:,} documents embedded in {state.seconds:.1f}s, "
            f"{recall_vector_lag(model_id=provider.model_id, dimension=provider.dimension):,} without a vector"
        )

    @staticmethod
    def _stop_on_signals(stop: threading.Event) -> dict:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for number in (signal.SIGINT, signal.SIGTERM):
            previous[number] = signal.signal(number, lambda *_: stop.set())
        return previous


def progress_line(model_id: str, state: EmbedProgress, pending: int) -> str:
    """Where a pass stands, for a terminal's redrawn line: done/total, percent, rate and time left at that rate (the
    total is the documents pending when the pass began; some written since may be embedded too)."""
    total = max(pending, state.embedded)
    left = (total - state.embedded) / state.rate if state.rate > 0 else None
    return (
        f"  {model_id}: {state.embedded:,}/{total:,} documents embedded ({state.embedded / total:.0%}), "
        f"{state.rate:,.1f}/s, ETA {_duration(left)}"
    )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}h{minute:02d}m{second:02d}s" if hours else f"{minute}m{second:02d}s" if minute else f"{second}s"
