"""Parallel writers through HTTP, on whichever engine DATABASE_URL selects (SQLite or PostgreSQL).

Every writer either succeeds or gets a clean 409; revisions stay gapless and unique; no entry is lost;
and prepare, running beside the writers, only ever cites entry versions that were live at the cited
revision, which the exact-read endpoint then returns byte for byte.

Threads need a database that really commits (``committed_db``) and, on SQLite, a file rather than
Django's shared-cache memory database (settings give tests one): its table locks ignore the busy
timeout, so parallel writers would fail with "table is locked" instead of waiting their turn.
"""

import json
import random
import threading
from collections.abc import Callable

import pytest
from django.db import connections
from django.test import Client

from artifacts import services
from artifacts.models import Artifact, ArtifactRevision, MemoryEntryVersion
from tests import waits

SCOPE = "project:concurrent"
ENTRY_CREATE = "/v1/memory/entries"
ENTRY_UPDATE = "/v1/memory/entries/update"
ENTRY_REMOVE = "/v1/memory/entries/remove"
EXPERIENCE = "/v1/experiences/revisions"
TOPIC = "/v1/topic-memories/revisions"
CANDIDATES = "/v1/profile/candidates"
PREPARE = "/v1/context/prepare"
REVISION = "/v1/artifacts/revision"
HISTORY = "/v1/artifacts/history"
LEGACY_BEGIN = "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1\n"
LEGACY_END = "\nEND_POWERCONTEXT_PREPARED_CONTEXT_V1"
VOCABULARY = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()  # noqa: SIM905


@pytest.fixture
def keys(committed_db):
    """(writer key, reader key) for a fresh scope."""
    scope = services.scope_create(scope_id=SCOPE)
    writer = services.api_key_create(name="writer", read_scopes=[scope], write_scopes=[scope])[1]
    reader = services.api_key_create(name="reader", read_scopes=[scope])[1]
    return writer, reader


# --- helpers ----------------------------------------------------------------------------------------


def auth(key: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def post(client: Client, url: str, key: str, body: dict) -> tuple[int, dict]:
    response = client.post(url, data=json.dumps(body), content_type="application/json", **auth(key))
    return response.status_code, response.json()


def get(client: Client, url: str, key: str, params: dict) -> tuple[int, dict]:
    response = client.get(url, data=params, **auth(key))
    return response.status_code, response.json()


def run_threads(count: int, target: Callable[[int, Client], object], *, barriers=()) -> list:
    """Run ``target(i, client)`` in ``count`` threads started together; return their results in order.

    Each thread has its own test client and database connection, closed when it ends. Every wait is
    bounded (tests/waits.py): a thread that fails aborts the start line and ``barriers``, and threads
    still running at the deadline fail the test instead of hanging it.
    """
    start = waits.barrier(count)
    results: list = [None] * count

    def runner(i: int) -> Callable[[], None]:
        def run() -> None:
            try:
                client = Client()
                start.wait()
                results[i] = target(i, client)
            finally:
                connections.close_all()

        return run

    errors = waits.run_threads([runner(i) for i in range(count)], what="writers", barriers=[start, *barriers])
    assert errors == []
    return results


def statuses(results) -> list[int]:
    return sorted(status for per_thread in results for status, _ in per_thread)


def memory_citation_at(revision: int, artifact_id: str = "memory") -> dict:
    return {"scope_id": SCOPE, "family": "memory", "artifact_id": artifact_id, "revision": revision}


def assert_gapless(artifact: Artifact, count: int) -> None:
    revisions = list(ArtifactRevision.objects.filter(artifact=artifact).order_by("revision"))
    assert [r.revision for r in revisions] == list(range(1, count + 1))
    assert len({r.content_sha256 for r in revisions}) == count
    artifact.refresh_from_db()
    assert artifact.head_revision == count


def artifact(family: str, artifact_id: str) -> Artifact:
    return Artifact.objects.get(scope__scope_id=SCOPE, family=family, artifact_id=artifact_id)


# --- unconditional writers --------------------------------------------------------------------------


def test_eight_writers_creating_ten_entries_each_in_one_memory_all_succeed_with_revisions_1_to_80(keys):
    writer, reader = keys
    writers, per_writer = 8, 10
    total = writers * per_writer

    def target(i: int, client: Client) -> list:
        return [
            post(
                client, ENTRY_CREATE, writer, {"scope_id": SCOPE, "entry_id": f"w{i}-e{n}", "body": f"writer {i} n {n}"}
            )
            for n in range(per_writer)
        ]

    results = run_threads(writers, target)
    assert statuses(results) == [201] * total
    citations = [body["citation"] for per_thread in results for _, body in per_thread]
    assert sorted(c["revision"] for c in citations) == list(range(1, total + 1))
    # Each writer's own revisions increase: a later write never lands under an earlier one.
    for per_thread in results:
        own = [body["citation"]["revision"] for _, body in per_thread]
        assert own == sorted(own)

    client = Client()
    for citation in citations:
        status, read = get(client, REVISION, reader, citation)
        assert status == 200
        writer_n = citation["entry_id"].removeprefix("w").split("-e")
        assert read["entry"]["body"] == f"writer {writer_n[0]} n {writer_n[1]}"
    status, head = get(client, REVISION, reader, memory_citation_at(total) | {"entries_limit": 100})
    assert status == 200 and head["next_entries_after"] is None
    assert len(head["entries"]) == total
    assert {e["id"] for e in head["entries"]} == {f"w{i}-e{n}" for i in range(writers) for n in range(per_writer)}
    status, page = get(
        client, HISTORY, reader, {"scope_id": SCOPE, "family": "memory", "artifact_id": "memory", "limit": 100}
    )
    assert status == 200
    assert [item["citation"]["revision"] for item in page["revisions"]] == list(range(total, 0, -1))
    assert all(len(item["added"]) == 1 and item["retired"] == [] for item in page["revisions"])
    assert_gapless(artifact("memory", "memory"), total)
    assert MemoryEntryVersion.objects.filter(retired_in_revision__isnull=True).count() == total


def test_parallel_updates_of_one_entry_all_succeed_and_leave_exactly_one_live_version(keys):
    writer, _ = keys
    setup = Client()
    assert post(setup, ENTRY_CREATE, writer, {"scope_id": SCOPE, "entry_id": "hot", "body": "v1"})[0] == 201
    writers, per_writer = 8, 5

    def target(i: int, client: Client) -> list:
        return [
            post(client, ENTRY_UPDATE, writer, {"scope_id": SCOPE, "entry_id": "hot", "body": f"writer {i} take {n}"})
            for n in range(per_writer)
        ]

    results = run_threads(writers, target)
    total = 1 + writers * per_writer
    assert statuses(results) == [201] * (writers * per_writer)
    versions = [body["citation"]["entry_version"] for per_thread in results for _, body in per_thread]
    assert sorted(versions) == sorted(f"hot-v{n}" for n in range(2, total + 1))
    assert_gapless(artifact("memory", "memory"), total)
    live = MemoryEntryVersion.objects.filter(entry_id="hot", retired_in_revision__isnull=True)
    assert [(v.version_id, v.born_in_revision) for v in live] == [(f"hot-v{total}", total)]
    # Each retired version lived exactly one revision: the chain of versions has no gap and no fork.
    for version in MemoryEntryVersion.objects.filter(entry_id="hot", retired_in_revision__isnull=False):
        assert version.retired_in_revision == version.born_in_revision + 1


def test_parallel_experience_and_topic_writers_on_one_artifact_get_gapless_revisions(keys):
    writer, reader = keys
    writers, per_writer = 8, 5

    def target(i: int, client: Client) -> list:
        out = []
        for n in range(per_writer):
            body = {"scope_id": SCOPE, "artifact_id": "shared", "body": f"lesson {i}.{n}"}
            out.append(post(client, EXPERIENCE, writer, body))
            topic = {"scope_id": SCOPE, "artifact_id": "shared", "title": f"t{i}", "summary": f"summary {i}.{n}"}
            out.append(post(client, TOPIC, writer, topic))
        return out

    results = run_threads(writers, target)
    total = writers * per_writer
    assert statuses(results) == [201] * (2 * total)
    assert_gapless(artifact("experience", "shared"), total)
    assert_gapless(artifact("topic_memory", "shared"), total)
    client = Client()
    for _, body in (item for per_thread in results for item in per_thread):
        status, read = get(client, REVISION, reader, body["citation"])
        assert status == 200
        assert read["content_sha256"] == body["content_sha256"]


def test_writers_to_different_artifacts_of_one_scope_sharing_words_all_succeed(keys):
    """Index statistics are shared per scope and family: writers on different artifacts must not deadlock."""
    writer, _ = keys
    writers, per_writer = 8, 6

    def target(i: int, client: Client) -> list:
        rng = random.Random(i)
        out = []
        for n in range(per_writer):
            words = rng.sample(VOCABULARY, 2)  # term sets that differ between writers and steps
            out.append(
                post(
                    client, EXPERIENCE, writer, {"scope_id": SCOPE, "artifact_id": f"exp-{i}", "body": " ".join(words)}
                )
            )
            entry = {"scope_id": SCOPE, "artifact_id": f"memory-{i}", "entry_id": "e", "body": " ".join(words[::-1])}
            out.append(post(client, ENTRY_CREATE if n == 0 else ENTRY_UPDATE, writer, entry))
        return out

    results = run_threads(writers, target)
    assert statuses(results) == [201] * (2 * writers * per_writer), [
        body for per_thread in results for status, body in per_thread if status != 201
    ]
    for i in range(writers):
        assert_gapless(artifact("experience", f"exp-{i}"), per_writer)
        assert_gapless(artifact("memory", f"memory-{i}"), per_writer)


# --- conditional writers ----------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["memory", "experience", "topic_memory"])
def test_writers_racing_with_the_same_expected_head_get_exactly_one_201_and_409_for_the_rest(keys, family):
    writer, _ = keys
    writers, rounds = 8, 4
    url = {"memory": ENTRY_CREATE, "experience": EXPERIENCE, "topic_memory": TOPIC}[family]
    round_barrier = waits.barrier(writers)
    winners: list[list[int]] = [[] for _ in range(rounds)]

    def body(i: int, head: int) -> dict:
        base = {"scope_id": SCOPE, "expected_head_revision": head}
        if family == "memory":
            return base | {"entry_id": f"round{head}-writer{i}", "body": f"writer {i}"}
        if family == "experience":
            return base | {"artifact_id": "exp", "body": f"writer {i} at {head}"}
        return base | {"artifact_id": "topic", "title": "T", "summary": f"writer {i} at {head}"}

    def target(i: int, client: Client) -> list:
        out = []
        for head in range(rounds):
            round_barrier.wait()
            status, response = post(client, url, writer, body(i, head))
            out.append((status, response))
            if status == 201:
                winners[head].append(response["citation"]["revision"])
            else:
                assert status == 409, response
                assert response["error"]["code"] == "conflict"
        return out

    results = run_threads(writers, target, barriers=[round_barrier])
    assert statuses(results) == [201] * rounds + [409] * (rounds * (writers - 1))
    assert winners == [[n] for n in range(1, rounds + 1)]
    artifact_id = {"memory": "memory", "experience": "exp", "topic_memory": "topic"}[family]
    assert_gapless(artifact(family, artifact_id), rounds)


def test_creates_of_one_entry_id_racing_give_one_201_and_409_for_the_rest(keys):
    writer, _ = keys
    writers = 8

    def target(i: int, client: Client) -> list:
        return [post(client, ENTRY_CREATE, writer, {"scope_id": SCOPE, "entry_id": "same", "body": f"by {i}"})]

    results = run_threads(writers, target)
    assert statuses(results) == [201] + [409] * (writers - 1)
    assert MemoryEntryVersion.objects.filter(entry_id="same").count() == 1
    assert_gapless(artifact("memory", "memory"), 1)


def test_racing_commits_of_one_candidate_give_one_revision(keys):
    writer, _ = keys
    setup = Client()
    status, candidate = post(setup, CANDIDATES, writer, {"scope_id": SCOPE, "body": "Prefers tea."})
    assert status == 201

    def target(i: int, client: Client) -> list:
        action = "commit" if i % 2 == 0 else "reject"
        return [post(client, f"{CANDIDATES}/{candidate['id']}/{action}", writer, {})]

    results = run_threads(8, target)
    codes = statuses(results)
    assert codes.count(409) == 7
    assert codes in ([200] + [409] * 7, [201] + [409] * 7)
    committed = ArtifactRevision.objects.filter(artifact__family="profile").count()
    assert committed == (1 if 201 in codes else 0)


# --- readers beside writers -------------------------------------------------------------------------


def test_prepare_during_writes_only_cites_versions_live_at_the_cited_revision(keys):
    writer, reader = keys
    writers, per_writer = 4, 12
    done = threading.Event()
    finished = [0]
    lock = threading.Lock()

    def write(i: int, client: Client) -> list:
        rng = random.Random(100 + i)
        try:
            out, mine = [], []
            for n in range(per_writer):
                text = " ".join(rng.sample(VOCABULARY, 4)) + f" by writer {i} step {n}"
                if mine and n % 3 == 1:
                    status, body = post(
                        client, ENTRY_UPDATE, writer, {"scope_id": SCOPE, "entry_id": mine[0], "body": text}
                    )
                elif len(mine) > 1 and n % 3 == 2:  # always keep one live entry per writer
                    status, body = post(client, ENTRY_REMOVE, writer, {"scope_id": SCOPE, "entry_id": mine.pop()})
                else:
                    mine.append(f"w{i}-e{n}")
                    status, body = post(
                        client, ENTRY_CREATE, writer, {"scope_id": SCOPE, "entry_id": mine[-1], "body": text}
                    )
                out.append((status, body))
                if n % 4 == 0:
                    exp = {"scope_id": SCOPE, "artifact_id": f"exp-{i}", "body": text}
                    out.append(post(client, EXPERIENCE, writer, exp))
        finally:  # a writer that failed counts as finished too: the reader must not wait for it forever
            with lock:
                finished[0] += 1
                if finished[0] == writers:
                    done.set()
        return out

    def read(client: Client) -> list:
        seen, rounds = [], 0
        while not done.is_set() or rounds < 2:
            rounds += 1
            for query in ("alpha bravo", "charlie delta echo", "kilo lima writer"):
                response = client.post(
                    PREPARE,
                    data=json.dumps({"scope_id": SCOPE, "query": query, "max_bytes": 32768}),
                    content_type="application/json",
                    **auth(reader),
                )
                assert response.status_code == 200, response.content
                content = response.json()["content"]
                if content is None:
                    continue
                items = json.loads(content.split(LEGACY_BEGIN, 1)[1].split(LEGACY_END, 1)[0])["items"]
                for item in items:
                    citation = {
                        "scope_id": item["scope"],
                        "family": item["family"],
                        "artifact_id": item["artifact"]["id"],
                        "revision": item["artifact"]["revision"],
                    }
                    if "entry" in item:
                        citation |= {"entry_id": item["entry"]["id"], "entry_version": item["entry"]["version"]}
                    # Resolve it at once, while writers keep moving the head.
                    status, exact = get(client, REVISION, reader, citation)
                    assert status == 200, (citation, exact)
                    stored = exact["entry"]["body"] if "entry" in item else exact["body"]
                    assert item["truncated"] is False
                    assert stored == item["body"]
                    seen.append(citation)
        return seen

    def target(i: int, client: Client):
        return read(client) if i == writers else write(i, client)

    results = run_threads(writers + 1, target)
    seen = results[writers]
    assert all(status == 201 for per_thread in results[:writers] for status, _ in per_thread)
    memory_seen = [c for c in seen if c["family"] == "memory"]
    assert memory_seen, "the reader saw no memory entry at all"

    # Afterwards: every cited version was live at exactly the cited revision, per the stored history.
    memory = artifact("memory", "memory")
    for citation in memory_seen:
        version = MemoryEntryVersion.objects.get(artifact=memory, version_id=citation["entry_version"])
        assert version.is_live_at(citation["revision"])
    total_writes = sum(
        1 for per_thread in results[:writers] for _, body in per_thread if body["citation"]["family"] == "memory"
    )
    assert_gapless(memory, total_writes)
