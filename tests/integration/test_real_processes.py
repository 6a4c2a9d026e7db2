"""End to end with real processes: gunicorn serving PowerContext, the ``hermes`` program, a fake model.

Nothing runs inside the test process but the fake OpenAI-compatible model (a thread on 127.0.0.1). The
server is started the way docs/deployment.md starts it (``gunicorn powercontext.wsgi`` over a migrated
SQLite database holding the demo, ``SECRET_KEY`` set, a free port on 127.0.0.1); writes, prepares and
exact reads go through the Python client in a subprocess; Hermes runs as a user runs it (``hermes chat -q``
with the plugin installed by ``python -m hermes_powercontext install`` into its HERMES_HOME).

The read turn: a memory is written, Hermes prepares context for a question about it, and the exact prepared
text must be in the model's request; the model then asks for the written entry through the provider's
``powercontext_read_citation`` tool and must get the written bytes back. The write turn: the model calls
Hermes' built-in ``memory`` tool, the provider mirrors the write, and PowerContext must prepare that text
and read it back exactly at the cited revision. Every process has a deadline, and proxies point at a closed
loopback port, so nothing leaves the machine and nothing waits forever.
"""

import hashlib
import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests import waits
from tests.conftest import PROJECT_ROOT
from tests.integration.conftest import (
    ANSWER,
    BIN,
    HERMES_CONFIG,
    MODEL,
    FakeModel,
    environment,
    gunicorn,
    manage,
    migrated_sqlite_environment,
)

pytestmark = pytest.mark.engine_independent  # its own databases, whatever the suite's engine (.ci/run)

DEMO_KEY = "pc_demo_0123456789abcdef0123456789abcdef"
SCOPE = "project:demo"
ASSEMBLY = {"sections": [{"family": "memory", "limit": 3}]}
ENTRY_ID = "flamingo-freeze"
BODY = "Flamingo deploys freeze on Fridays: tag releases before 12:00 UTC, then only hotfixes reach production."
QUERY = "When do flamingo deploys freeze?"
READ_TOOL = "powercontext_read_citation"
HERMES_SECONDS = 180


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """gunicorn serving a migrated SQLite database with the demo loaded; yields its base URL. Vectors inline: a
    test compares a prepare made right after a write with Hermes's, which a vector arriving between them would
    change (deferred vectors, the default: tests/integration/test_deferred_vectors_server.py)."""
    tmp = tmp_path_factory.mktemp("gunicorn")
    env = migrated_sqlite_environment(tmp) | {"POWERCONTEXT_EMBEDDINGS_WRITE": "inline"}
    manage(env, "load_context_fixtures", str(PROJECT_ROOT / "demo" / "demo.json"))
    with gunicorn(tmp / "gunicorn.log", env) as base:
        yield base


def client_call(base: str, tmp: Path, code: str) -> dict:
    """Runs ``code`` with ``client`` bound to a PowerContextClient in a subprocess; returns its printed JSON."""
    script = (
        "import json\n"
        "from powercontext_client import PowerContextClient\n"
        f"with PowerContextClient({base!r}, {DEMO_KEY!r}) as client:\n"
        f"    result = {code}\n"
        "print(result.model_dump_json())\n"
    )
    done = waits.run([sys.executable, "-c", script], env=environment(tmp), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def scripted_model(citation: dict):
    """The model's side of the turn: read the written entry through the tool once, then answer."""

    def reply(request: dict) -> dict:
        last = request["messages"][-1]
        offered = [tool["function"]["name"] for tool in request.get("tools") or []]
        if last["role"] == "user" and READ_TOOL in offered:
            arguments = {key: citation[key] for key in ("scope_id", "family", "artifact_id", "revision")} | {
                "entry_id": citation["entry_id"],
                "entry_version": citation["entry_version"],
            }
            call = {"id": "call_read_1", "type": "function"}
            call["function"] = {"name": READ_TOOL, "arguments": json.dumps(arguments)}
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": ANSWER}

    return reply


def hermes_home(tmp: Path, base: str, model: FakeModel, *, builtin_memory: bool = False) -> Path:
    """A HERMES_HOME set up as the README tells a user: plugin installed, provider selected, server named.

    ``builtin_memory`` turns on Hermes' own memory store, without which its ``memory`` tool writes nothing.
    """
    home = tmp / "hermes-home"
    home.mkdir()
    done = waits.run(
        [sys.executable, "-m", "hermes_powercontext", "install"],
        env=environment(tmp, HERMES_HOME=str(home)),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (home / "config.yaml").write_text(
        "model:\n"
        "  provider: custom\n"
        f"  base_url: {model.base_url}\n"
        f"  default: {MODEL}\n"
        "  api_key: sk-test\n"
        + (HERMES_CONFIG.replace("memory_enabled: false", "memory_enabled: true") if builtin_memory else HERMES_CONFIG),
        encoding="utf-8",
    )
    config = {"base_url": base, "scope_id": SCOPE, "max_bytes": 8000, "assembly": ASSEMBLY}
    (home / "powercontext.json").write_text(json.dumps(config), encoding="utf-8")
    return home


def hermes_chat(tmp: Path, base: str, respond, query: str, *, builtin_memory: bool = False):
    """Runs ``hermes chat`` once, as a user does, against ``respond`` as the model; it must exit 0.

    Returns the finished process and the model requests Hermes sent, parsed.
    """
    model = FakeModel(respond)
    try:
        home = hermes_home(tmp, base, model, builtin_memory=builtin_memory)
        env = environment(tmp, HERMES_HOME=str(home), POWERCONTEXT_API_KEY=DEMO_KEY)
        done = waits.run(
            [str(BIN / "hermes"), "chat", "-q", query, "-Q", "-t", "memory"],
            env=env,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=HERMES_SECONDS,
        )
    finally:
        model.close()
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done, [json.loads(raw) for raw in model.chat_requests()]


def tool_results(turns: list[dict], call_id: str) -> list[dict]:
    """The tool messages Hermes sent back to the model for one tool call."""
    return [m for t in turns for m in t["messages"] if m["role"] == "tool" and m.get("tool_call_id") == call_id]


def test_a_written_memory_is_prepared_into_the_model_request_and_read_back_exactly_by_hermes(server, tmp_path):
    written = client_call(server, tmp_path, f"client.create_memory_entry({SCOPE!r}, {ENTRY_ID!r}, {BODY!r})")
    citation = written["citation"]
    assert (citation["scope_id"], citation["entry_id"]) == (SCOPE, ENTRY_ID)
    # What PowerContext prepares for this question and configuration, asked by a host of its own.
    prepared = client_call(
        server, tmp_path, f"client.prepare_context({SCOPE!r}, {QUERY!r}, max_bytes=8000, assembly={ASSEMBLY!r})"
    )
    expected = prepared["content"]
    assert prepared["status"] == "ready" and BODY in expected
    assert f'Entry: id="{ENTRY_ID}", version="{citation["entry_version"]}"' in expected
    assert f"revision={citation['revision']}" in expected

    done, turns = hermes_chat(tmp_path, server, scripted_model(citation), QUERY)
    assert ANSWER in done.stdout

    asked = [t for t in turns if t["messages"][-1]["role"] == "user" and t["messages"][-1]["content"].startswith(QUERY)]
    assert asked, f"no model request carried the question: {[t['messages'][-1] for t in turns]}"
    # The exact prepared bytes reached the model, once, inside the user's turn.
    user_message = asked[0]["messages"][-1]["content"]
    assert user_message.count(expected) == 1, user_message

    # The tool call went to PowerContext and its exact answer came back to the model.
    results = tool_results(turns, "call_read_1")
    assert results, "Hermes never sent the read tool's result back to the model"
    read_back = json.loads(results[0]["content"])
    read = "client.read_exact_entry_version({scope_id!r}, {artifact_id!r}, {revision}, {entry_id!r}, {entry_version!r})"
    exact = client_call(server, tmp_path, read.format(**citation))
    assert read_back == exact
    assert read_back["revision"] == citation["revision"]
    assert read_back["entry"] | {"content_sha256": None} == {
        "id": ENTRY_ID,
        "version": citation["entry_version"],
        "body": BODY,
        "content_sha256": None,
        "conflict_key": None,
    }


MEMORY_TOOL = "memory"
WRITTEN = "Pelican releases ship on Tuesdays, after the staging smoke tests pass."
WRITE_QUERY = "Remember: pelican releases ship on Tuesdays, after the staging smoke tests pass."
RECALL_QUERY = "When do pelican releases ship?"
CITED = re.compile(
    r'Scope: "(?P<scope_id>[^"]+)"\n\s*Artifact: family="(?P<family>[^"]+)", id="(?P<artifact_id>[^"]+)", '
    r'revision=(?P<revision>\d+)\n\s*Entry: id="(?P<entry_id>[^"]+)", version="(?P<entry_version>[^"]+)"\n'
    r"\s*Truncated: no\n\n>     (?P<body>[^\n]*)\n"
)


def memory_writing_model(request: dict) -> dict:
    """The model's side of the write turn: save the user's fact with Hermes' memory tool once, then answer."""
    last = request["messages"][-1]
    offered = [tool["function"]["name"] for tool in request.get("tools") or []]
    if last["role"] == "user" and MEMORY_TOOL in offered:
        call = {"id": "call_memory_1", "type": "function"}
        call["function"] = {
            "name": MEMORY_TOOL,
            "arguments": json.dumps({"action": "add", "target": "memory", "content": WRITTEN}),
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": ANSWER}


def test_a_memory_written_through_hermes_is_prepared_by_powercontext_and_its_citation_reads_back_exactly(
    server, tmp_path
):
    done, turns = hermes_chat(tmp_path, server, memory_writing_model, WRITE_QUERY, builtin_memory=True)
    offered = {tool["function"]["name"] for t in turns for tool in t.get("tools") or []}
    assert MEMORY_TOOL in offered, f"Hermes never offered its memory tool; offered: {sorted(offered)}"
    results = tool_results(turns, "call_memory_1")
    assert results, "Hermes never sent the memory tool's result back to the model"
    assert json.loads(results[0]["content"]).get("success") is True, results[0]["content"]
    assert "not mirrored" not in done.stderr, done.stderr

    # Another host asks PowerContext about it: the written text is prepared, with its exact citation.
    prepared = client_call(
        server, tmp_path, f"client.prepare_context({SCOPE!r}, {RECALL_QUERY!r}, max_bytes=8000, assembly={ASSEMBLY!r})"
    )
    assert prepared["status"] == "ready", prepared
    cited = [match.groupdict() for match in CITED.finditer(prepared["content"]) if match["body"] == WRITTEN]
    assert len(cited) == 1, f"the written text is not prepared exactly once:\n{prepared['content']}"
    citation = cited[0]
    assert (citation["scope_id"], citation["family"], citation["artifact_id"]) == (SCOPE, "memory", "hermes-memory")
    assert citation["entry_id"] == "hermes-" + hashlib.sha256(WRITTEN.encode()).hexdigest()[:32]

    # Following the citation: the exact revision read returns exactly the written bytes.
    query = {
        key: citation[key] for key in ("scope_id", "family", "artifact_id", "revision", "entry_id", "entry_version")
    }
    url = f"{server}/v1/artifacts/revision?{urllib.parse.urlencode(query)}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {DEMO_KEY}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        read = json.loads(response.read())
    assert read["revision"] == int(citation["revision"])
    assert read["entry"]["body"].encode("utf-8") == WRITTEN.encode("utf-8")
    assert read["entry"]["content_sha256"] == hashlib.sha256(WRITTEN.encode("utf-8")).hexdigest()
