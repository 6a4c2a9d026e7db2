"""A damaged search index never changes a prepare: written over with another index's files or with other bytes
under a running process, truncated, panicking, read-only, or missing a write that was open across its build. Each
prepare answers what SQL alone answers (never a 500, never empty when SQL finds something), and the metrics say
why the index did not answer (docs/metrics.md).
"""

import os
import random
import re
import shutil
import subprocess
import threading

import pytest
import tantivy
from django.db import connection, transaction

from artifacts.recall.engine import build as build_module
from artifacts.recall.engine import store
from tests import waits
from tests.api.conftest import engine_corpus_write
from tests.api.factories import add_memory, make_key, make_scope, ok_json, prepare, remove_memory
from tests.api.search_index import build, counted_since, index_uses
from tests.conftest import PROJECT_ROOT
from tests.recall_words import words_queries, words_text

BODY = {"scope_id": "project:demo", "max_bytes": 32768, "assembly": {"sections": [{"family": "memory", "limit": 16}]}}
QUERIES = words_queries(8, seed=31)


def prepared(client, key, queries=QUERIES) -> list[dict]:
    """Each query's prepare of the demo scope's memory, as the client sees it (any status but 200 fails)."""
    return [ok_json(prepare(client, key, BODY, query=query)) for query in queries]


def prepared_by_sql(settings, client, key, queries=QUERIES) -> list[dict]:
    """The same prepares with the index off: the exact answers."""
    directory, settings.POWERCONTEXT_SEARCH_INDEX_DIR = settings.POWERCONTEXT_SEARCH_INDEX_DIR, None
    try:
        return prepared(client, key, queries)
    finally:
        settings.POWERCONTEXT_SEARCH_INDEX_DIR = directory


def memory_index(scope):
    return store.index_path(scope.pk, "memory")


def index_files(path) -> list:
    """The index's files but tantivy's lock files."""
    return sorted(p for p in path.iterdir() if not p.name.endswith(".lock"))


def writable(path) -> list[str]:
    return [p.name for p in index_files(path) if p.stat().st_mode & 0o222]


@pytest.fixture
def served(engine_on, engine_corpus, client):
    """The demo scope indexed and a read key; every query prepared once through the index (each process's searcher
    of the index is open, its files mapped), with the answers SQL gives."""
    key = make_key(read=[engine_corpus])
    build()
    expected = prepared_by_sql(engine_on, client, key)
    before = index_uses()
    assert prepared(client, key) == expected
    assert counted_since(before) == {"answers": len(QUERIES)}
    assert all(answer["status"] == "ready" for answer in expected)
    return engine_corpus, key, expected


@pytest.mark.django_db
def test_the_build_leaves_no_index_file_writable(served):
    scope, _, _ = served

    assert index_files(memory_index(scope)) and writable(memory_index(scope)) == []
    add_memory(scope, {"late": "quasar nebula"}, removals=["m30"])
    out, _ = build()
    assert "updated, 1 added, 1 deleted" in out and writable(memory_index(scope)) == []


@pytest.mark.django_db
def test_an_index_written_over_with_another_scopes_files_answers_like_sql(served, client):
    scope, key, expected = served
    other = make_scope("project:other")
    add_memory(other, {f"o{i}": words_text(random.Random(i)) for i in range(230)})
    build()
    # As `cp -f` or rsync do: each file replaced (a new file under the old name), the old ones left in place.
    for source in index_files(memory_index(other)):
        target = memory_index(scope) / source.name
        target.unlink(missing_ok=True)
        shutil.copyfile(source, target)
    before = index_uses()

    assert prepared(client, key) == expected
    assert counted_since(before) == {"mismatch": len(QUERIES)}

    out, _ = build()
    assert "rebuilt" in out
    before = index_uses()
    assert prepared(client, key) == expected
    assert counted_since(before) == {"answers": len(QUERIES)}


@pytest.mark.django_db
def test_an_index_written_over_in_place_under_a_running_process_answers_like_sql(served, client):
    """Other bytes in the files this process has mapped (same sizes: no SIGBUS): the cached searcher reads them."""
    scope, key, expected = served
    rng = random.Random(3)
    for path in index_files(memory_index(scope)):
        if path.suffix not in (".json", ".bin"):
            os.chmod(path, 0o644)  # the builder sealed them: only someone who lifts that can do this
            size = path.stat().st_size
            with open(path, "r+b") as file:
                file.write(rng.randbytes(size))
    before = index_uses()

    assert prepared(client, key) == expected
    counted = counted_since(before)
    assert sum(counted.values()) == len(QUERIES) and "answers" not in counted, counted
    assert set(counted) <= {"mismatch", "panic", "corrupt"}, counted


@pytest.mark.django_db
def test_a_truncated_index_answers_like_sql_and_a_build_repairs_it(served, client):
    """Truncated while no process maps it (a worker started afresh): the safe case. Truncating a file a worker has
    mapped kills that worker (SIGBUS); the builder's files refuse it (test_the_build_leaves_no_index_file_writable)
    and docs/deployment.md, section 12, says how to replace an index safely."""
    scope, key, expected = served
    store._readers.clear()  # this process's searchers closed, their files unmapped
    for path in index_files(memory_index(scope)):
        if path.suffix not in (".json", ".bin"):
            os.chmod(path, 0o644)
            os.truncate(path, path.stat().st_size // 2)
    before = index_uses()

    assert prepared(client, key) == expected
    counted = counted_since(before)
    assert sum(counted.values()) == len(QUERIES) and set(counted) <= {"corrupt", "panic"}, counted

    out, _ = build()
    assert "rebuilt" in out
    before = index_uses()
    assert prepared(client, key) == expected
    assert counted_since(before) == {"answers": len(QUERIES)}


def _panic() -> BaseException:
    """A real panic of tantivy's native code (``pyo3_runtime.PanicException``, no Exception): a search for no hit."""
    index = tantivy.Index(store.SCHEMA)
    try:
        index.searcher().search(tantivy.Query.all_query(), 0)
    except BaseException as exc:
        return exc
    raise AssertionError("tantivy did not panic")


@pytest.mark.django_db
@pytest.mark.parametrize("call", ["search", "meta_read"])
def test_a_panic_of_the_engine_answers_like_sql_and_is_counted(served, client, monkeypatch, call):
    _, key, expected = served
    panic = _panic()
    assert store.engine_panic(panic) and not isinstance(panic, Exception)

    def panicking(*args, **kwargs):
        raise panic

    monkeypatch.setattr(store, call, panicking)
    store._readers.clear()  # meta_read runs when a searcher is opened
    before = index_uses()

    assert prepared(client, key) == expected
    assert counted_since(before) == {"panic": len(QUERIES)}

    monkeypatch.undo()
    before = index_uses()
    assert prepared(client, key) == expected
    assert counted_since(before) == {"answers": len(QUERIES)}


@pytest.fixture
def read_only(served):
    """The demo scope's memory index directory made read-only for this process (tantivy's lock file removed, so
    that opening the index would have to create it); undone afterwards. Root ignores permissions, so as root the
    directory is also made immutable (chattr +i)."""
    scope, _, _ = served
    path = memory_index(scope)
    (path / ".tantivy-meta.lock").unlink(missing_ok=True)
    os.chmod(path, 0o555)
    immutable = os.geteuid() == 0
    if immutable and subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        os.chmod(path, 0o755)
        pytest.skip("running as root without chattr +i: a directory cannot be made read-only for this process")
    try:
        yield path
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        os.chmod(path, 0o755)


@pytest.mark.django_db
def test_a_read_only_index_directory_still_answers(served, read_only, client):
    _, key, expected = served
    with pytest.raises(OSError):
        (read_only / ".tantivy-meta.lock").touch()
    store._readers.clear()
    before = index_uses()

    assert prepared(client, key) == expected
    assert counted_since(before) == {"answers": len(QUERIES)}


GAP_BODY = "quasar nebula pulsar"


def held_open(write, opened: threading.Event, release: threading.Event):
    """A thread's target: ``write()`` in a transaction held open from ``opened`` until ``release``, then committed."""

    def run() -> None:
        try:
            with transaction.atomic():
                write()
                opened.set()
                waits.wait_event(release, what="the transaction's release", timeout=60)
        finally:
            connection.close()

    return run


@pytest.fixture
def gap_corpus(committed_db, engine_on):
    """The demo scope in a database whose writes commit (a writer's transaction is held open by another thread)."""
    return engine_corpus_write()


@pytest.mark.parametrize("wait", ["until the write ends", "not at all"])
def test_a_write_open_across_a_build_is_prepared_once_it_commits(gap_corpus, engine_on, client, wait):
    """A document written in a transaction still open while the build runs, with a higher id already committed
    (PostgreSQL hands ids out at insert): either the build waits for it and indexes it, or it does not move past its
    previous update; once committed, the very next prepare has it, even after a removal that leaves the counts
    equal (the index then holds one document the database no longer has, and misses one it has)."""
    key = make_key(read=[gap_corpus])
    build()
    opened, release = threading.Event(), threading.Event()
    writer = held_open(lambda: add_memory(gap_corpus, {"gap": GAP_BODY}), opened, release)

    def builder() -> None:
        try:
            waits.wait_event(opened, what="the open write", timeout=60)
            if connection.vendor == "postgresql":  # SQLite: the open write holds the only write lock
                add_memory(make_scope("project:later"), {"later": "a higher id, committed first"})
            if wait == "not at all":
                out, err = build()
                assert ("not updated" in err) == (connection.vendor == "postgresql"), err
                release.set()
            else:
                threading.Timer(0.5, release.set).start()
                out, _ = build("--settle", "60")
                assert "updated" in out
        finally:
            release.set()
            connection.close()

    errors = waits.run_threads([writer, builder], what="write open across a build")
    assert not errors, errors
    remove_memory(gap_corpus, "m40")
    expected = prepared_by_sql(engine_on, client, key, [GAP_BODY])
    before = index_uses()

    got = prepared(client, key, [GAP_BODY])

    assert got == expected and '"gap"' in got[0]["content"]
    assert counted_since(before) == {"answers": 1}


def test_the_build_waits_only_for_writes_to_the_recall_documents(committed_db, engine_on):
    """A transaction open on another table does not hold the build up (PostgreSQL's lock table names the writers)."""
    other, done = threading.Event(), threading.Event()
    unrelated = held_open(lambda: make_scope("project:unrelated"), other, done)

    def builder() -> None:
        try:
            waits.wait_event(other, what="the unrelated write", timeout=60)
            assert build_module.settled_watermark(0) >= 0
        finally:
            done.set()
            connection.close()

    errors = waits.run_threads([unrelated, builder], what="unrelated write")
    assert not errors, errors


def test_the_metrics_guide_lists_every_fallback_reason_the_code_counts():
    guide = (PROJECT_ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    row = next(line for line in guide.splitlines() if line.startswith("| `powercontext_recall_index_fallbacks_total`"))

    assert re.findall(r"`(\w+)`", row.split("|")[3]) == ["reason", *store.FALLBACK_REASONS]
