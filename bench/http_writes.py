"""Issue 52, item 3, the write side: what writes cost over HTTP, lexical recall against hybrid recall with vectors
embedded in the write (inline) and after it (deferred), in one run.

    .venv/bin/python bench/http_writes.py [--quick] [--engines sqlite,postgresql]

The default deployment (docs/deployment.md: gunicorn, gthread, 2 workers x 4 threads, DEBUG off, the packaged
model) on each engine, three servers up at once so that every measurement alternates between them (the machine's
drift then moves every side): one in lexical recall and one in hybrid recall with ``POWERCONTEXT_EMBEDDINGS_WRITE``
``inline`` over one throwaway database, one in hybrid recall with ``deferred`` over a second (its drainer embeds
every document without a vector: on the first database it would embed the lexical server's too). Clients are
threads of this process, one new connection per request, on 127.0.0.1.

- (a) Write latency: new memory entries of 1 KB of English prose, 4,096 random words (~26,000 characters) and
  65,536 random CJK ideographs, one at a time, lexical and hybrid alternating; p50 and p99 ms.
- (b) Another tenant beside long writes: that tenant's prepare (default assembly, a new query each time, on 100
  entries with their vectors) and 1 KB write, one after the other, first with the server idle, then while four
  clients keep writing 65,536-character CJK entries (each to a scope of its own); p99 of each, the ratio of the
  loaded prepare p99 to the idle one, and every 503 answered to anyone meanwhile.
- (c) Throughput: 8 clients writing 1 KB entries (each to a scope of its own) for a fixed time, rounds in ABBA
  order; the median writes per second of the rounds.
- (d) The 65,536-character CJK write over the 1 KB write in hybrid recall (p50s of (a)).
- (e) Deferred only: after each phase of (b) and each round of (c), the backlog (documents without a vector) and
  the seconds until it is 0, polled every 0.1 s from this process; the next measurement starts once it is 0, so
  that the drainer's work is counted against no other server.

Issue 52's targets are printed beside the figures: (b) prepare p99 at most 3x idle and no 503, (c) hybrid at least
70 % of lexical, (d) at most 25x. Figures only: nothing here asserts a time. ``--quick`` runs a few of each (a check
that it runs, ~30 s an engine), not figures to quote.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import random
import string
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, the project root is not
    sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from bench.http_load import _gunicorn  # noqa: E402
from bench.http_writes_report import BODIES, LONG_WRITERS, MODES, THROUGHPUT_CLIENTS, tables  # noqa: E402
from bench.large_writes import large_body, small_body  # noqa: E402

SERVERS = {
    "lexical": {"POWERCONTEXT_RECALL_MODE": "lexical"},
    "hybrid": {"POWERCONTEXT_RECALL_MODE": "hybrid", "POWERCONTEXT_EMBEDDINGS_WRITE": "inline"},
    "deferred": {"POWERCONTEXT_RECALL_MODE": "hybrid", "POWERCONTEXT_EMBEDDINGS_WRITE": "deferred"},
}
DRAIN_TIMEOUT = 600.0
WRITER_KEY = "pc_bench_" + "0123456789abcdef" * 3
OTHER_KEY = "pc_bench_" + "fedcba9876543210" * 3
OTHER_SCOPE = "bench:other"
WRITER_SCOPES = 8
"""Scopes per mode the writing clients share out (``bench:<mode>-<n>``): concurrent writers are other tenants, not
one artifact's revisions queued behind its head."""
SIZES = {
    "full": {
        "writes": {"1 KB": 41, "4,096 words": 15, "65,536 CJK": 15},
        "probes": 40,
        "rounds": 4,
        "seconds": 10,
        "warm": 3,
    },
    "quick": {"writes": dict.fromkeys(BODIES, 2), "probes": 3, "rounds": 2, "seconds": 1, "warm": 1},
}
TOPICS = ("the deploy", "the car", "our dentist", "the garden", "the release", "lunch", "the budget", "the trip")


def words_body(seed: int) -> str:
    """4,096 random lowercase words of 3 to 9 letters."""
    generator = random.Random(seed)
    return " ".join("".join(generator.choices(string.ascii_lowercase, k=generator.randint(3, 9))) for _ in range(4096))


MAKERS = {"1 KB": small_body, "4,096 words": words_body, "65,536 CJK": large_body}


def setup_worker(config: dict) -> dict:
    """Inside a Django worker: the writers' scopes and key, and the other tenant's 100 entries, embedded by the
    packaged model (``recall_embed``), and its key."""
    from io import StringIO

    from django.core.management import call_command

    from artifacts import services
    from artifacts.services import EntryVersionWrite

    writers = [services.scope_create(scope_id=f"bench:{m}-{n}") for m in MODES for n in range(WRITER_SCOPES)]
    services.api_key_create(name="writers", key=WRITER_KEY, read_scopes=writers, write_scopes=writers)
    other = services.scope_create(scope_id=OTHER_SCOPE)
    services.api_key_create(name="other", key=OTHER_KEY, read_scopes=[other], write_scopes=[other])
    generator = random.Random(52)
    notes = [
        f"Note {n} about {generator.choice(TOPICS)}: " + " ".join(generator.choices(small_body(n).split(), k=40))
        for n in range(100)
    ]
    services.memory_revision_create(
        scope=other,
        artifact_id="memory",
        writes=[EntryVersionWrite(f"note-{n}", None, note) for n, note in enumerate(notes)],
        author="bench",
    )
    call_command("recall_embed", stdout=StringIO(), stderr=StringIO())
    return {}


def post(base: str, key: str, path: str, body: dict) -> tuple[int, float]:
    """POST ``body`` as JSON over a new connection; (status, milliseconds until the whole answer is read)."""
    address = urlsplit(base)
    data = json.dumps(body, ensure_ascii=False).encode()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Connection": "close"}
    started = time.perf_counter()
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=120)
    try:
        connection.request("POST", path, data, headers)
        response = connection.getresponse()
        response.read()
        status = response.status
    except (OSError, http.client.HTTPException):
        status = 0  # no answer at all: counted as a failure, as a 5xx is
    finally:
        connection.close()
    return status, (time.perf_counter() - started) * 1000


class Writer:
    """Writes new memory entries, ids unique in the run; every status answered is kept (``statuses``)."""

    serial = itertools.count()  # shared by every writer: a scope is written by several of them

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: list[int] = []

    def write(self, base: str, key: str, scope: str, body: str) -> float:
        with self.lock:
            entry = f"e{next(self.serial)}"
        status, ms = post(base, key, "/v1/memory/entries", {"scope_id": scope, "entry_id": entry, "body": body})
        with self.lock:
            self.statuses.append(status)
        return ms


def prepare_ms(base: str, writer: Writer, n: int) -> float:
    query = f"what did we decide about {TOPICS[n % len(TOPICS)]}, question {n}?"  # a new query: embedded each time
    status, ms = post(
        base,
        OTHER_KEY,
        "/v1/context/prepare",
        {"scope_id": OTHER_SCOPE, "query": query, "assembly": {}, "max_bytes": 8000},
    )
    with writer.lock:
        writer.statuses.append(status)
    return ms


def run_threads(count: int, target) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    return threads


def warm(base: str, mode: str, writer: Writer, rounds: int) -> None:
    """Every worker thread's connection and, in hybrid, every worker's model loaded before anything is timed."""
    for _ in range(rounds):
        for thread in run_threads(8, lambda n: writer.write(base, WRITER_KEY, f"bench:{mode}-{n}", small_body(n))):
            thread.join()
        for thread in run_threads(8, lambda n: prepare_ms(base, writer, -1 - n)):
            thread.join()
    for name in BODIES:
        writer.write(base, WRITER_KEY, f"bench:{mode}-0", MAKERS[name](10**6))


def latencies(bases: dict, writes: dict, writer: Writer) -> dict:
    """(a): per body and mode, the milliseconds of each write, the modes alternating write by write."""
    times: dict = {mode: {name: [] for name in BODIES} for mode in MODES}
    for name in BODIES:
        for n in range(writes[name]):
            body = MAKERS[name](n)
            for mode in MODES if n % 2 == 0 else MODES[::-1]:
                times[mode][name].append(writer.write(bases[mode], WRITER_KEY, f"bench:{mode}-0", body))
    return times


def probe(base: str, probes: int, writer: Writer, first: int) -> tuple[list[float], list[float]]:
    """The other tenant's prepare and small write, ``probes`` of each in turn: their milliseconds."""
    prepares, writes = [], []
    for n in range(first, first + probes):
        prepares.append(prepare_ms(base, writer, n))
        writes.append(writer.write(base, OTHER_KEY, OTHER_SCOPE, small_body(n)))
    return prepares, writes


def beside_long_writes(base: str, mode: str, probes: int) -> dict:
    """(b) on one server: the probes idle, then while ``LONG_WRITERS`` clients keep writing 64K CJK entries."""
    writer = Writer()
    idle = probe(base, probes, writer, 0)
    idle_statuses = list(writer.statuses)
    bodies = [large_body(seed) for seed in range(LONG_WRITERS)]
    stop, long_writes = threading.Event(), []

    def long_writer(n: int) -> None:
        while not stop.is_set():
            long_writes.append(writer.write(base, WRITER_KEY, f"bench:{mode}-{n}", bodies[n]))

    threads = run_threads(LONG_WRITERS, long_writer)
    time.sleep(1.0)  # the four long writes under way
    loaded = probe(base, probes, writer, 10_000)
    stop.set()
    for thread in threads:
        thread.join()
    return {
        "idle": idle,
        "loaded": loaded,
        "long_writes": len(long_writes),
        "503": writer.statuses.count(503),
        "failed": sum(1 for status in writer.statuses if status not in (200, 201)),
        "idle_failed": sum(1 for status in idle_statuses if status not in (200, 201)),
    }


def throughput(base: str, mode: str, seconds: float) -> tuple[float, int]:
    """(c) on one server: 1 KB writes per second answered 201 by ``THROUGHPUT_CLIENTS`` clients, and the others."""
    writer, deadline = Writer(), time.monotonic() + seconds

    def client(n: int) -> None:
        body = small_body(n)
        while time.monotonic() < deadline:
            writer.write(base, WRITER_KEY, f"bench:{mode}-{n}", body)

    started = time.monotonic()
    for thread in run_threads(THROUGHPUT_CLIENTS, client):
        thread.join()
    elapsed = time.monotonic() - started
    return writer.statuses.count(201) / elapsed, sum(1 for status in writer.statuses if status != 201)


def backlog(url: str) -> int:
    """Recall documents without any vector in the database at ``url`` (one model in the run: the packaged one)."""
    statement = (
        "SELECT COUNT(*) FROM artifacts_recalldocument d WHERE NOT EXISTS "
        "(SELECT 1 FROM artifacts_recallvector v WHERE v.document_id = d.id)"
    )
    if url.startswith("sqlite:"):
        import sqlite3

        with contextlib.closing(sqlite3.connect(urlsplit(url).path, timeout=30)) as database:
            return database.execute(statement).fetchone()[0]
    import psycopg

    with psycopg.connect(url) as database:
        return database.execute(statement).fetchone()[0]


def drained(url: str, phase: str) -> dict:
    """(e): the backlog now, and the seconds until it is 0 (polled every 0.1 s, at most ``DRAIN_TIMEOUT``)."""
    started, at_start = time.monotonic(), backlog(url)
    count = at_start
    while count and time.monotonic() - started < DRAIN_TIMEOUT:
        time.sleep(0.1)
        count = backlog(url)
    return {"phase": phase, "backlog": at_start, "seconds": time.monotonic() - started, "left": count}


def run_engine(engine: str, size: dict) -> dict:
    """Every measurement on one engine: the three servers up at once, lexical and inline hybrid on one throwaway
    database, deferred hybrid on another."""
    with (
        common.throwaway_database(engine, "http_writes") as url,
        common.throwaway_database(engine, "http_writes_deferred") as deferred_url,
        ExitStack() as stack,
    ):
        urls = {"lexical": url, "hybrid": url, "deferred": deferred_url}
        for database in (url, deferred_url):
            common.run_worker("http_writes_setup", database, {})
        bases = {}
        for mode in MODES:
            env = common.django_env(urls[mode]) | {"DEBUG": "false"} | SERVERS[mode]
            bases[mode] = stack.enter_context(_gunicorn("powercontext.wsgi", env, 2, "gthread", 4))
        writer = Writer()
        for mode in MODES:
            warm(bases[mode], mode, writer, size["warm"])
        drains = [drained(deferred_url, "warm-up")]
        common.log(f"{engine}: warmed ({writer.statuses.count(201)} writes answered 201); (a) write latency")
        result: dict = {"latency": latencies(bases, size["writes"], writer)}
        result["latency_failed"] = sum(1 for status in writer.statuses if status not in (200, 201))
        drains.append(drained(deferred_url, "(a)"))
        common.log(f"{engine}: (b) another tenant beside four long writes")
        result["beside"] = {}
        for mode in MODES[::-1]:
            result["beside"][mode] = beside_long_writes(bases[mode], mode, size["probes"])
            if mode == "deferred":
                drains.append(drained(deferred_url, "(b) 4 long writers"))
        common.log(f"{engine}: (c) writes per second")
        rounds: dict = {mode: [] for mode in MODES}
        for number in range(size["rounds"]):
            for mode in MODES if number % 2 == 0 else MODES[::-1]:
                rounds[mode].append(throughput(bases[mode], mode, size["seconds"]))
                if mode == "deferred":
                    drains.append(drained(deferred_url, f"(c) round {number + 1}"))
        result["throughput"] = rounds
        result["drains"] = drains
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few of each: a check that it runs, not figures")
    parser.add_argument("--engines", default=",".join(common.ENGINES), help="comma-separated (default: both)")
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    results = {}
    for engine in filter(None, args.engines.split(",")):
        if engine == "postgresql" and not common.postgres_available():
            continue
        started = time.monotonic()
        results[engine] = run_engine(engine, size)
        common.log(f"{engine}: done in {time.monotonic() - started:.0f}s")
    for table in tables(results, size):
        print(table.text() + "\n")


if __name__ == "__main__":
    main()
