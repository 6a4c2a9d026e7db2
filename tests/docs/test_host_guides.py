"""Each host path of the documentation followed as a user follows it, against a real server process.

For each host (the Python client, an MCP host, a LangGraph graph) the install line its guide gives is run exactly
as written, but for the venv's path, into a fresh venv of its own (so a line that forgets a package fails here, not
on a user's machine); then the guide's examples run with that venv's Python, in a clean environment whose PATH
holds no venv, against ``manage.py runserver`` serving the demo (``run_examples.demo_server``). The guides:
docs/hosts.md, client/README.md, integrations/powercontext_mcp/README.md, integrations/langgraph_powercontext/
README.md and README.md's install line for MCP hosts (these must give the same lines as docs/hosts.md).

The install blocks carry ``<!-- docs-test: skip -->`` for ``run_examples.py``, which runs shell blocks in the
project's own environment; here they run in a venv of their own. What is printed depends on how the server ranks
(hybrid by default, lexical when a query is not embedded in time), so only what is the same either way is checked
exactly.
"""

import os
import re
import shlex
import socket
import subprocess
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import waits
from tests.docs.run_examples import DOCS_ADDRESS, ROOT, demo_server

pytestmark = [
    pytest.mark.engine_independent,  # its own databases, whatever the suite's engine (.ci/run)
    pytest.mark.skipif(os.name != "posix", reason="runs the guides' POSIX shell lines and venv paths"),
    # One worker for all three: each installs ./client editable, and pip writes its egg-info into client/src.
    pytest.mark.xdist_group("host_guides"),
]

HOSTS = ROOT / "docs" / "hosts.md"
MCP_README = ROOT / "integrations" / "powercontext_mcp" / "README.md"
LANGGRAPH_README = ROOT / "integrations" / "langgraph_powercontext" / "README.md"
CLIENT_README = ROOT / "client" / "README.md"
DEMO_KEY = "pc_demo_0123456789abcdef0123456789abcdef"
DOCS_MCP_PORT = "8765"
INSTALL_SECONDS = 600  # pip into an empty venv on a loaded 2-core machine
RUN_SECONDS = 180
TOOLS = "['prepare_context', 'search_memories', 'remember', 'read_cited', 'resolve_citation', 'list_scopes']"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def section(path: Path, heading: str) -> str:
    """The text under a ``## `` or ``### `` heading, up to the next heading of the same level or above."""
    text = path.read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    body = text.split(f"\n{heading}\n", 1)[1]
    ends = [m.start() for m in re.finditer(rf"^#{{2,{len(level)}}} ", body, re.M)]
    return body[: ends[0]] if ends else body


def blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of one language, in order."""
    return [code for lang, code in FENCE.findall(text) if lang == language]


def commands(block: str) -> list[str]:
    """A shell block's command lines, each as its words (comments and spacing dropped)."""
    return [shlex.split(line, comments=True) for line in block.splitlines() if shlex.split(line, comments=True)]


def in_venv(line: str, env_dir: Path) -> str:
    """A documented line with the venv it names (``.venv/``, relative to the repository root) made ``env_dir``."""
    return re.sub(r"(?<![\w./-])\.venv/", f"{env_dir}/", line)


def clean_environment(**values: str) -> dict[str, str]:
    """The test's environment without anything of the project's: no venv on PATH (a bare ``powercontext-mcp``
    cannot be found), no Django, database or PowerContext settings; pip's own settings are kept."""
    dropped = ("DJANGO_", "POWERCONTEXT_", "PYTHON", "VIRTUAL_ENV", "DATABASE_URL", "SECRET_KEY")
    env = {name: value for name, value in os.environ.items() if not name.startswith(dropped)}
    path = [
        part
        for part in env.get("PATH", "").split(os.pathsep)
        if part and not (Path(part).parent / "pyvenv.cfg").exists()
    ]
    return env | {"PATH": os.pathsep.join(path), "PYTHONUNBUFFERED": "1"} | values


def install(tmp: Path, line: str) -> Path:
    """A fresh venv in ``tmp`` with ``line`` (a documented ``.venv/bin/python -m pip install …``) run into it."""
    assert line.startswith(".venv/bin/python -m pip install "), line
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", in_venv(line, env_dir)],
        cwd=ROOT,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=INSTALL_SECONDS,
    )
    assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return env_dir


def run_python(env_dir: Path, block: str, base: str, env: dict[str, str], **replaced: str) -> str:
    """A documented Python block run as a script by the venv's Python against ``base``; returns its stdout."""
    script = block.replace(DOCS_ADDRESS, base)
    for old, new in replaced.items():
        script = script.replace(old, new)
    done = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", script],
        cwd=env_dir.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    assert done.returncode == 0, f"{block[:300]}\nstdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
    assert DEMO_KEY not in done.stderr
    return done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def listening(line: str, env: dict[str, str], log: Path, port: int) -> Iterator[None]:
    """A documented long-running command (``line``), run as written in bash, until it listens on ``port``."""
    with log.open("w") as output:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {line}"], cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + RUN_SECONDS
            while True:
                assert process.poll() is None, f"{line} exited: {log.read_text()[-3000:]}"
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, f"{line} not listening within {RUN_SECONDS} s"
                    time.sleep(0.2)
            yield
        finally:
            waits.stop(process)


def test_an_mcp_host_installed_as_hosts_md_says_prepares_searches_and_cites_over_stdio_and_http(tmp_path):
    (setup,) = blocks(section(HOSTS, "## Install and configure"), "sh")
    (install_line, *exports, stdio_line, http_line) = [line.split("#")[0].strip() for line in setup.splitlines()]
    assert [shlex.split(line) for line in (install_line, stdio_line, http_line)] == commands(
        "\n".join(blocks(MCP_README.read_text(encoding="utf-8"), "sh"))
    ), "integrations/powercontext_mcp/README.md gives the install and launch lines of docs/hosts.md"
    (readme_mcp,) = blocks(section(ROOT / "README.md", "### Claude Code, Codex CLI, Cursor and other MCP hosts"), "sh")
    readme_install, readme_help = readme_mcp.strip().splitlines()
    assert readme_install == install_line, "README.md installs an MCP host as docs/hosts.md does"
    assert stdio_line == ".venv/bin/powercontext-mcp" and "--transport streamable-http" in http_line
    assert all(line.startswith("export POWERCONTEXT_") for line in exports)

    env_dir = install(tmp_path, install_line)
    mcp_port = free_port()
    with demo_server(tmp_path) as (base, _):
        variables = dict(line.removeprefix("export ").split("=", 1) for line in exports)
        env = clean_environment(**(variables | {"POWERCONTEXT_URL": base}))
        help_run = subprocess.run(
            ["bash", "-c", in_venv(readme_help, env_dir)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert help_run.returncode == 0 and "streamable-http" in help_run.stdout, help_run.stderr

        (stdio_block,) = blocks(section(HOSTS, "## Generic MCP client (Python SDK)"), "python")
        tools, status, stdio_body = run_python(env_dir, stdio_block, base, env).split("\n", 2)

        (http_block,) = blocks(section(HOSTS, "## Generic MCP client over streamable HTTP"), "python")
        http_command = in_venv(http_line.replace(DOCS_MCP_PORT, str(mcp_port)), env_dir)
        with listening(http_command, env, tmp_path / "mcp-http.log", mcp_port):
            over_http = run_python(env_dir, http_block, base, env, **{f":{DOCS_MCP_PORT}/": f":{mcp_port}/"})

        mcp_search = blocks(section(HOSTS, "### Through MCP: the `search_memories` tool"), "python")[0]
        searched = run_python(env_dir, mcp_search, base, env)

    assert tools == TOOLS
    assert re.fullmatch(r"ready \d+", status)
    scope, artifact, entry, http_body = over_http.split("\n", 3)
    assert scope == 'Scope: "project:demo"' and artifact.startswith('Artifact: family="memory", id="memory", revision=')
    assert entry.startswith('Entry: id="')
    assert http_body == stdio_body and stdio_body.strip()  # the same first citation, read back exactly
    text, found_nothing = searched.rstrip("\n").rsplit("\n", 1)
    assert text.startswith("# PowerContext memory search\n") and "\n    Recall rank: 1\n" in text
    assert text.endswith("\nEND_POWERCONTEXT_PREPARED_TEXT_V1\nTrue")  # the pasted hit resolved to its body
    assert found_nothing.startswith("PowerContext found nothing for this query (")
    assert DEMO_KEY not in (tmp_path / "mcp-http.log").read_text()


def test_a_langgraph_graph_installed_as_hosts_md_says_stores_reads_and_searches_through_the_store(tmp_path):
    langgraph = section(HOSTS, "## LangGraph (a `BaseStore`)")
    (setup,) = blocks(langgraph, "sh")
    assert blocks(LANGGRAPH_README.read_text(encoding="utf-8"), "sh") == [setup], (
        "integrations/langgraph_powercontext/README.md gives the install line of docs/hosts.md"
    )
    (install_line,) = setup.strip().splitlines()

    env_dir = install(tmp_path, install_line)
    (graph_block,) = blocks(langgraph, "python")
    (search_block,) = blocks(section(HOSTS, "### In a LangGraph store: `store.search(namespace, query=…)`"), "python")
    with demo_server(tmp_path) as (base, _):
        graph = run_python(env_dir, graph_block, base, clean_environment()).splitlines()
        searched = run_python(env_dir, search_block, base, clean_environment()).splitlines()

    assert graph[:2] == ["{'user': 'alice', 'tone': 'terse'}", "{'tone': 'terse'}"]
    assert re.fullmatch(r"project:demo users\.alice 1 preferences \S+", graph[2])
    assert graph[3:] == ['{"tone":"terse"}', "[]"]
    assert searched == [
        "deploys Deploys happen on Tuesdays after the release review. True",
        '{"text":"Deploys happen on Tuesdays after the release review."}',
        "lunch",
        "[]",
    ]


def test_a_host_on_the_client_installed_as_its_readme_says_runs_every_example_of_the_readme(tmp_path):
    (setup,) = blocks(CLIENT_README.read_text(encoding="utf-8"), "sh")
    (install_line,) = setup.strip().splitlines()
    examples = "\n".join(blocks(CLIENT_README.read_text(encoding="utf-8"), "python"))
    (search_block,) = blocks(section(HOSTS, "### With the Python client"), "python")

    env_dir = install(tmp_path, install_line)
    with demo_server(tmp_path) as (base, _):
        searched = run_python(env_dir, search_block, base, clean_environment()).splitlines()  # reads only
        printed = run_python(env_dir, examples, base, clean_environment())  # writes to the demo, in order

    assert searched[0] in ("ready hybrid", "ready lexical")
    assert searched[1].startswith("1 project:demo memory ") and searched[-2:] == ["True", "empty"]
    assert re.search(r"^(ready hybrid|ready lexical)\nmemory 1 project:demo ", printed, re.M)
    assert "409 conflict" in printed
    assert "invalid_request [('assembly.sections[0].family'" in printed
    assert "('recalled_memory', 'rejected', 'char_budget_exceeded')" in printed
    assert "no context this turn" not in printed
