"""docs/hosts.md's "Search memories" examples run as written against gunicorn serving the demo: the Python client,
the MCP tool (the SDK launching ``powercontext-mcp`` over stdio) and the LangGraph store each search the demo's
memories. The hits depend on how the server ranks (hybrid by default; lexical when a query is not embedded in
time), so only what is the same either way is checked exactly."""

import os
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")
pytest.importorskip("langgraph", reason="LangGraph (pinned in requirements-dev.txt) is not installed")

from tests import waits  # noqa: E402
from tests.conftest import PROJECT_ROOT  # noqa: E402
from tests.integration.conftest import environment, served  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)

HOSTS = PROJECT_ROOT / "docs" / "hosts.md"
DEMO_KEY = "pc_demo_0123456789abcdef0123456789abcdef"
DOCS_ADDRESS = "http://127.0.0.1:8000"
NOTICE = "PowerContext prepared untrusted historical context.\n"


def search_blocks() -> dict[str, str]:
    """The Python block of each ``###`` part of the section, by heading (headings inside code blocks are text)."""
    blocks: dict[str, str] = {}
    heading, code, fence, inside = None, [], None, False
    for line in HOSTS.read_text(encoding="utf-8").splitlines():
        if fence is not None:  # inside a code block
            if line.startswith("```"):
                if fence == "python" and inside:
                    blocks[heading] = "\n".join(code) + "\n"
                fence, code = None, []
            else:
                code.append(line)
        elif line.startswith("```"):
            fence = line[3:]
        elif line.startswith("## "):
            inside = line == "## Search memories"
        elif line.startswith("### ") and inside:
            heading = line[4:]
    assert list(blocks) == [
        "With the Python client",
        "Through MCP: the `search_memories` tool",
        "In a LangGraph store: `store.search(namespace, query=…)`",
    ]
    return blocks


def run(block: str, base: str, tmp_path) -> str:
    sources = [PROJECT_ROOT / "client" / "src"] + [
        PROJECT_ROOT / "integrations" / name / "src" for name in ("powercontext_mcp", "langgraph_powercontext")
    ]
    env = environment(
        tmp_path,
        PYTHONPATH=os.pathsep.join(map(str, sources)),
        POWERCONTEXT_URL=base,
        POWERCONTEXT_API_KEY=DEMO_KEY,
        POWERCONTEXT_SCOPE="project:demo",
    )
    done = waits.run(
        [sys.executable, "-c", block.replace(DOCS_ADDRESS, base)],
        env=env,
        capture_output=True,
        text=True,
        timeout=waits.SUBPROCESS_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    assert DEMO_KEY not in done.stdout + done.stderr
    return done.stdout


def test_each_hosts_search_example_runs_as_written_against_the_demo(tmp_path):
    client_block, mcp_block, langgraph_block = search_blocks().values()
    with served(tmp_path, PROJECT_ROOT / "demo" / "demo.json") as base:
        by_client = run(client_block, base, tmp_path).splitlines()
        by_mcp = run(mcp_block, base, tmp_path)
        by_store = run(langgraph_block, base, tmp_path).splitlines()

    assert by_client[0] in ("ready hybrid", "ready lexical")
    hits = by_client[1:-2]
    assert hits[0].startswith("1 project:demo memory ") and hits[1].startswith("2 project:demo memory ")
    assert {line.split()[1] for line in hits} >= {"project:demo", "team:platform"}
    assert by_client[-2:] == ["True", "empty"]

    text, found_nothing = by_mcp.rstrip("\n").rsplit("\n", 1)
    assert text.startswith(f"# PowerContext memory search\n\n{NOTICE}")
    assert "\nBEGIN_POWERCONTEXT_PREPARED_TEXT_V1\n" in text
    assert '    Scope: "project:demo"\n' in text and "\n    Recall rank: 1\n" in text
    assert text.endswith("\nEND_POWERCONTEXT_PREPARED_TEXT_V1\nTrue")
    assert found_nothing.startswith("PowerContext found nothing for this query (")

    assert by_store == [
        "deploys Deploys happen on Tuesdays after the release review. True",
        '{"text":"Deploys happen on Tuesdays after the release review."}',
        "lunch",
        "[]",
    ]
