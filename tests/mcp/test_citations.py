"""powercontext-mcp's citation reader agrees with the server's parser (vocabulary/citation_text.py) on what
prepared content prints: every golden entry, legacy items, and identities holding quotes, line breaks and
invisible characters as the renderer escapes them; resolve_citation reads what it finds, or says why not. The
idempotency key of ``remember`` follows the arguments."""

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("mcp", reason="the MCP SDK (`mcp`, pinned in requirements-dev.txt) is not installed")

import anyio  # noqa: E402  (after the skip: anyio comes with mcp)
import httpx  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.shared.uri_template import UriTemplate  # noqa: E402
from powercontext_client import PowerContextClient  # noqa: E402
from powercontext_mcp.citations import CitationTextError, parse_pasted_citation  # noqa: E402
from powercontext_mcp.remember import remember_idempotency_key  # noqa: E402
from powercontext_mcp.rendering import ENTRY_TEMPLATE, citation_lines, citation_uri  # noqa: E402
from powercontext_mcp.server import build_server  # noqa: E402

from assembly.rendering import legacy_entry, markdown_metadata  # noqa: E402
from tests.conftest import GOLDEN, golden_json  # noqa: E402
from vocabulary.citation import Citation  # noqa: E402
from vocabulary.citation_text import parse_citation_text  # noqa: E402
from vocabulary.envelope import LEGACY_BEGIN, LEGACY_END  # noqa: E402

FIELDS = ("scope_id", "family", "artifact_id", "revision", "entry_id", "entry_version")


def fields(citation) -> tuple:
    return tuple(getattr(citation, name) for name in FIELDS)


def markdown_entries(content: str) -> list[str]:
    return re.split(r"\n(?=### )", content)[1:]


@pytest.mark.parametrize("case", sorted(p.name.removesuffix(".content.md") for p in GOLDEN.glob("*.content.md")))
def test_every_golden_markdown_entry_reads_as_the_server_parses_it(case):
    entries = markdown_entries(golden_json(f"{case}.response.json")["content"])
    assert entries
    for entry in entries:
        assert fields(parse_pasted_citation(entry)) == fields(parse_citation_text(entry))


@pytest.mark.parametrize("case", ["legacy-en", "legacy-zh"])
def test_every_golden_legacy_item_reads_as_the_server_parses_it(case):
    content = golden_json(f"{case}.response.json")["content"]
    items = json.loads(content.split("\n")[3])["items"] if '{"items":' in content.split("\n")[3] else None
    items = items or json.loads(re.search(r'\{"items":.*\}', content).group())["items"]
    assert items
    for item in items:
        text = json.dumps(item, ensure_ascii=False)
        assert fields(parse_pasted_citation(text)) == fields(parse_citation_text(text))


identities = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), min_size=1, max_size=30)


@given(scope=identities, artifact=identities, entry=identities, version=identities, revision=st.integers(1, 2**31 - 1))
def test_rendered_identities_read_back_exactly(scope, artifact, entry, version, revision):
    citation = Citation(scope, "memory", artifact, revision, entry, version)
    markdown = markdown_metadata(citation, recall_rank=1, show=frozenset())
    assert fields(parse_pasted_citation(markdown)) == fields(citation)
    legacy = legacy_entry(citation, "body", first=True).render(None)
    assert fields(parse_pasted_citation(legacy.strip().strip(","))) == fields(citation)
    assert fields(parse_pasted_citation(citation_lines(citation))) == fields(citation)
    variables = UriTemplate.parse(ENTRY_TEMPLATE).match(citation_uri(citation))
    assert variables == {
        "scope_id": scope,
        "artifact_id": artifact,
        "revision": str(revision),
        "entry_id": entry,
        "entry_version": version,
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        'Artifact: family="memory", id="memory", revision=3',
        'Scope: "a"\nScope: "b"\nArtifact: family="memory", id="memory", revision=3',
        'Scope: "a"\nArtifact: family="memory", id="memory", revision=0',
        'Scope: a\nArtifact: family="memory", id="memory", revision=3',
        '{"family": "memory", "scope": "a"}',
    ],
)
def test_text_without_exactly_one_citation_is_refused_by_both(text):
    with pytest.raises(CitationTextError):
        parse_pasted_citation(text)
    with pytest.raises(ValueError):
        parse_citation_text(text)


def test_the_idempotency_key_follows_every_argument_and_nothing_else():
    arguments = {"scope_id": "s", "artifact_id": "memory", "entry_id": "e", "body": "b", "update": False}
    key = remember_idempotency_key(arguments | {"expected_head_revision": None})
    assert key == remember_idempotency_key({"expected_head_revision": None} | arguments)  # order does not matter
    assert key.startswith("mcp-remember-") and len(key) <= 200
    for name, other in [("body", "b2"), ("entry_id", "e2"), ("update", True), ("scope_id", "t")]:
        assert remember_idempotency_key(arguments | {name: other, "expected_head_revision": None}) != key
    assert remember_idempotency_key(arguments | {"expected_head_revision": 3}) != key


def resolved(text: str) -> tuple[dict, list[str]]:
    """resolve_citation's structured answer to ``text``, and the query of every read it sent (each answered 404)."""
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url.params))
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "not found", "fields": []}})

    async def run():
        transport = httpx.MockTransport(answer)
        with PowerContextClient("http://testserver", "pc_" + "k" * 40, transport=transport) as direct:
            async with Client(build_server(direct)) as client:
                result = await client.call_tool("resolve_citation", {"text": text})
        return result.structured_content

    return anyio.run(run), sent


def test_a_whole_legacy_content_pasted_is_read_at_the_citation_it_holds():
    item = {"family": "experience", "scope": "project:demo", "artifact": {"id": "exp-1", "revision": 2}}
    text = f"{LEGACY_BEGIN}\n{json.dumps(item)}\n{LEGACY_END}\n"
    answer, sent = resolved(text)
    assert answer["error"]["code"] == "not_found"  # PowerContext's answer to the exact read
    assert sent == ["scope_id=project%3Ademo&family=experience&artifact_id=exp-1&revision=2"]


def test_a_legacy_entry_whose_id_is_not_a_string_is_a_coded_refusal_and_no_request():
    item = {
        "family": "memory",
        "scope": "s",
        "artifact": {"id": "memory", "revision": 1},
        "entry": {"id": 5, "version": "v"},
    }
    answer, sent = resolved(json.dumps(item))
    assert answer["error"] == {
        "code": "invalid_request",
        "message": "a legacy item's entry id and version are strings",
        "fields": [{"path": "text", "message": "a legacy item's entry id and version are strings"}],
    }
    assert sent == []
