"""Rows of ranked documents kept with the copies of small scopes (artifacts/recall/documents.py).

Observed through ``POST /v1/context/prepare``: a prepare over warm copies reads from the database only the documents
it has not read at that generation, and its answer stays the SQL path's, byte for byte, whatever moves a cited head
or retires an entry: the services, or the ORM and raw SQL around them.
"""

from __future__ import annotations

import random

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from artifacts.models import Artifact, ArtifactRevision, MemoryEntryVersion, RecallCorpusStat, Scope
from artifacts.recall import resident
from artifacts.recall.documents import ROW_BYTES, DocumentRow
from tests.api.factories import add_experience, add_memory, make_key, make_scope, ok_json, prepare, remove_memory
from tests.conftest import patch_setting

WORDS = [f"w{i}" for i in range(40)]
BODY = {"scope_id": "project:rows", "assembly": {}, "max_bytes": 6000}


@pytest.fixture
def scopes(db):
    reference = make_scope("team:rows")
    current = make_scope("project:rows", references=[reference])
    generator = random.Random(3)
    add_memory(current, {f"e{i:02d}": " ".join(generator.choices(WORDS, k=generator.randint(3, 9))) for i in range(60)})
    add_memory(current, {"pinned": "yak w1 shared notes"}, artifact_id="pinned")
    add_memory(reference, {f"r{i:02d}": " ".join(generator.choices(WORDS, k=5)) for i in range(20)})
    for i in range(12):
        add_experience(current, f"x{i}", " ".join(generator.choices(WORDS, k=6)))
    return current, make_key(read=[current, reference])


def _prepared(client, key, query: str) -> str:
    return ok_json(prepare(client, key, {**BODY, "query": query}))["content"] or ""


def _in_sql(client, key, query: str, monkeypatch) -> str:
    """The same prepare with every ranking and read in SQL (no copies, so no kept rows)."""
    with monkeypatch.context() as patch:
        patch_setting(patch, "POWERCONTEXT_RESIDENT_MEMORY_MB", 0)
        return _prepared(client, key, query)


def _warm(client, key) -> None:
    """Prepare until every pair is copied (one copy per prepare, from the second request of a generation)."""
    for _ in range(8):
        _prepared(client, key, "w1 w2")


def _kept(scope, artifact_id: str, family: str = "memory") -> bool:
    """Whether this process keeps a row of the artifact with its copy of the scope's family."""
    copy = resident.COPIES.copies.get((connection.alias, family, scope.pk))
    return copy is not None and any(row.artifact_id == artifact_id for row in copy.rows.values())


def _document_reads(client, key, query: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        _prepared(client, key, query)
    return [q["sql"] for q in captured.captured_queries if "artifacts_recalldocument" in q["sql"]]


def test_a_document_read_once_at_a_generation_is_not_read_again(client, scopes):
    current, key = scopes
    _warm(client, key)
    first = _prepared(client, key, "yak w3")
    assert _kept(current, "pinned")
    assert any(_kept(current, f"x{i}", "experience") for i in range(12))
    assert _document_reads(client, key, "yak w3") == []  # every ranked document's row is kept
    assert _prepared(client, key, "yak w3") == first
    assert len(_document_reads(client, key, "w5 w7 w11 w13")) == 1  # documents not ranked before are read


def test_prepares_over_kept_rows_are_byte_identical_to_prepares_in_sql(client, scopes, monkeypatch):
    _, key = scopes
    generator = random.Random(5)
    queries = [" ".join(generator.sample(WORDS, generator.randint(1, 5))) for _ in range(30)]
    in_sql = [_in_sql(client, key, query, monkeypatch) for query in queries]
    _warm(client, key)
    for _ in range(2):  # the second round is answered from rows the first kept
        assert [_prepared(client, key, query) for query in queries] == in_sql
    assert sum(len(copy.rows) for copy in resident.COPIES.copies.values()) > 20


def test_an_entry_is_cited_at_its_new_head_after_another_entry_of_its_artifact_changes(client, scopes, monkeypatch):
    current, key = scopes
    _warm(client, key)
    before = _prepared(client, key, "yak")
    assert _kept(current, "pinned")
    add_memory(current, {"other": "w9 w10"}, artifact_id="pinned")  # another entry only: revision 2
    after = _prepared(client, key, "yak")
    assert after != before
    assert after == _in_sql(client, key, "yak", monkeypatch)


def test_a_removed_entry_kept_as_a_row_is_not_recalled(client, scopes):
    current, key = scopes
    _warm(client, key)
    assert "yak w1 shared notes" in _prepared(client, key, "yak")
    assert _kept(current, "pinned")
    remove_memory(current, "pinned", artifact_id="pinned")
    assert "yak w1 shared notes" not in _prepared(client, key, "yak")


def _head_moved_around_the_services(artifact: Artifact, *, retiring: int = 0) -> int:
    """A revision appended (declaring ``retiring`` retirements) and the head moved with the ORM alone: no posting
    changes."""
    revision = artifact.head_revision + 1
    ArtifactRevision.objects.create(
        artifact=artifact, revision=revision, content_sha256="0" * 64, author="shell", entries_retired=retiring
    )
    Artifact.objects.filter(pk=artifact.pk).update(head_revision=F("head_revision") + 1)
    return revision


def test_a_head_moved_without_the_services_is_cited_by_the_next_prepare(client, scopes, monkeypatch):
    current, key = scopes
    _warm(client, key)
    before = _prepared(client, key, "yak")
    assert _kept(current, "pinned")
    _head_moved_around_the_services(Artifact.objects.get(scope=current, artifact_id="pinned"))
    after = _prepared(client, key, "yak")
    assert after != before
    assert after == _in_sql(client, key, "yak", monkeypatch)


def test_an_entry_retired_with_raw_sql_is_not_recalled_by_the_next_prepare(client, scopes, monkeypatch):
    current, key = scopes
    artifact = Artifact.objects.get(scope=current, artifact_id="pinned")
    head = _head_moved_around_the_services(artifact, retiring=1)
    _warm(client, key)
    assert "yak w1 shared notes" in _prepared(client, key, "yak")
    assert _kept(current, "pinned")
    with connection.cursor() as cursor:  # retired at the head (the one retirement it declares), postings left in place
        cursor.execute(
            f"UPDATE {MemoryEntryVersion._meta.db_table} SET retired_in_revision = %s, retired_ordinal = 1 "
            "WHERE artifact_id = %s",
            [head, artifact.pk],
        )
    after = _prepared(client, key, "yak")
    assert "yak w1 shared notes" not in after
    assert after == _in_sql(client, key, "yak", monkeypatch)


def _row(body: str) -> DocumentRow:
    return DocumentRow("memory", 1, "e", "v", body, None, None)


def _copy(postings: int = 100) -> resident._Copy:
    return resident._Copy(1, {"t": ([], [], [])}, postings, documents=10, total_length=100)


def test_kept_rows_count_in_the_memory_budget_and_drop_the_least_recently_used_copy():
    copies = resident._Copies()
    made = {name: _copy(10_000) for name in "ab"}
    bare = made["a"].size
    budget = 2 * bare + 30_000
    for name in "ab":
        copies.put(name, made[name], budget=budget)
    rows = {1: _row("x" * 5_000), 2: _row("y" * 5_000)}
    copies.rows_keep("b", made["b"], rows, budget)
    assert made["b"].size == bare + sum(row.size() for row in rows.values()) > bare + 10_000 + 2 * ROW_BYTES
    assert copies.size == made["a"].size + made["b"].size
    copies.rows_keep("b", made["b"], rows, budget)  # kept already: not counted twice
    assert made["b"].size == bare + sum(row.size() for row in rows.values())
    copies.rows_keep("b", made["b"], {3: _row("z" * 20_000)}, budget)  # past the budget: "a" is least recent
    assert set(copies.copies) == {"b"} and copies.size == made["b"].size and len(made["b"].rows) == 3


def test_one_copy_keeps_rows_up_to_its_share_of_the_budget():
    copies = resident._Copies()
    kept, other = _copy(), _copy()
    budget = 100_000
    copies.put("other", other, budget=budget)
    copies.put("kept", kept, budget=budget)
    rows = {i: _row("x" * 9_000) for i in range(5)}  # each about 9.6 kB: two fit in a quarter of the budget
    copies.rows_keep("kept", kept, rows, budget)
    assert len(kept.rows) == 2 and kept.rows_size <= budget // resident.ROWS_SHARE
    assert set(copies.copies) == {"other", "kept"}  # the other copy stays
    assert copies.size == kept.size + other.size


def test_rows_are_not_kept_with_a_copy_no_longer_held():
    copies = resident._Copies()
    old, new = _copy(), _copy()
    copies.put("a", old, budget=10**9)
    copies.put("a", new, budget=10**9)  # replaced: a prepare still using the old one keeps nothing in it
    copies.rows_keep("a", old, {1: _row("x")}, 10**9)
    assert old.rows == {} and copies.size == new.size


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner; SQLite joins by the index")
def test_the_confirmation_reads_corpus_rows_by_index_among_many_scopes(client, scopes):
    # Alone in its statement (every ranked row kept), the confirmation once made PostgreSQL scan every corpus row.
    tenants = Scope.objects.bulk_create(Scope(scope_id=f"tenant:{i}") for i in range(3000))
    RecallCorpusStat.objects.bulk_create(RecallCorpusStat(scope=s, family="memory", documents=1) for s in tenants)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {RecallCorpusStat._meta.db_table}")
    _, key = scopes
    _warm(client, key)
    _prepared(client, key, "yak w3")
    with CaptureQueriesContext(connection) as captured:
        _prepared(client, key, "yak w3")
    (confirmation,) = [q["sql"] for q in captured.captured_queries if RecallCorpusStat._meta.db_table in q["sql"]]
    assert "artifacts_recalldocument" not in confirmation
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {confirmation}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"Seq Scan on {RecallCorpusStat._meta.db_table}" not in plan, plan
