"""``manage.py export_scope SCOPE… [--output FILE]``: everything the scopes hold, as a fixture that loads back."""

from __future__ import annotations

import io
import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from artifacts.fixtures.export import PROGRESS_EVERY_REVISIONS, scopes_export
from vocabulary.errors import DomainError


class Command(BaseCommand):
    help = (
        "Export scopes with every revision of every artifact (authors and times included) as one context fixture "
        "(docs/fixtures.md) that load_context_fixtures loads into another database as the same history: same "
        "content and chain hashes, same exact reads. Progress goes to stderr; the file is streamed."
    )

    def add_arguments(self, parser):
        parser.add_argument("scope_ids", nargs="*", metavar="SCOPE", help="scope ids to export (in one file)")
        parser.add_argument("--all", action="store_true", dest="every_scope", help="export every scope")
        parser.add_argument(
            "--output",
            "-o",
            metavar="FILE",
            help="write to FILE (through FILE.partial, renamed when complete); default: stdout",
        )
        parser.add_argument(
            "--progress-every",
            type=int,
            default=PROGRESS_EVERY_REVISIONS,
            metavar="N",
            help=f"a progress line every N revisions (default {PROGRESS_EVERY_REVISIONS})",
        )

    def handle(
        self,
        *args,
        scope_ids,
        every_scope=False,
        output=None,
        progress_every=PROGRESS_EVERY_REVISIONS,
        verbosity=1,
        **options,
    ):
        if progress_every < 1:
            raise CommandError("--progress-every must be at least 1")
        if bool(scope_ids) == every_scope:
            raise CommandError("name the scopes to export, or give --all (not both)")
        if every_scope:
            scope_ids = None

        def progress(line: str) -> None:
            if verbosity >= 1:
                self.stderr.write(line)

        try:
            if output is None:
                summary = self._to_stdout(scope_ids, progress, progress_every)
            else:
                summary = self._to_file(Path(output), scope_ids, progress, progress_every)
        except DomainError as exc:  # an unknown scope, erased text
            raise CommandError(f"nothing was exported: {exc}") from exc
        except DatabaseError as exc:
            raise CommandError(f"export failed: database error: {exc}") from exc
        progress(f"exported: {summary.line()}" + (f" to {output}" if output else ""))

    def _to_stdout(self, scope_ids, progress, every):
        buffer = getattr(self.stdout, "buffer", None)  # a real stdout: UTF-8 whatever the locale says
        if buffer is None:  # a text stream (call_command(stdout=StringIO()))
            return scopes_export(scope_ids=scope_ids, out=_Text(self.stdout), progress=progress, progress_every=every)
        out = io.TextIOWrapper(buffer, encoding="utf-8", newline="\n")
        try:
            return scopes_export(scope_ids=scope_ids, out=out, progress=progress, progress_every=every)
        finally:
            out.flush()
            out.detach()

    def _to_file(self, path: Path, scope_ids, progress, every):
        partial = path.with_name(path.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8", newline="\n") as out:
                summary = scopes_export(scope_ids=scope_ids, out=out, progress=progress, progress_every=every)
            os.replace(partial, path)
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from exc
        finally:
            if partial.exists():
                partial.unlink()
        return summary


class _Text:
    """A command's stdout as a plain text stream (Django's wrapper ends every write with a newline)."""

    def __init__(self, wrapper) -> None:
        self.wrapper = wrapper

    def write(self, text: str) -> None:
        self.wrapper.write(text, ending="")
