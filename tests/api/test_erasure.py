"""Erasure that keeps the proof (issue 51, item 3): ``manage.py erase``, HTTP and raw SQL, on the current engine.

The erased text leaves the database, recall and the prepare log; its hashes and the history chain stay, an erasure
record (itself append-only and chained) says what, when, by whom and why; exact reads answer 410 with the record;
verify_history reports the erasure as an erasure and still catches every other change. The records and the erased rows
are guarded by the database: as the runtime role (psycopg as a least-privilege role on PostgreSQL, the app's
connection on SQLite), every change but an erasure's is refused.
"""

from __future__ import annotations

import datetime
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from artifacts import services
from artifacts.models import (
    ArtifactRevision,
    Erasure,
    MemoryEntryVersion,
    PrepareLog,
    RecallDocument,
    RecallPosting,
    RecallTermStat,
    RecallVector,
)
from assembly.replay import prepare_replay
from tests.api.conftest import engine_corpus_write
from tests.api.factories import (
    add_experience,
    add_memory,
    add_topic,
    auth,
    error_of,
    make_key,
    prepare,
    propose_profile,
    read_revision,
)
from tests.api.test_history_attacks import Runtime, runtime  # noqa: F401 - the runtime role fixture
from tests.api.test_verify_history import triggers_lifted, verify
from tests.conftest import embedding_endpoint_settings
from vocabulary.history import erasure_chain_sha256

SCOPE = "project:erasable"
SECRET = "hunter2"


@pytest.fixture
def world(committed_db):
    """A scope holding a secret in memory entry e1 (and e2 beside it), an experience and a topic memory, with a key
    that may read it, and one logged prepare that showed the secret."""
    scope = services.scope_create(scope_id=SCOPE)
    add_memory(scope, {"e1": f"the vault password is {SECRET}", "e2": "deploys run on fridays"})
    add_experience(scope, "exp-1", f"rotated {SECRET} after the incident")
    add_topic(scope, "topic-1", title=f"Vault {SECRET}", summary="where secrets live", body="vault detail")
    key = make_key(read=[scope])
    return {"scope": scope, "key": key}


def version(entry_id: str) -> MemoryEntryVersion:
    return MemoryEntryVersion.objects.get(artifact__scope__scope_id=SCOPE, entry_id=entry_id)


def revision_of(family: str, artifact_id: str, number: int = 1) -> ArtifactRevision:
    return ArtifactRevision.objects.get(
        artifact__scope__scope_id=SCOPE, artifact__family=family, artifact__artifact_id=artifact_id, revision=number
    )


def erase(*args: str, reason: str | None = "GDPR art. 17 request #7") -> str:
    out = []

    class Sink:
        def write(self, text):
            out.append(text)

        def flush(self):
            pass

    arguments = ["--scope", SCOPE, *args] + ([] if reason is None else ["--reason", reason])
    call_command("erase", *arguments, "--by", "operator:dana", stdout=Sink())
    return "".join(out)


def prepared(client, key: str, query: str = f"vault password {SECRET}") -> str:
    response = prepare(client, key, scope_id=SCOPE, query=query)
    assert response.status_code == 200, response.content
    return response.json()["content"] or ""


def exact(client, key: str, family: str, artifact_id: str, revision: int = 1, **entry):
    return read_revision(
        client, key, scope_id=SCOPE, family=family, artifact_id=artifact_id, revision=revision, **entry
    )


def hashes() -> tuple[list, list]:
    """Every hash the history chain was built from, as stored."""
    return (
        list(
            ArtifactRevision.objects.order_by("pk").values_list(
                "content_sha256", "texts_sha256", "chain_sha256", "author", "created_at"
            )
        ),
        list(MemoryEntryVersion.objects.order_by("pk").values_list("content_sha256", "version_id", "entry_id")),
    )


def recalled_terms() -> set[str]:
    return set(RecallPosting.objects.filter(scope__scope_id=SCOPE).values_list("term", flat=True))


# --- end to end: write, prepare, log, erase, every place checked --------------------------------------------------


def test_erasing_an_entry_version_removes_its_text_everywhere_and_keeps_every_hash(client, world):
    key = world["key"]
    assert SECRET in prepared(client, key)
    log = PrepareLog.objects.order_by("-pk").first()
    assert SECRET in log.query
    before = hashes()
    e1 = version("e1")

    out = erase("--family", "memory", "--artifact", "memory", "--entry-version", e1.version_id)

    assert "erasure #1 (entry_version): 1 texts erased" in out
    e1.refresh_from_db()
    assert e1.body == ""
    assert version("e2").body == "deploys run on fridays"
    assert hashes() == before
    assert not RecallDocument.objects.filter(entry_version=e1).exists()
    log.refresh_from_db()
    assert (log.query, log.erasure.sequence) == ("", 1)
    assert log.query_sha256  # the hash of what was asked stays
    replay = prepare_replay(log=log)
    assert (replay.matches, replay.problems) == (
        False,
        ("erased: this prepare showed content that erasure #1 removed",),
    ), "replay says the content was erased, never a content mismatch"
    assert "vault password" not in prepared(client, key, "vault password")
    record = Erasure.objects.get()
    assert (record.kind, record.reason, record.erased_by, record.erased_sha256) == (
        "entry_version",
        "GDPR art. 17 request #7",
        "operator:dana",
        e1.content_sha256,
    )


def test_an_exact_read_of_an_erased_entry_version_answers_410_with_the_erasure_record(client, world):
    e1 = version("e1")
    erase("--family", "memory", "--artifact", "memory", "--entry-version", e1.version_id)

    response = exact(client, world["key"], "memory", "memory", entry_id="e1", entry_version=e1.version_id)

    error = error_of(response, 410, "content_erased")
    fields = {item["path"]: item["message"] for item in error["fields"]}
    assert fields["erasure.sequence"] == "1"
    assert fields["erasure.kind"] == "entry_version"
    assert fields["erasure.reason"] == "GDPR art. 17 request #7"
    assert fields["erasure.chain_sha256"] == Erasure.objects.get().chain_sha256
    assert SECRET not in response.content.decode()
    page = exact(client, world["key"], "memory", "memory").json()  # the revision's page leaves it out
    assert [entry["id"] for entry in page["entries"]] == ["e2"]


def test_erasing_a_topic_memory_revision_blanks_title_summary_and_body_and_reads_answer_410(client, world):
    out = erase("--family", "topic_memory", "--artifact", "topic-1", "--revision", "1")

    assert "1 texts erased" in out
    topic = revision_of("topic_memory", "topic-1")
    assert (topic.title, topic.summary, topic.body) == ("", "", "")
    error_of(exact(client, world["key"], "topic_memory", "topic-1"), 410, "content_erased")
    assert "Vault" not in prepared(client, world["key"])


def test_erasing_a_scope_erases_everything_it_holds_and_recall_finds_nothing(client, world):
    assert SECRET in prepared(client, world["key"])
    shown = list(PrepareLog.objects.values_list("pk", flat=True))
    before = hashes()

    out = erase("--all")

    assert "erasure #1 (scope): 4 texts erased" in out
    assert hashes() == before
    assert set(MemoryEntryVersion.objects.values_list("body", flat=True)) == {""}
    assert recalled_terms() == set()
    assert not RecallTermStat.objects.filter(scope__scope_id=SCOPE, documents__gt=0).exists()
    assert prepared(client, world["key"]) == ""
    error_of(exact(client, world["key"], "experience", "exp-1"), 410, "content_erased")
    error_of(exact(client, world["key"], "memory", "memory"), 410, "content_erased")
    assert set(PrepareLog.objects.filter(pk__in=shown).values_list("query", "erasure__sequence")) == {("", 1)}


def test_verify_history_reports_erasures_as_erasures_not_problems(world):
    erase("--family", "memory", "--artifact", "memory", "--entry-version", version("e1").version_id)
    erase("--family", "experience", "--artifact", "exp-1", "--revision", "1", reason="secret pasted by mistake")

    ok, out, _ = verify()
    assert ok, out
    assert "erasure #1 (entry_version)" in out and "erasure #2 (revision)" in out
    assert "2 erasures (2 erased texts): 0 problems" in out
    ok, out, _ = verify("--json")
    report = json.loads(out)
    assert (report["ok"], report["erasures"], report["erased_texts"]) == (True, 2, 2)
    assert [r["reason"] for r in report["erasure_records"]] == ["GDPR art. 17 request #7", "secret pasted by mistake"]


def test_erase_requires_a_reason_and_a_target_and_refuses_what_is_erased_already(world):
    e1 = version("e1").version_id
    with pytest.raises(CommandError):
        erase("--family", "memory", "--artifact", "memory", "--entry-version", e1, reason=None)
    with pytest.raises(CommandError, match="either"):
        erase()
    with pytest.raises(CommandError, match="not erased: .*not found"):
        erase("--family", "memory", "--artifact", "memory", "--entry-version", "no-such-version")
    erase("--family", "memory", "--artifact", "memory", "--entry-version", e1)
    with pytest.raises(CommandError, match="nothing left to erase"):
        erase("--family", "memory", "--artifact", "memory", "--entry-version", e1)
    assert Erasure.objects.count() == 1


# --- verify_history still catches every other change ------------------------------------------------------------


def test_verify_history_still_reports_a_text_blanked_without_an_erasure_record(world):
    erase("--family", "memory", "--artifact", "memory", "--entry-version", version("e1").version_id)
    with triggers_lifted() as cursor:
        cursor.execute("UPDATE artifacts_memoryentryversion SET body = '' WHERE id = %s", [version("e2").pk])

    ok, out, _ = verify()

    assert not ok
    assert '"e2"@' in out and "content_sha256" in out
    assert 'entry "e1"@"e1-v1" content_sha256' not in out


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE artifacts_erasure SET reason = 'nothing to see'",
        "UPDATE artifacts_erasure SET erased_by = 'someone else'",
        "DELETE FROM artifacts_erasure",
    ],
)
def test_verify_history_reports_an_erasure_record_changed_or_removed(world, change):
    erase("--family", "memory", "--artifact", "memory", "--entry-version", version("e1").version_id)
    with triggers_lifted() as cursor:
        cursor.execute(change)

    ok, out, _ = verify()

    assert not ok
    assert "erasure chain_sha256 of erasure #1" in out or '"e1"@' in out


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("texts_sha256", "0" * 64),
        ("created_at", datetime.datetime(2020, 2, 2, tzinfo=datetime.UTC)),
        ("author", "someone else"),
        ("title", "injected"),
    ],
)
def test_an_erased_topic_still_verifies_and_any_other_change_to_it_is_reported(world, column, value):
    # Erasure keeps the hash of the texts it blanks: the chain (encoding 2) verifies from it, not from the blanks.
    erase("--family", "topic_memory", "--artifact", "topic-1", "--revision", "1")
    ok, out, _ = verify()
    assert ok, out
    if isinstance(value, datetime.datetime):
        value = connection.ops.adapt_datetimefield_value(value)
    with triggers_lifted() as cursor:
        cursor.execute(
            f"UPDATE artifacts_artifactrevision SET {column} = %s WHERE id = %s",  # noqa: S608 - fixed names
            [value, revision_of("topic_memory", "topic-1").pk],
        )

    ok, out, _ = verify()

    assert not ok and "topic_memory:topic-1 revision 1: " in out


def test_verify_history_reports_an_erased_row_whose_hash_was_changed(world):
    erase("--family", "experience", "--artifact", "exp-1", "--revision", "1")
    with triggers_lifted() as cursor:
        cursor.execute(
            "UPDATE artifacts_artifactrevision SET content_sha256 = 'x' WHERE id = %s",
            [revision_of("experience", "exp-1").pk],
        )

    ok, out, _ = verify()

    assert not ok and "chain_sha256" in out


# --- the database's guards, as the runtime role ------------------------------------------------------------------


def test_no_erasure_record_can_be_changed_or_removed_as_the_runtime_role(world, runtime):  # noqa: F811
    erase("--family", "memory", "--artifact", "memory", "--entry-version", version("e1").version_id)
    stored = list(Erasure.objects.values_list())
    attempts = [
        "UPDATE artifacts_erasure SET reason = 'x'",
        "UPDATE artifacts_erasure SET sequence = 2",
        "DELETE FROM artifacts_erasure",
    ]
    if runtime.pg is not None:
        attempts.append("TRUNCATE artifacts_erasure CASCADE")
    else:
        attempts += [
            "INSERT OR REPLACE INTO artifacts_erasure SELECT * FROM artifacts_erasure",
            "REPLACE INTO artifacts_erasure (id, sequence, kind, scope_id, rows_erased, erased_sha256, reason, "
            "erased_by, erased_at, previous_sha256, chain_sha256) SELECT id, sequence, kind, scope_id, 0, 'x', 'y', "
            "'z', erased_at, previous_sha256, chain_sha256 FROM artifacts_erasure",
            "UPDATE OR REPLACE artifacts_erasure SET reason = 'x'",
        ]
    for attempt in attempts:
        runtime.refused(attempt)
    assert list(Erasure.objects.values_list()) == stored


def _record_insert(sequence: int, previous: str) -> str:
    now = "now()" if connection.vendor == "postgresql" else "strftime('%Y-%m-%d %H:%M:%f', 'now')"
    return (
        "INSERT INTO artifacts_erasure (sequence, kind, scope_id, rows_erased, erased_sha256, reason, erased_by, "
        "erased_at, previous_sha256, chain_sha256, revisions_through, versions_through) "
        f"SELECT {sequence}, 'scope', id, 0, 'x', 'r', 'b', {now}, '{previous}', 'c', "
        "(SELECT MAX(id) FROM artifacts_artifactrevision), (SELECT MAX(id) FROM artifacts_memoryentryversion) "
        f"FROM artifacts_scope WHERE scope_id = '{SCOPE}'"
    )


def test_an_erasure_record_is_inserted_only_as_the_next_of_its_chain(world, runtime):  # noqa: F811
    erase("--family", "memory", "--artifact", "memory", "--entry-version", version("e1").version_id)
    chain = Erasure.objects.get().chain_sha256
    for sequence, previous in ((1, ""), (3, chain), (2, ""), (2, "0" * 64)):
        runtime.refused(_record_insert(sequence, previous))
    assert Erasure.objects.count() == 1


def test_no_text_is_blanked_without_an_erasure_record_naming_it(world, runtime):  # noqa: F811
    erase("--family", "memory", "--artifact", "memory", "--entry-version", version("e1").version_id)
    stored = hashes(), list(MemoryEntryVersion.objects.values_list("body", flat=True).order_by("pk"))
    experience = revision_of("experience", "exp-1").pk
    for attempt in (
        f"UPDATE artifacts_memoryentryversion SET body = '' WHERE id = {version('e2').pk}",
        f"UPDATE artifacts_artifactrevision SET body = '' WHERE id = {experience}",
        # The erased row itself: nothing but its texts, and only to the empty text.
        f"UPDATE artifacts_memoryentryversion SET body = 'PLANTED' WHERE id = {version('e1').pk}",
        f"UPDATE artifacts_memoryentryversion SET body = '', conflict_key = 'k' WHERE id = {version('e1').pk}",
        f"UPDATE artifacts_memoryentryversion SET content_sha256 = 'x' WHERE id = {version('e1').pk}",
    ):
        runtime.refused(attempt)
    assert (hashes(), list(MemoryEntryVersion.objects.values_list("body", flat=True).order_by("pk"))) == stored


def test_a_record_inserted_by_hand_allows_blanking_only_what_it_names_and_verify_history_shows_it(
    world,
    runtime,  # noqa: F811
):
    """Whoever can insert records can erase in plain sight: the record is in the chain verify_history reports."""
    runtime.run(_record_insert(1, ""))
    experience = revision_of("experience", "exp-1").pk
    runtime.run(f"UPDATE artifacts_artifactrevision SET body = '' WHERE id = {experience}")
    runtime.refused(f"UPDATE artifacts_artifactrevision SET author = 'x' WHERE id = {experience}")
    # Nor the hash of the texts it blanks, which the chain covers (migration 0023).
    runtime.refused(f"UPDATE artifacts_artifactrevision SET title = '', texts_sha256 = 'x' WHERE id = {experience}")

    ok, out, _ = verify()

    assert not ok  # the hand-made record's chain hash is not its own
    assert "erasure chain_sha256 of erasure #1" in out
    assert "content_sha256" not in out.replace("erased_sha256", "")


def test_the_orm_cannot_change_or_delete_an_erasure_record(world):
    erase("--family", "memory", "--artifact", "memory", "--entry-version", version("e1").version_id)
    record = Erasure.objects.get()
    for change in (
        lambda: Erasure.objects.update(reason="x"),
        lambda: Erasure.objects.all().delete(),
        record.delete,
    ):
        with pytest.raises(DatabaseError), transaction.atomic():
            change()
    assert Erasure.objects.get().reason == "GDPR art. 17 request #7"


def test_erasing_a_profile_revision_also_blanks_the_candidate_committed_as_it(client, world):
    candidate = propose_profile(world["scope"], f"prefers {SECRET} in examples")
    pending = propose_profile(world["scope"], "prefers short answers")
    services.profile_candidate_commit(candidate=candidate, committed_by="test")

    erase("--family", "profile", "--artifact", "profile", "--revision", "1")

    candidate.refresh_from_db()
    pending.refresh_from_db()
    assert (candidate.body, pending.body) == ("", "prefers short answers")
    assert revision_of("profile", "profile").body == ""
    error_of(exact(client, world["key"], "profile", "profile"), 410, "content_erased")
    erase("--all")
    pending.refresh_from_db()
    assert pending.body == ""


# --- the search engine's index files -------------------------------------------------------------------------------


@pytest.fixture
def indexed(engine_on, committed_db):
    """engine_corpus_write's scope, and one entry holding the secret, indexed by the search engine on this machine."""
    scope = engine_corpus_write(SCOPE)
    add_memory(scope, {"secret": f"the vault password is {SECRET}"}, artifact_id="secrets")
    call_command("recall_index_build", "--scope", SCOPE, stdout=io.StringIO(), stderr=io.StringIO())
    return scope


def test_erase_rebuilds_this_machine_s_index_without_the_erased_document(indexed):
    from artifacts.recall.engine import store

    document = RecallDocument.objects.get(entry_version__entry_id="secret")
    path = store.index_path(indexed.pk, "memory")
    assert document.pk in store.ids_read(path)

    erase("--family", "memory", "--artifact", "secrets", "--entry-version", version("secret").version_id)

    assert document.pk not in store.ids_read(path)
    assert len(store.ids_read(path)) == RecallDocument.objects.filter(scope=indexed, family="memory").count()


def test_erasing_a_scope_removes_its_index_files_on_this_machine(indexed):
    from artifacts.recall.engine import store

    paths = [store.index_path(indexed.pk, family) for family in ("memory", "experience")]
    assert all(path.exists() for path in paths)

    erase("--all")

    assert not any(path.exists() for path in paths)


def test_a_scope_s_erasure_never_covers_rows_written_into_the_scope_after_it(world, runtime):  # noqa: F811
    erase("--all")
    later = add_experience(world["scope"], "exp-later", "written after the erasure")

    runtime.refused(f"UPDATE artifacts_artifactrevision SET body = '' WHERE id = {later.pk}")
    with triggers_lifted() as cursor:
        cursor.execute("UPDATE artifacts_artifactrevision SET body = '' WHERE id = %s", [later.pk])
    ok, out, _ = verify()

    assert not ok
    (problem,) = [line for line in out.splitlines() if "content_sha256" in line]
    assert "exp-later revision 1" in problem


def test_the_history_lists_an_erased_entry_version_with_its_hash_and_an_empty_body(client, world):
    e1 = version("e1")
    erase("--family", "memory", "--artifact", "memory", "--entry-version", e1.version_id)

    response = client.get(
        "/v1/artifacts/history",
        data={"scope_id": SCOPE, "family": "memory", "artifact_id": "memory"},
        **auth(world["key"]),
    )

    (revision,) = response.json()["revisions"]
    added = {entry["id"]: entry for entry in revision["added"]}
    assert (added["e1"]["body"], added["e1"]["content_sha256"]) == ("", e1.content_sha256)
    assert added["e2"]["body"] == "deploys run on fridays"
    assert SECRET not in response.content.decode()


# --- anchors cover the erasure chain -----------------------------------------------------------------------------


def test_an_anchor_catches_an_erasure_undone_with_its_record_removed(world, tmp_path):
    e1 = version("e1")
    original = e1.body
    erase("--family", "memory", "--artifact", "memory", "--entry-version", e1.version_id)
    anchor = str(tmp_path / "anchor.json")
    assert verify("--write-anchor", anchor)[0]
    with triggers_lifted() as cursor:  # the erased text put back from a backup, and its record dropped
        cursor.execute("DELETE FROM artifacts_erasure")
        cursor.execute("UPDATE artifacts_memoryentryversion SET body = %s WHERE id = %s", [original, e1.pk])

    assert verify()[0]  # every hash matches again: only the anchor knows an erasure was there
    ok, out, _ = verify("--anchor", anchor)

    assert not ok and "anchored erasure #1 missing" in out


def test_an_anchor_catches_an_erasure_chain_recomputed_consistently(world, tmp_path):
    erase("--family", "memory", "--artifact", "memory", "--entry-version", version("e1").version_id)
    anchor = str(tmp_path / "anchor.json")
    assert verify("--write-anchor", anchor)[0]
    (record,) = verify_history_records()
    record["reason"] = "routine cleanup"
    chain = erasure_chain_sha256(previous="", **{k: v for k, v in record.items() if k != "chain_sha256"})
    with triggers_lifted() as cursor:
        cursor.execute("UPDATE artifacts_erasure SET reason = 'routine cleanup', chain_sha256 = %s", [chain])

    assert verify()[0]
    ok, out, _ = verify("--anchor", anchor)

    assert not ok and "anchored erasure #1 chain_sha256" in out


def verify_history_records() -> list[dict]:
    ok, out, _ = verify("--json")
    return json.loads(out)["erasure_records"]


def test_erasing_an_entry_version_removes_its_vector_under_hybrid_recall(settings, embedding_server, committed_db):
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"
    embedding_endpoint_settings(settings, embedding_server, write_wait=5.0)
    scope = services.scope_create(scope_id=SCOPE)
    add_memory(scope, {"e1": f"the vault password is {SECRET}", "e2": "deploys run on fridays"})
    e1 = version("e1")
    document = RecallDocument.objects.get(entry_version=e1).pk
    assert RecallVector.objects.filter(document_id=document).exists()

    erase("--family", "memory", "--artifact", "memory", "--entry-version", e1.version_id)

    assert not RecallVector.objects.filter(document_id=document).exists()
    assert RecallVector.objects.filter(document__entry_version=version("e2")).exists()
