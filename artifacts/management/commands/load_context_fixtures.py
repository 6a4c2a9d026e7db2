"""``manage.py load_context_fixtures FILE…``: validate fixture files completely, then load them atomically."""

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from artifacts.fixtures import FixtureInvalid, fixture_files_load
from vocabulary.errors import DomainError


class Command(BaseCommand):
    help = (
        "Load context fixtures (scopes, API keys, artifacts with their revisions) from JSON files. "
        "The whole input is validated first; on any problem nothing is written and every problem is "
        "listed with its JSON path. Loading the same input again changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE", help="fixture JSON files, loaded together")

    def handle(self, *args, files, verbosity=1, **options):
        def progress(line: str) -> None:
            if verbosity >= 1:
                self.stdout.write(line)

        try:
            summary = fixture_files_load(files, progress=progress)
        except FixtureInvalid as exc:
            raise CommandError(exc.report()) from exc
        except DomainError as exc:  # e.g. a concurrent writer moved a head meanwhile
            path = getattr(exc, "path", "")
            raise CommandError(f"loading failed, nothing was written: {f'{path}: ' if path else ''}{exc}") from exc
        except DatabaseError as exc:  # e.g. a concurrent load created the same scope first
            raise CommandError(f"loading failed, nothing was written: database error: {exc}") from exc
        if verbosity >= 1:
            verb = "loaded" if summary.changed else "already loaded, nothing changed"
            self.stdout.write(self.style.SUCCESS(f"{verb}: {summary.line()}"))
