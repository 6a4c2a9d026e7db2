"""Several gunicorn workers on several app machines, each ranking a large scope through its own search index,
prepare exactly what the SQL ranking prepares: after a build, after writes the index has not seen, when the index
falls too far behind, and while it is rebuilt under load.

Real processes only, over one database: machines A and B are gunicorn servers with ``-w 2`` sync workers, each
with its own index directory built by its own ``manage.py recall_index_build`` (docs/deployment.md, section 12:
one index per machine, a local directory), and E is a gunicorn without an index, whose SQL ranking gives the
exact answers. A low POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS sends the large scope's memory and experience rankings
through the engine; the small scope it references stays on SQL. Every prepare is compared byte for byte with E's
answer; ``/metrics`` (aggregated over each machine's workers through PROMETHEUS_MULTIPROC_DIR) shows that the index
answered, or why it did not, and the access log names the worker processes that answered.

The database is a scratch SQLite file, or, with DATABASE_URL naming PostgreSQL, a scratch database on that server
(dropped afterwards). Every process has a deadline and every server is stopped on the way out.
"""

import json
import os
import random
import re
import secrets
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import waits
from tests.integration.conftest import environment, gunicorn, manage
from tests.recall_words import WORDS, words_queries, words_text

SCOPE = "project:engine"
SMALL_SCOPE = "team:small"
KEY = "pc_workers_0123456789abcdef0123456789abcdef"
MEMORIES = 120  # more than the engine's 4 x 16 memory candidates: its cut is real
THRESHOLD = 20
MAX_LAG = 4
ASSEMBLY = {
    "sections": [{"family": "memory", "limit": 16}, {"family": "experience", "limit": 8}],
    "show": ["recall_rank"],
}
QUERIES = words_queries(20, seed=24)
ROUNDS = 2
REQUEST_SECONDS = 30
ACCESS_LOG_FORMAT = "%(p)s %(m)s %(U)s %(s)s"
FRESH_BODY = "Flamingo rollback drill: verify the flamingo archive before every rollback."
FRESH_QUERY = "flamingo rollback"
UPDATED_BODY = "Pelican schema migrations run behind a lock; pelican verifies the replica first."
PELICAN_QUERY = "pelican lock replica"


def corpus() -> dict:
    """The fixture: a large scope (120 memory entries, 41 experiences) referencing a small one, and a key.

    Every word of the vocabulary is in both families of the large scope, so every query ranks both through the
    engine (two index answers per prepare).
    """
    rng = random.Random(7)
    memory = [
        {"id": f"m{i}", "version": f"m{i}-v1", "body": f"{words_text(rng)} {WORDS[i % len(WORDS)]}"}
        for i in range(MEMORIES)
    ]
    small = [{"id": f"s{i}", "version": f"s{i}-v1", "body": words_text(rng)} for i in range(5)]
    experiences = [
        {"scope": SCOPE, "family": "experience", "id": f"e{i}", "revisions": [{"body": f"{words_text(rng)} {word}"}]}
        for i, word in enumerate(WORDS)
    ]
    return {
        "scopes": [
            {"id": SMALL_SCOPE, "title": "A small scope (ranked in SQL)", "references": []},
            {"id": SCOPE, "title": "A large scope (ranked through the index)", "references": [SMALL_SCOPE]},
        ],
        "api_keys": [
            {
                "name": "workers-test",
                "key": KEY,
                "grants": [
                    {"scope": SCOPE, "read": True, "write": True},
                    {"scope": SMALL_SCOPE, "read": True, "write": False},
                ],
            }
        ],
        "artifacts": [
            {"scope": SCOPE, "family": "memory", "id": "memory", "revisions": [{"entries": memory}]},
            {"scope": SMALL_SCOPE, "family": "memory", "id": "memory", "revisions": [{"entries": small}]},
            *experiences,
        ],
    }


@contextmanager
def scratch_database(tmp: Path) -> Iterator[str]:
    """The servers' DATABASE_URL: a new database on DATABASE_URL's PostgreSQL (dropped on the way out), else SQLite."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        yield f"sqlite:///{tmp / 'powercontext.sqlite3'}"
        return
    import psycopg

    name = f"pc_workers_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as admin:
        try:
            admin.execute(f"CREATE DATABASE {name}")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("DATABASE_URL's PostgreSQL role may not CREATE DATABASE (the servers need a scratch database)")
    try:
        yield urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@dataclass(frozen=True)
class Machine:
    """One app machine: its gunicorn's URL, the environment of its commands, and its access log."""

    name: str
    url: str
    env: dict
    access_log: Path


@dataclass(frozen=True)
class Deployment:
    machines: tuple[Machine, Machine]
    exact: str
    """A gunicorn without the index: every scope ranked in SQL."""


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("search-index-workers")
    with ExitStack() as stack:
        env = environment(
            tmp,
            SECRET_KEY=secrets.token_urlsafe(50),
            DATABASE_URL=stack.enter_context(scratch_database(tmp)),
            DJANGO_SETTINGS_MODULE="powercontext.settings",
            ALLOWED_HOSTS="127.0.0.1",
            # Vectors written with their texts: a deferred vector landing between the engine's prepare and SQL's
            # would change one of the two (deferred vectors, the default: test_deferred_vectors_server.py).
            POWERCONTEXT_EMBEDDINGS_WRITE="inline",
        )
        manage(env, "migrate", "-v", "0")
        fixture = tmp / "corpus.json"
        fixture.write_text(json.dumps(corpus()), encoding="utf-8")
        manage(env, "load_context_fixtures", str(fixture))
        machines = []
        for name in ("a", "b"):
            (tmp / f"metrics-{name}").mkdir()
            machine_env = env | {
                "POWERCONTEXT_SEARCH_INDEX_DIR": str(tmp / f"search-{name}"),
                "POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS": str(THRESHOLD),
                "POWERCONTEXT_SEARCH_INDEX_MAX_LAG": str(MAX_LAG),
                "PROMETHEUS_MULTIPROC_DIR": str(tmp / f"metrics-{name}"),
                "POWERCONTEXT_METRICS_LOOPBACK": "true",
            }
            built = manage(machine_env, "recall_index_build", "--settle", "0").stdout
            assert f"memory ({MEMORIES} documents): rebuilt" in built, built
            assert f"experience ({len(WORDS)} documents): rebuilt" in built, built
            access_log = tmp / f"access-{name}.log"
            options = ["--access-logfile", str(access_log), "--access-logformat", ACCESS_LOG_FORMAT]
            url = stack.enter_context(gunicorn(tmp / f"gunicorn-{name}.log", machine_env, workers=2, options=options))
            machines.append(Machine(name, url, machine_env, access_log))
        exact = stack.enter_context(gunicorn(tmp / "gunicorn-exact.log", env))
        yield Deployment(tuple(machines), exact)


def post(base: str, path: str, payload: dict) -> bytes:
    """POST as the test key; the response body (any status but 2xx fails the test with its body)."""
    request = urllib.request.Request(
        base + path,
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_SECONDS) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        pytest.fail(f"POST {base}{path} answered {exc.code}: {exc.read()[:2000]!r}")


def prepare(base: str, query: str) -> bytes:
    """The raw response body of one prepare of the large scope."""
    return post(
        base, "/v1/context/prepare", {"scope_id": SCOPE, "query": query, "max_bytes": 32768, "assembly": ASSEMBLY}
    )


def content(body: bytes) -> str:
    prepared = json.loads(body)
    assert prepared["status"] == "ready", prepared
    return prepared["content"]


def exact_answers(deployment: Deployment, queries: list[str]) -> dict[str, bytes]:
    return {query: prepare(deployment.exact, query) for query in queries}


def index_uses(machine: Machine) -> Counter:
    """The machine's index answers (``answers``) and fallbacks by reason, summed over its workers."""
    with urllib.request.urlopen(machine.url + "/metrics", timeout=REQUEST_SECONDS) as response:
        text = response.read().decode()
    uses = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "powercontext_recall_index_answers_total":
                uses["answers"] += sample.value
            elif sample.name == "powercontext_recall_index_fallbacks_total":
                uses[sample.labels["reason"]] += sample.value
    return uses


def counted_uses(deployment: Deployment, before: dict[str, Counter]) -> dict[str, Counter]:
    """What each machine's metrics counted since ``before``, zero counts left out."""
    return {m.name: +(index_uses(m) - before[m.name]) for m in deployment.machines}


def all_uses(deployment: Deployment) -> dict[str, Counter]:
    return {m.name: index_uses(m) for m in deployment.machines}


def access_lines(machine: Machine) -> list[str]:
    return machine.access_log.read_text(encoding="utf-8").splitlines()


def answering_workers(machine: Machine, since: int) -> set[str]:
    """The worker processes that answered prepares, in the access log's lines from ``since`` on."""
    return {line.split()[0] for line in access_lines(machine)[since:] if " /v1/context/prepare 200" in line}


def mismatch(query: str, expected: bytes, got: bytes, where: str) -> str:
    return f"{where}, query {query!r}:\n--- exact (SQL)\n{content(expected)}\n--- got\n{content(got)}"


def served_exactly(deployment: Deployment, expected: dict[str, bytes], *, until: threading.Event | None = None) -> int:
    """Every query ROUNDS times on each machine, from two client threads per machine at once (so that both of its
    workers answer), each answer compared byte for byte with the exact one; returns the prepares sent to each machine.

    With ``until``, the clients go round the queries until it is set instead (once at least).
    """
    wrong: list[str] = []
    sent = Counter()

    def more(rounds: int) -> bool:
        return rounds < ROUNDS if until is None else rounds == 0 or not until.is_set()

    def client(machine: Machine, queries: list[str]):
        def run() -> None:
            rounds = 0
            while more(rounds):
                for query in queries:
                    got = prepare(machine.url, query)
                    sent[machine.name] += 1
                    if got != expected[query]:
                        wrong.append(mismatch(query, expected[query], got, f"machine {machine.name}"))
                rounds += 1

        return run

    queries = list(expected)
    clients = [client(m, order) for m in deployment.machines for order in (queries, queries[::-1])]
    errors = waits.run_threads(clients, what="prepare clients")
    assert not errors, errors
    assert not wrong, (
        f"{len(wrong)} of {sum(sent.values())} prepares differ from the exact answer; the first:\n{wrong[0]}"
    )
    return sent[deployment.machines[0].name]


def cited_entries(body: bytes) -> list[tuple[str, str]]:
    """(entry id, version) of every memory entry the prepared content cites, in order."""
    return re.findall(r'Entry: id="([^"]+)", version="([^"]+)"', content(body))


def test_every_worker_of_every_machine_prepares_exactly_what_sql_prepares(deployment):
    machines = deployment.machines
    a, b = machines

    # 1. As built: both workers of both machines answer through their own index, exactly.
    expected = exact_answers(deployment, QUERIES)
    assert len(expected) == 20 and all(
        any(entry.startswith("m") for entry, _ in cited_entries(answer)) for answer in expected.values()
    )
    before = all_uses(deployment)
    per_machine = served_exactly(deployment, expected)
    assert counted_uses(deployment, before) == {m.name: Counter(answers=2 * per_machine) for m in machines}
    for machine in machines:
        assert len(answering_workers(machine, 0)) == 2, f"machine {machine.name}: one worker answered every prepare"

    # 2. A write through machine A is in the very next prepare of both machines: the index has not seen it.
    written = json.loads(
        post(a.url, "/v1/memory/entries", {"scope_id": SCOPE, "entry_id": "fresh", "body": FRESH_BODY})
    )
    fresh = ("fresh", written["citation"]["entry_version"])
    for machine in (b, a):
        got = prepare(machine.url, FRESH_QUERY)
        assert cited_entries(got)[0] == fresh, f"machine {machine.name} did not prepare the write first"
    expected = exact_answers(deployment, [*QUERIES, FRESH_QUERY])
    assert cited_entries(expected[FRESH_QUERY])[0] == fresh
    before = all_uses(deployment)
    per_machine = served_exactly(deployment, expected)
    assert counted_uses(deployment, before) == {m.name: Counter(answers=2 * per_machine) for m in machines}

    # 3. An update and a removal through machine B: the index still holds the retired versions, no answer cites them.
    top = [entry for entry in cited_entries(expected[QUERIES[0]]) if entry[0].startswith("m")]
    removed, updated = top[0], top[1]
    post(b.url, "/v1/memory/entries/remove", {"scope_id": SCOPE, "entry_id": removed[0]})
    post(b.url, "/v1/memory/entries/update", {"scope_id": SCOPE, "entry_id": updated[0], "body": UPDATED_BODY})
    expected = exact_answers(deployment, [*QUERIES, FRESH_QUERY, PELICAN_QUERY])
    assert cited_entries(expected[PELICAN_QUERY])[0][0] == updated[0]
    for answer in expected.values():
        assert removed[0] not in dict(cited_entries(answer)) and updated not in cited_entries(answer)
    before = all_uses(deployment)
    per_machine = served_exactly(deployment, expected)
    assert counted_uses(deployment, before) == {m.name: Counter(answers=2 * per_machine) for m in machines}

    # 4. More writes than MAX_LAG since the build: the memory rankings fall back to SQL on every worker, exactly.
    for n in range(3):
        body = f"Late note {n}: {words_text(random.Random(n))}"
        post(a.url, "/v1/memory/entries", {"scope_id": SCOPE, "entry_id": f"late-{n}", "body": body})
    expected = exact_answers(deployment, list(expected))
    before = all_uses(deployment)
    per_machine = served_exactly(deployment, expected)
    assert counted_uses(deployment, before) == {
        m.name: Counter(answers=per_machine, stale=per_machine) for m in machines
    }

    # 5. A rebuilds from empty and B updates incrementally while both keep answering, exactly.
    built, finished = {}, []
    done = threading.Event()

    def build(machine: Machine, *options: str):
        def run() -> None:
            try:
                built[machine.name] = manage(machine.env, "recall_index_build", "--settle", "0", *options).stdout
            finally:
                finished.append(machine.name)
                if len(finished) == len(machines):
                    done.set()

        return run

    builds = [build(a, "--rebuild"), build(b)]
    errors = waits.run_threads([*builds, lambda: served_exactly(deployment, expected, until=done)], what="rebuild")
    assert not errors, errors
    assert "memory (123 documents): rebuilt" in built["a"], built["a"]
    assert "memory (123 documents): updated, 5 added, 2 deleted, 123 indexed" in built["b"], built["b"]

    # After the build every worker answers through the new commit: a worker still on the old one would fall back.
    since = {m.name: len(access_lines(m)) for m in machines}
    before = all_uses(deployment)
    per_machine = served_exactly(deployment, expected)
    assert counted_uses(deployment, before) == {m.name: Counter(answers=2 * per_machine) for m in machines}
    for machine in machines:
        assert len(answering_workers(machine, since[machine.name])) == 2, machine.name


def memory_and_experience_indexes(machine: Machine) -> tuple[Path, Path]:
    """The large scope's memory and experience index directories on ``machine`` (the small scope has none)."""
    root = Path(machine.env["POWERCONTEXT_SEARCH_INDEX_DIR"]) / "v1"
    (memory,) = root.glob("*-memory")
    (experience,) = root.glob("*-experience")
    return memory, experience


def index_files(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if not p.name.endswith(".lock"))


def test_an_index_written_over_under_running_workers_never_changes_a_prepare(deployment):
    """Machine A's memory index written over while its workers search it: first with another index's files (as
    ``cp -f`` or rsync write them: new files under the old names), then, after a rebuild, with other bytes in the very
    files its workers have mapped (same sizes). Every prepare of every worker is still SQL's, counted as a fallback
    (``mismatch``, ``panic`` or ``corrupt``) for the memory ranking, while the experience ranking still answers through
    the index; a build repairs it. Machine B is untouched throughout."""
    a, b = deployment.machines
    expected = exact_answers(deployment, QUERIES)
    served_exactly(deployment, expected)  # every worker of both machines has the indexes open
    memory, experience = memory_and_experience_indexes(a)
    assert all(not path.stat().st_mode & 0o222 for path in index_files(memory)), "the build left a file writable"

    # 1. Another index's files copied over the live one.
    for source in index_files(experience):
        target = memory / source.name
        target.unlink(missing_ok=True)
        shutil.copyfile(source, target)
    before = all_uses(deployment)
    per_machine = served_exactly(deployment, expected)
    assert counted_uses(deployment, before) == {
        "a": Counter(answers=per_machine, mismatch=per_machine),
        "b": Counter(answers=2 * per_machine),
    }

    assert "memory (" in manage(a.env, "recall_index_build", "--settle", "0").stdout
    served_exactly(deployment, expected)  # every worker of A maps the rebuilt index's files

    # 2. Other bytes written into the files the workers have mapped (the builder sealed them: that is lifted first).
    since = len(access_lines(a))
    rng = random.Random(11)
    for path in index_files(memory):
        if path.suffix not in (".json", ".bin"):
            path.chmod(0o644)
            with open(path, "r+b") as file:
                file.write(rng.randbytes(path.stat().st_size))
    before = all_uses(deployment)
    per_machine = served_exactly(deployment, expected)
    counted = counted_uses(deployment, before)
    assert counted["b"] == Counter(answers=2 * per_machine), counted
    fallbacks = counted["a"] - Counter(answers=per_machine)
    assert counted["a"]["answers"] == per_machine and fallbacks.total() == per_machine, counted
    assert set(fallbacks) <= {"mismatch", "panic", "corrupt"}, counted
    assert len(answering_workers(a, since)) == 2, "one worker of A answered every prepare"

    built = manage(a.env, "recall_index_build", "--rebuild", "--settle", "0").stdout
    assert "memory (" in built and "rebuilt" in built, built
    before = all_uses(deployment)
    per_machine = served_exactly(deployment, expected)
    assert counted_uses(deployment, before) == {m.name: Counter(answers=2 * per_machine) for m in deployment.machines}
