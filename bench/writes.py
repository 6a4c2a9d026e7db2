"""Write benchmark: memory entry writes per second through the service and over HTTP, and the database
bytes one new revision adds to a small and to a large memory, on SQLite and PostgreSQL side by side.

    .venv/bin/python bench/writes.py [--smoke]

Each engine gets a throwaway database that this script creates, migrates and removes: a temporary SQLite
file, and a PostgreSQL database ``powercontext_bench_writes`` on postgres://postgres@127.0.0.1:5432
(override with POWERCONTEXT_BENCH_PG). The measurements run in a child process per engine (Django reads
DATABASE_URL once, at start-up):

1. Throughput. N sequential "create entry" writes into a fresh memory artifact, first by calling
   ``services.memory_revision_create`` in-process, then by POSTing /v1/memory/entries to a server started
   on a free loopback port (gunicorn, one worker, gthread with keep-alive; ``manage.py runserver`` when
   gunicorn is missing) with one keep-alive client. Every write is one transaction and one new revision.
2. Size. A memory artifact is bulk-loaded with L live entries (one revision, with its recall-index rows,
   exactly the rows the services would write), then K more entries are created through the service, one
   revision each. Reported: database bytes added per revision, averaged over the K revisions (SQLite:
   (page_count - freelist_count) × page_size, and the bytes the b-trees really use via the dbstat table;
   PostgreSQL: the sum of pg_total_relation_size over the project's tables after VACUUM ANALYZE, counting
   whole 8 KiB pages and the dead row versions each write's updates leave until the next VACUUM), and the
   milliseconds per write.

Sizes: N = 500 writes, L = 1,000 and 100,000 entries, K = 100 revisions (--smoke: 50; 100 and 1,000; 20).
Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, the project root is not
    sys.path.insert(0, str(ROOT))

from bench.common import django_env, free_port, stop_process  # noqa: E402

PG_ADMIN_URL = os.environ.get("POWERCONTEXT_BENCH_PG", "postgres://postgres@127.0.0.1:5432/postgres")
PG_DATABASE = "powercontext_bench_writes"
API_KEY = "pc_bench_writes_" + "0123456789abcdef" * 2
SCOPE = "bench:writes"
WORDS = (  # noqa: SIM905 - a sentence of words reads better than a 53-item literal
    "deploy release build cache client server contract schema test review branch merge commit rollback "
    "latency budget token index query recall profile memory entry version revision scope artifact "
    "python django postgres sqlite gunicorn worker thread lock queue retry timeout error metric alert "
    "owner team project customer invoice report dashboard migration backup restore docker kernel"
).split()
SETTINGS = {
    "full": {"writes": 500, "sizes": (1_000, 100_000), "revisions": 100},
    "smoke": {"writes": 50, "sizes": (100, 1_000), "revisions": 20},
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def entry_body(n: int) -> str:
    """A short note of ten words, deterministic in ``n``: about the size of a typical memory entry."""
    words = [WORDS[(n * 7 + k * 13) % len(WORDS)] for k in range(8)]
    return f"Note {n}: " + " ".join(words) + "."


# --- parent: databases, children, tables -----------------------------------------------------------


def _pg_admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as connection:
        connection.execute(statement)


def _run_child(engine: str, database_url: str, mode: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="powercontext_bench_writes_io_") as io_dir:
        result_path = Path(io_dir) / "result.json"
        env = django_env(database_url)
        env["PYTHONUNBUFFERED"] = "1"
        completed = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                engine,
                "--mode",
                mode,
                "--out",
                str(result_path),
            ],
            cwd=ROOT,
            env=env,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"{engine} child failed with exit code {completed.returncode}")
        return json.loads(result_path.read_text(encoding="utf-8"))


def run_engine(engine: str, mode: str) -> dict | None:
    if engine == "sqlite":
        directory = Path(tempfile.mkdtemp(prefix="powercontext_bench_writes_"))
        try:
            return _run_child(engine, f"sqlite:///{directory / 'bench.sqlite3'}", mode)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    try:
        _pg_admin(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
        _pg_admin(f'CREATE DATABASE "{PG_DATABASE}"')
    except Exception as exc:  # noqa: BLE001 - any failure means "PostgreSQL is not available here"
        log(f"PostgreSQL not reachable ({exc.__class__.__name__}: {exc}); skipped")
        return None
    try:
        return _run_child(engine, f"{PG_ADMIN_URL.rsplit('/', 1)[0]}/{PG_DATABASE}", mode)
    finally:
        _pg_admin(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')


def table(title: str, headers: list[str], rows: list[list[str]], notes: list[str]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = [title, "-" * len(title)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines += [f"  {note}" for note in notes]
    return "\n".join(lines)


def report(results: dict[str, dict], mode: str) -> str:
    labels = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    throughput_rows, size_rows = [], []
    for engine, result in results.items():
        service, web = result["service"], result["http"]
        throughput_rows.append(
            [
                labels[engine],
                str(service["writes"]),
                f"{service['per_second']:.0f}",
                f"{service['ms_per_write']:.2f}",
                f"{web['per_second']:.0f}",
                f"{web['ms_per_write']:.2f}",
                f"{web['per_second'] / service['per_second']:.2f}",
            ]
        )
        for size in result["sizes"]:
            size_rows.append(
                [
                    labels[engine],
                    f"{size['live_entries']:,}",
                    str(size["revisions"]),
                    f"{size['bytes_per_revision']:,.0f}",
                    f"{size['used_bytes_per_revision']:,.0f}" if size["used_bytes_per_revision"] is not None else "n/a",
                    f"{size['ms_per_write']:.2f}",
                    f"{size['load_seconds']:.1f}",
                ]
            )
    first = results[next(iter(results))]
    parts = [
        table(
            f"Memory entry writes per second ({mode})",
            ["engine", "writes", "service/s", "service ms", "HTTP/s", "HTTP ms", "HTTP/service"],
            throughput_rows,
            [
                "One 'create entry' per write (one transaction, one new revision), sequential, one client.",
                f"HTTP: POST /v1/memory/entries to {first['http']['server']} on 127.0.0.1, keep-alive.",
            ],
        ),
        table(
            f"Bytes and time of one new revision by memory size ({mode})",
            ["engine", "live entries", "revisions", "bytes/revision", "used bytes/revision", "ms/write", "load s"],
            size_rows,
            [
                "Averaged over the measured revisions, each creating one entry through the service.",
                "bytes: SQLite (page_count - freelist_count) x page_size; PostgreSQL sum of pg_total_relation_size.",
                "used bytes: SQLite b-tree bytes in use (dbstat); PostgreSQL has no page-free measure here (n/a).",
            ],
        ),
    ]
    return "\n\n".join(parts)


def parent(mode: str) -> None:
    results = {}
    for engine in ("sqlite", "postgresql"):
        log(f"{engine}: start ({mode})")
        result = run_engine(engine, mode)
        if result is not None:
            results[engine] = result
    print(report(results, mode))


# --- child: one engine -----------------------------------------------------------------------------


def _django_setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def measure_service(scope, count: int, *, artifact_id: str, first: int = 0) -> dict:
    from artifacts import services

    started = time.perf_counter()
    for n in range(first, first + count):
        services.memory_revision_create(
            scope=scope,
            artifact_id=artifact_id,
            writes=[services.EntryVersionWrite(f"entry-{n}", None, entry_body(n))],
            author="bench",
            require_new_entries=True,
        )
    seconds = time.perf_counter() - started
    return {"writes": count, "seconds": seconds, "per_second": count / seconds, "ms_per_write": seconds * 1000 / count}


def _start_server(port: int) -> tuple[subprocess.Popen, str]:
    gunicorn = Path(sys.executable).parent / "gunicorn"
    if gunicorn.exists():
        command = [str(gunicorn), "powercontext.wsgi", "-w", "1", "-k", "gthread", "--threads", "1"]
        command += ["--keep-alive", "30", "-b", f"127.0.0.1:{port}"]
        name = "gunicorn (1 worker, gthread)"
    else:
        command = [sys.executable, "manage.py", "runserver", "--noreload", "--nothreading", f"127.0.0.1:{port}"]
        name = "manage.py runserver"
    server = subprocess.Popen(command, cwd=ROOT, env=django_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"server exited during start-up: {server.stderr.read().decode(errors='replace')}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/v1/memory/entries")
            connection.getresponse().read()
            connection.close()
            return server, name
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("server did not start in time")


def measure_http(count: int, *, artifact_id: str) -> dict:
    port = free_port()
    server, name = _start_server(port)
    headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def write(n: int) -> None:
        body = json.dumps(
            {"scope_id": SCOPE, "artifact_id": artifact_id, "entry_id": f"entry-{n}", "body": entry_body(n)}
        )
        connection.request("POST", "/v1/memory/entries", body=body, headers=headers)
        response = connection.getresponse()
        payload = response.read()
        if response.status != 201:
            raise RuntimeError(f"write {n} answered {response.status}: {payload[:300]!r}")

    try:
        for n in range(5):  # warm the worker and the connection
            write(-1 - n)
        started = time.perf_counter()
        for n in range(count):
            write(n)
        seconds = time.perf_counter() - started
    finally:
        connection.close()
        stop_process(server)
    return {
        "writes": count,
        "seconds": seconds,
        "per_second": count / seconds,
        "ms_per_write": seconds * 1000 / count,
        "server": name,
    }


def bulk_memory(scope, artifact_id: str, count: int) -> None:
    """One memory revision holding ``count`` live entries, with the rows the services would write.

    Written with bulk inserts in one transaction (the services write entry by entry, which is what is
    measured afterwards, not what fills the table). The recall index gets one document per version,
    its postings, and the scope's term and corpus statistics, as ``artifacts.recall.index.recall_index_add`` does.
    """
    from collections import Counter

    from django.db import connection, transaction

    from artifacts.models import (
        Artifact,
        ArtifactRevision,
        MemoryEntryVersion,
        RecallCorpusStat,
        RecallDocument,
        RecallPosting,
        RecallTermStat,
    )
    from artifacts.recall import tokenize as search
    from vocabulary import history
    from vocabulary.text import sha256_text

    batch = 5_000
    posting_insert = (
        f"INSERT INTO {RecallPosting._meta.db_table} "
        "(document_id, scope_id, family, term, term_frequency, document_length) VALUES (%s, %s, %s, %s, %s, %s)"
    )
    with transaction.atomic():
        artifact = Artifact.objects.create(scope=scope, family="memory", artifact_id=artifact_id)
        versions = [
            MemoryEntryVersion(
                artifact=artifact,
                entry_id=f"bulk-{n}",
                version_id=f"bulk-{n}-v1",
                body=entry_body(n),
                content_sha256=sha256_text(entry_body(n)),
                born_in_revision=1,
                born_ordinal=n + 1,
            )
            for n in range(count)
        ]
        # Revision 1 declaring its versions, then the head onto it, then its versions: the order the history guards
        # require.
        content_sha256 = history.memory_revision_sha256("", versions, [])
        texts_sha256 = history.revision_texts_sha256(title=None, summary=None, body=None)
        written_at = versions[0].created_at if versions else None
        ArtifactRevision.objects.create(
            artifact=artifact,
            revision=1,
            content_sha256=content_sha256,
            author="bench-bulk",
            entries_born=count,
            texts_sha256=texts_sha256,
            created_at=written_at,
            chain_sha256=history.revision_chain_sha256(
                previous_chain="",
                scope_id=scope.scope_id,
                family="memory",
                artifact_id=artifact_id,
                revision=1,
                content_sha256=content_sha256,
                texts_sha256=texts_sha256,
                author="bench-bulk",
                created_at=written_at,
                born=versions,
            ),
        )
        Artifact.objects.filter(pk=artifact.pk).update(head_revision=1)
        document_frequency: Counter[str] = Counter()
        total_length = 0
        for start in range(0, count, batch):
            chunk = MemoryEntryVersion.objects.bulk_create(versions[start : start + batch])
            analysed = [search.term_frequencies(version.body) for version in chunk]
            documents = RecallDocument.objects.bulk_create(
                RecallDocument(scope=scope, family="memory", artifact=artifact, entry_version=version, length=length)
                for version, (_, length) in zip(chunk, analysed, strict=True)
            )
            postings = []
            for document, (frequencies, length) in zip(documents, analysed, strict=True):
                total_length += length
                document_frequency.update(frequencies.keys())
                postings += [(document.pk, scope.pk, "memory", term, tf, length) for term, tf in frequencies.items()]
            with connection.cursor() as cursor:  # about ten postings per entry: plain rows, no model objects
                cursor.executemany(posting_insert, postings)
        RecallTermStat.objects.bulk_create(
            RecallTermStat(scope=scope, family="memory", term=term, documents=df)
            for term, df in sorted(document_frequency.items())
        )
        RecallCorpusStat.objects.create(scope=scope, family="memory", documents=count, total_length=total_length)


def database_bytes() -> tuple[int, int | None]:
    """(allocated bytes, bytes in use or None) of the whole database."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            page_size = cursor.execute("PRAGMA page_size").fetchone()[0]
            pages = cursor.execute("PRAGMA page_count").fetchone()[0]
            free = cursor.execute("PRAGMA freelist_count").fetchone()[0]
            try:
                used = cursor.execute("SELECT SUM(pgsize - unused) FROM dbstat").fetchone()[0]
            except Exception:  # noqa: BLE001 - dbstat is a compile-time option of SQLite
                used = None
            return (pages - free) * page_size, used
        cursor.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname = current_schema() AND c.relname LIKE 'artifacts\\_%%'"
        )
        return int(cursor.fetchone()[0]), None


def settle() -> None:
    """PostgreSQL: VACUUM ANALYZE after the bulk load, as autovacuum soon would.

    Without fresh statistics the planner believes the just-loaded tables hold a few rows and scans all
    100k term statistics on every write instead of probing the unique index (about 40 ms per write);
    and free-space and visibility maps a later autovacuum creates (whole pages, once per table) would
    be counted as bytes of the measured revisions.
    """
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")


def measure_size(scope_factory, live_entries: int, revisions: int) -> dict:
    from artifacts.models import MemoryEntryVersion
    from artifacts.recall import sources

    scope = scope_factory(f"{SCOPE}:size-{live_entries}")
    started = time.perf_counter()
    bulk_memory(scope, "memory", live_entries)
    load_seconds = time.perf_counter() - started
    live = MemoryEntryVersion.objects.filter(artifact__scope=scope, retired_in_revision__isnull=True).count()
    assert live == live_entries, (live, live_entries)
    hits = sources.recall_memory(scopes=[scope], query=entry_body(7))[0]
    assert "bulk-7" in [hit.citation.entry_id for hit in hits], "the bulk-loaded index does not recall its own entry"
    measure_service(scope, 3, artifact_id="memory", first=10_000_000)  # warm caches and statistics rows
    settle()
    before, used_before = database_bytes()
    timing = measure_service(scope, revisions, artifact_id="memory", first=20_000_000)
    after, used_after = database_bytes()
    log(f"  {live_entries:,} live entries: {after - before:,} bytes over {revisions} revisions")
    return {
        "live_entries": live_entries,
        "revisions": revisions,
        "bytes_per_revision": (after - before) / revisions,
        "used_bytes_per_revision": None if used_before is None else (used_after - used_before) / revisions,
        "ms_per_write": timing["ms_per_write"],
        "load_seconds": load_seconds,
    }


def child(engine: str, mode: str, out: str) -> None:
    _django_setup()
    from django.db import connection

    from artifacts import services

    config = SETTINGS[mode]
    scope = services.scope_create(scope_id=SCOPE)
    services.api_key_create(name="bench-writes", read_scopes=[scope], write_scopes=[scope], key=API_KEY)

    log(f"{engine}: {config['writes']} writes through the service")
    measure_service(scope, 5, artifact_id="warm-up")
    service = measure_service(scope, config["writes"], artifact_id="service")
    log(f"{engine}: {config['writes']} writes over HTTP")
    connection.close()  # the server is the only client while it runs
    web = measure_http(config["writes"], artifact_id="http")

    sizes = []
    for live_entries in config["sizes"]:
        log(f"{engine}: bulk-loading {live_entries:,} entries, then {config['revisions']} revisions")
        sizes.append(
            measure_size(lambda scope_id: services.scope_create(scope_id=scope_id), live_entries, config["revisions"])
        )
    connection.close()
    Path(out).write_text(json.dumps({"service": service, "http": web, "sizes": sizes}), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes: a quick check that everything runs")
    parser.add_argument("--child", choices=("sqlite", "postgresql"), help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=tuple(SETTINGS), default="full", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.mode, args.out)
    else:
        parent("smoke" if args.smoke else "full")


if __name__ == "__main__":
    main()
