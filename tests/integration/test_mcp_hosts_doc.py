"""docs/hosts.md's generic MCP client runs as written: the SDK launches ``powercontext-mcp`` over stdio against
gunicorn serving the demo, prepares context and reads the first cited entry back exactly."""

import re
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

from powercontext_client import PowerContextClient  # noqa: E402

from tests import waits  # noqa: E402
from tests.conftest import PROJECT_ROOT  # noqa: E402
from tests.integration.conftest import environment  # noqa: E402
from tests.integration.test_mcp_server import served  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)

DEMO_KEY = "pc_demo_0123456789abcdef0123456789abcdef"
HOSTS = PROJECT_ROOT / "docs" / "hosts.md"


def generic_client_block() -> str:
    section = HOSTS.read_text(encoding="utf-8").split("## Generic MCP client", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the generic client section holds one Python block"
    return blocks[0]


def test_the_generic_client_in_hosts_md_prepares_and_reads_the_cited_entry_exactly(tmp_path):
    with served(tmp_path, PROJECT_ROOT / "demo" / "demo.json") as base:
        env = environment(
            tmp_path, POWERCONTEXT_URL=base, POWERCONTEXT_API_KEY=DEMO_KEY, POWERCONTEXT_SCOPE="project:demo"
        )
        done = waits.run(
            [sys.executable, "-c", generic_client_block()],
            env=env,
            capture_output=True,
            text=True,
            timeout=waits.SUBPROCESS_SECONDS,
        )
        assert done.returncode == 0, done.stderr
        with PowerContextClient(base, DEMO_KEY) as client:
            prepared = client.prepare_context("project:demo", "How do we release the API?", assembly={})
    tools, status, body = done.stdout.split("\n", 2)
    assert (
        tools == "['prepare_context', 'search_memories', 'remember', 'read_cited', 'resolve_citation', 'list_scopes']"
    )
    assert status == f"ready {prepared.content_bytes}"
    first_body = prepared.content.split("\n>     ", 1)[1].split("\n", 1)[0]
    assert body == first_body + "\n"
    assert DEMO_KEY not in done.stdout + done.stderr
