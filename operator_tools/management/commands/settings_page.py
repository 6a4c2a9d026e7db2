"""``manage.py settings_page [--write PATH]``: docs/settings.md, every environment variable the server reads, from the
declarations in powercontext/settings.py (``infrastructure.environment``)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from infrastructure.environment import VARIABLES, settings_page


class Command(BaseCommand):
    help = "Print (or write) the settings page: every environment variable, its type, default and meaning."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--write", metavar="PATH", help="write the page to PATH instead of printing it")

    def handle(self, *args, write: str | None = None, **options) -> None:
        page = settings_page()
        if write is None:
            self.stdout.write(page, ending="")
            return
        Path(write).write_text(page, encoding="utf-8")
        self.stderr.write(f"{write}: {len(VARIABLES)} variables")
