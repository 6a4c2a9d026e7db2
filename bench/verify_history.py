"""How long ``manage.py verify_history`` takes on a large history, and how much memory it needs.

    python bench/verify_history.py --engine sqlite [--revisions 100000]

Builds a throwaway database (``bench.common.throwaway_database``) with ``--revisions`` revisions, loaded in bulk
with the history guards lifted and every hash computed as the services compute it (``vocabulary.history``): half
of them in memory artifacts (25 revisions each, every revision adding one entry and, from the third on, replacing
one), half in experiences (5 revisions each). Then, each in a fresh process, it times verify_history (which must
find nothing), migration 0011's backfill of the same revisions (encoding 1 chains) and migration 0022's upgrade of
them (verified under encoding 1, written under encoding 2), printing seconds and the process's peak
resident memory (``ru_maxrss``) beside that of a process that only set Django up. ``--erasures N`` first erases N
entry versions and the whole first scope (``content_erase``), then times verify_history over the erased history.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import PYTHON, ROOT, django_env, log, throwaway_database  # noqa: E402

MEMORY_REVISIONS = 25
EXPERIENCE_REVISIONS = 5
ARTIFACTS_PER_SCOPE = 100
AUTHOR = "bench"


def _body(kind: str, artifact: int, revision: int) -> str:
    return f"{kind} {artifact} revision {revision}: " + "the quick brown fox jumps over the lazy dog " * 4


def build(revisions: int) -> dict:
    """Insert the history in bulk (in this process, Django set up) and return its row counts."""
    from types import SimpleNamespace

    from django.db import connection, transaction

    from artifacts.immutability import install_triggers, uninstall_triggers
    from bench.datagen import BULK_TIME, _Writer
    from vocabulary import history
    from vocabulary.text import sha256_text

    writer = _Writer(connection)
    ts = writer.timestamp
    memory_artifacts = revisions // 2 // MEMORY_REVISIONS
    experience_artifacts = (revisions - memory_artifacts * MEMORY_REVISIONS) // EXPERIENCE_REVISIONS
    total = memory_artifacts + experience_artifacts
    scopes = (total + ARTIFACTS_PER_SCOPE - 1) // ARTIFACTS_PER_SCOPE
    artifact_rows, revision_rows, version_rows = [], [], []
    revision_columns = (
        "id", "artifact_id", "revision", "body", "content_sha256", "author", "created_at", "entries_born",
        "entries_retired", "chain_sha256", "texts_sha256",
    )  # fmt: skip
    version_columns = (
        "id", "artifact_id", "entry_id", "version_id", "body", "content_sha256", "born_in_revision",
        "retired_in_revision", "created_at", "born_ordinal", "retired_ordinal",
    )  # fmt: skip
    for pk in range(1, total + 1):
        scope = (pk - 1) // ARTIFACTS_PER_SCOPE + 1
        memory = pk <= memory_artifacts
        family, artifact_id = ("memory", f"m{pk}") if memory else ("experience", f"x{pk}")
        count = MEMORY_REVISIONS if memory else EXPERIENCE_REVISIONS
        artifact_rows.append((pk, scope, family, artifact_id, count, ts))
        content = chain = ""
        live: dict[str, list] = {}
        for number in range(1, count + 1):
            born, retired, body = [], [], None
            if memory:
                entry = f"e{number % 10}" if number > 2 else f"e{number}"
                if entry in live:
                    old = live.pop(entry)
                    old[7], old[10] = number, 1
                    retired.append(SimpleNamespace(entry_id=entry, version_id=old[3], content_sha256=old[5]))
                text = _body("entry", pk, number)
                row = [len(version_rows) + 1, pk, entry, f"{entry}-r{number}", text, sha256_text(text), number]
                row += [None, ts, 1, None]
                version_rows.append(row)
                live[entry] = row
                born.append(
                    SimpleNamespace(entry_id=entry, version_id=row[3], content_sha256=row[5], created_at=BULK_TIME)
                )
                content = history.memory_revision_sha256(content, born, retired)
            else:
                body = _body("lesson", pk, number)
                content = sha256_text(body)
            texts = history.revision_texts_sha256(title=None, summary=None, body=body)
            chain = history.revision_chain_sha256(
                previous_chain=chain,
                scope_id=f"bench:verify-{scope}",
                family=family,
                artifact_id=artifact_id,
                revision=number,
                content_sha256=content,
                author=AUTHOR,
                born=born,
                retired=retired,
                texts_sha256=texts,
                created_at=BULK_TIME,
            )
            revision_rows.append(
                (len(revision_rows) + 1, pk, number, body, content, AUTHOR, ts, len(born), len(retired), chain, texts)
            )
    with transaction.atomic():
        if writer.vendor == "postgresql":
            writer.execute("SET LOCAL session_replication_role = replica")  # a superuser's bulk load
        else:
            uninstall_triggers(connection)
        writer.insert(
            "artifacts_scope",
            ("id", "scope_id", "title", "created_at"),
            [(s, f"bench:verify-{s}", "", ts) for s in range(1, scopes + 1)],
        )
        writer.insert(
            "artifacts_artifact",
            ("id", "scope_id", "family", "artifact_id", "head_revision", "created_at"),
            artifact_rows,
        )
        writer.insert("artifacts_artifactrevision", revision_columns, revision_rows)
        writer.insert("artifacts_memoryentryversion", version_columns, [tuple(row) for row in version_rows])
        if writer.vendor == "sqlite":
            install_triggers(connection)
    writer.execute("ANALYZE")
    return {"scopes": scopes, "artifacts": total, "revisions": len(revision_rows), "entry_versions": len(version_rows)}


def measure(what: str) -> dict:
    """In this process (Django set up): run ``what`` and return seconds and peak resident memory."""
    import resource

    from django.core.management import call_command
    from django.db import connection, transaction

    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if what == "verify":
        with open(os.devnull, "w") as sink:
            call_command("verify_history", stdout=sink, stderr=sink)
    elif what == "upgrade":  # migration 0022's forward step over the encoding 1 chains the backfill wrote
        import importlib

        from django.apps import apps

        migration = importlib.import_module("artifacts.migrations.0022_history_chain_covers_reads")
        with connection.schema_editor() as editor:  # one transaction, as the migration runs
            migration._forward(apps, editor)
    else:  # migration 0011's backfill over the same rows (the guards lifted, as the migration does)
        import importlib

        from artifacts.immutability import install_triggers, uninstall_triggers

        migration = importlib.import_module("artifacts.migrations.0011_history_chain")
        with transaction.atomic():
            uninstall_triggers(connection)
            migration._backfill(connection)
            install_triggers(connection)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "baseline_kb": baseline,
    }


def erase(count: int) -> dict:
    """Erase ``count`` entry versions (one per memory artifact, the first ones) and the whole first scope, as
    ``manage.py erase`` does, so that verify_history then walks a history with erasures (it must still find nothing)."""
    from artifacts.models import MemoryEntryVersion, Scope
    from artifacts.services.erasure import content_erase

    started = time.perf_counter()
    first_scope = Scope.objects.order_by("pk").first()
    versions = (
        MemoryEntryVersion.objects.exclude(artifact__scope=first_scope)
        .filter(born_in_revision=1)
        .select_related("artifact__scope")
        .order_by("artifact_id")[:count]
    )
    erased = 0
    for version in versions:
        artifact = version.artifact
        record = content_erase(
            scope_id=artifact.scope.scope_id,
            family=artifact.family,
            artifact_id=artifact.artifact_id,
            version_id=version.version_id,
            reason="bench",
            erased_by="bench",
        )
        erased += record.rows_erased
    record = content_erase(scope_id=first_scope.scope_id, reason="bench", erased_by="bench")
    return {
        "erasures": count + 1,
        "erased_texts": erased + record.rows_erased,
        "seconds": time.perf_counter() - started,
    }


def _child(database_url: str, *args: str) -> dict:
    done = subprocess.run(
        [PYTHON, __file__, *args], cwd=ROOT, env=django_env(database_url), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--revisions", type=int, default=100_000)
    parser.add_argument("--erasures", type=int, default=0, help="erase this many entry versions and one scope first")
    parser.add_argument("--child", choices=("build", "erase", "verify", "backfill", "upgrade"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import django

        django.setup()
        if args.child == "build":
            print(json.dumps(build(args.revisions)))
        elif args.child == "erase":
            print(json.dumps(erase(args.erasures)))
        else:
            print(json.dumps(measure(args.child)))
        return
    with throwaway_database(args.engine, "verify") as url:
        subprocess.run([PYTHON, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=django_env(url), check=True)
        started = time.perf_counter()
        counts = _child(url, "--child", "build", "--revisions", str(args.revisions))
        log(f"{args.engine}: built {counts} in {time.perf_counter() - started:.1f}s")
        if args.erasures:
            erased = _child(url, "--child", "erase", "--erasures", str(args.erasures))
            log(
                f"{args.engine}: {erased['erasures']} erasures ({erased['erased_texts']:,} texts) "
                f"in {erased['seconds']:.1f}s"
            )
        for what in ("verify", "backfill", "upgrade", "verify") if not args.erasures else ("verify",):
            figures = _child(url, "--child", what)
            print(
                f"{args.engine} {what}: {counts['revisions']:,} revisions, {counts['entry_versions']:,} entry "
                f"versions, {counts['artifacts']:,} artifacts: {figures['seconds']:.1f} s, peak RSS "
                f"{figures['max_rss_kb'] / 1024:.0f} MB (Django set up: {figures['baseline_kb'] / 1024:.0f} MB)"
            )


if __name__ == "__main__":
    main()
