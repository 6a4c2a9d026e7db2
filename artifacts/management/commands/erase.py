"""Erase stored text and keep the proof (docs/erasure.md): one entry version, one revision's texts, or a whole scope.

    manage.py erase --scope project:demo --family memory --artifact memory --entry-version e1-v2 --reason "…"
    manage.py erase --scope project:demo --family experience --artifact exp-1 --revision 3 --reason "…"
    manage.py erase --scope project:demo --all --reason "…"

The texts are blanked, their hashes and the history chain kept, an erasure record appended to the erasure chain, the
texts taken out of recall and out of every logged prepare that showed them (``artifacts.services.erasure``). Then,
when this machine keeps a search-engine index, the scope's index is rebuilt so no index file holds the erased words;
every other machine's must be rebuilt there (``recall_index_build --rebuild --scope``).
"""

from __future__ import annotations

import getpass

from django.core.management.base import BaseCommand, CommandError

from artifacts.services.erasure import content_erase, erasure_index_rebuild
from vocabulary.errors import DomainError


class Command(BaseCommand):
    help = "Erase an entry version, a revision's texts or a whole scope, keeping every hash and an erasure record."

    def add_arguments(self, parser):
        parser.add_argument("--scope", required=True, help="the scope id")
        parser.add_argument("--family", help="the artifact's family (with --artifact)")
        parser.add_argument("--artifact", help="the artifact id (with --revision or --version)")
        parser.add_argument("--revision", type=int, help="erase this revision's texts (memory: its entry versions)")
        parser.add_argument("--entry-version", dest="version_id", help="erase this memory entry version")
        parser.add_argument("--all", action="store_true", dest="everything", help="erase everything the scope holds")
        parser.add_argument("--reason", required=True, help="why (kept in the erasure record)")
        parser.add_argument("--by", help="who erases (default: operator:<login name>)")

    def handle(self, *args, scope, family, artifact, revision, version_id, everything, reason, by, **options):
        if everything == (revision is not None or version_id is not None):
            raise CommandError("name either --revision or --entry-version (with --family and --artifact), or --all")
        try:
            record = content_erase(
                scope_id=scope,
                family=family,
                artifact_id=artifact,
                revision=revision,
                version_id=version_id,
                reason=reason,
                erased_by=by or f"operator:{getpass.getuser()}",
            )
        except DomainError as exc:
            raise CommandError(f"not erased: {exc}") from exc
        self.stdout.write(
            f"erasure #{record.sequence} ({record.kind}): {record.rows_erased} texts erased, "
            f"erased_sha256 {record.erased_sha256}, chain_sha256 {record.chain_sha256}"
        )
        erasure_index_rebuild(scope_id=scope)
