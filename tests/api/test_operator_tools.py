"""Operator tools in the admin: the citation resolver and the prepare inspector.

Data goes in through ``artifacts.services``. The resolver must land on the exact row a citation names
(escaped identities included) and never on the head; the inspector must show the content the API
returns for the same request, with one decision per candidate, and write nothing.
"""

import html
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from artifacts import services
from artifacts.models import ApiKey, ArtifactRevision, MemoryEntryVersion, RecallDocument, Scope
from artifacts.services import EntryVersionWrite
from vocabulary.citation import Citation
from vocabulary.citation_text import parse_citation_text
from vocabulary.escaping import json_literal

pytestmark = pytest.mark.django_db

RESOLVE_URL = "/admin/powercontext/resolve/"
INSPECT_URL = "/admin/powercontext/inspect/"
PREPARE_URL = "/v1/context/prepare"
AUTHOR = "tests"

# A scope id with a quote, a newline, U+2028 and U+202E; identities with more of the same.
WEIRD_SCOPE = 'proj "q"\nline\u2028sep\u202eevil'
WEIRD_ARTIFACT = 'mem"o\u200b'
WEIRD_ENTRY = "entry\nwith\u2029breaks"
WEIRD_VERSION = 'v\u202e1 "quoted"'
WEIRD_EXPERIENCE = "exp\u2066isolate\u2069"


# --- fixtures --------------------------------------------------------------------------------------


def _memory(scope, artifact_id="memory", writes=(), removals=()):
    return services.memory_revision_create(
        scope=scope,
        artifact_id=artifact_id,
        writes=[EntryVersionWrite(entry_id=e, version_id=v, body=b) for e, v, b in writes],
        removals=list(removals),
        author=AUTHOR,
    )


@pytest.fixture
def demo():
    """project:demo (→ team:platform) shaped like the golden fixture, plus more to choose from."""
    platform = services.scope_create(scope_id="team:platform", title="Platform")
    scope = services.scope_create(scope_id="project:demo", title="Demo")
    services.scope_references_set(scope=scope, targets=[platform])
    _memory(scope, writes=[("entry-1", "entry-1-v1", "Run the contract tests after an OpenAPI change.")])
    _memory(scope, writes=[("entry-2", "entry-2-v1", "Contract tests live in tests/contract; OpenAPI is generated.")])
    _memory(
        scope,
        writes=[("entry-1", "entry-1-v2", "After changing OpenAPI, regenerate the client and run contract tests.")],
        removals=["entry-2"],
    )
    _memory(scope, writes=[("entry-3", "entry-3-v1", "OpenAPI <b>contract</b> & client: keep them in sync.")])
    services.experience_revision_create(
        scope=scope,
        artifact_id="experience-1",
        body="Situation: The HTTP API contract changed.\nLesson: Regenerate after a contract change, then validate.",
        author=AUTHOR,
    )
    services.topic_memory_revision_create(
        scope=scope,
        artifact_id="topic-contract",
        title="API contract",
        summary="How the OpenAPI contract is kept in sync with clients.",
        body="Regenerate clients after every contract change.",
        author=AUTHOR,
    )
    _memory(platform, writes=[("p-1", "p-1-v1", "Platform rule: every contract change needs a changelog entry.")])
    services.experience_revision_create(
        scope=platform,
        artifact_id="exp-platform",
        body="A contract change without tests broke a client.",
        author=AUTHOR,
    )
    _, key = services.api_key_create(name="inspector-comparison", read_scopes=[scope, platform])
    return {"scope": scope, "platform": platform, "key": key}


@pytest.fixture
def weird():
    """A scope and identities full of quotes, line breaks, separators and bidi controls."""
    scope = services.scope_create(scope_id=WEIRD_SCOPE, title="Weird")
    _memory(scope, artifact_id=WEIRD_ARTIFACT, writes=[(WEIRD_ENTRY, WEIRD_VERSION, "weird memory about rockets")])
    services.experience_revision_create(
        scope=scope, artifact_id=WEIRD_EXPERIENCE, body="weird experience about rockets", author=AUTHOR
    )
    _, key = services.api_key_create(name="weird-reader", read_scopes=[scope])
    return {"scope": scope, "key": key}


# --- helpers ---------------------------------------------------------------------------------------


def _revision(scope_id, artifact_id, number) -> ArtifactRevision:
    return ArtifactRevision.objects.get(
        artifact__scope__scope_id=scope_id, artifact__artifact_id=artifact_id, revision=number
    )


def _version(scope_id, version_id) -> MemoryEntryVersion:
    return MemoryEntryVersion.objects.get(artifact__scope__scope_id=scope_id, version_id=version_id)


def _revision_page(revision) -> str:
    return reverse("admin:artifacts_artifactrevision_change", args=[revision.pk])


def _version_page(version, cited: int | None = None) -> str:
    """The entry version's admin page; a citation's link to it names the cited revision."""
    page = reverse("admin:artifacts_memoryentryversion_change", args=[version.pk])
    return page if cited is None else f"{page}?cited_revision={cited}"


def _resolve_text(client, text, method="post"):
    return getattr(client, method)(RESOLVE_URL, {"text-citation": text})


def _resolve_fields(client, **fields):
    return client.post(RESOLVE_URL, {f"fields-{name}": value for name, value in fields.items()})


def _not_found_message(response) -> str:
    assert response.status_code == 200, response.status_code
    match = re.search(r'<p class="errornote" id="resolve-not-found">(.*?)</p>', response.content.decode(), re.S)
    assert match, "the page names what did not match"
    return html.unescape(match.group(1))


def _api_prepare(client, key, body):
    response = client.post(
        PREPARE_URL, data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    return response


def _inspect(client, scope, query, *, max_bytes="8000", assembly=None, legacy=False, literals=False):
    scope_id = json_literal(scope.scope_id) if literals else scope.scope_id
    params = {"scope": scope_id, "query": query, "max_bytes": max_bytes}
    if literals:
        params["literals"] = "on"
    if legacy:
        params["legacy"] = "on"
    if assembly is not None:
        params["assembly"] = assembly if isinstance(assembly, str) else json.dumps(assembly)
    return client.get(INSPECT_URL, params)


def _inspected_content(response) -> str | None:
    page = response.content.decode()
    match = re.search(r'<pre class="powercontext-content" id="prepared-content">(.*?)</pre>', page, re.S)
    return None if match is None else html.unescape(match.group(1))


def _inspected_bytes(response) -> int:
    return int(re.search(r'<span id="result-bytes">(\d+)</span>', response.content.decode()).group(1))


def _inspected_errors(response) -> list[dict]:
    page = response.content.decode()
    pairs = re.findall(r'<code class="error-path">(.*?)</code>: <span class="error-message">(.*?)</span>', page, re.S)
    return [{"path": html.unescape(path), "message": html.unescape(message)} for path, message in pairs]


def _content_citations(content: str) -> list[Citation]:
    """Every citation of a content string, in order, through the operator's own parser."""
    if "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1" in content:
        line = content.split("\n")[4]
        return [parse_citation_text(json.dumps(item)) for item in json.loads(line)["items"]]
    chunks = re.split(r"\n### ", content)[1:]
    return [parse_citation_text(chunk) for chunk in chunks]


# --- permissions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [RESOLVE_URL, INSPECT_URL])
def test_a_normal_logged_in_user_gets_the_admin_refusal(client, url):
    user = get_user_model().objects.create_user("visitor", "v@example.com", "pw-visitor-1")
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


@pytest.mark.parametrize("url", [RESOLVE_URL, INSPECT_URL])
def test_anonymous_visitors_are_sent_to_the_admin_login(client, url):
    response = client.get(url, {"text-citation": "x", "scope": "1"})
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


@pytest.mark.parametrize("url", [RESOLVE_URL, INSPECT_URL])
def test_staff_without_the_tools_permissions_are_refused(client, url, demo):
    # Each tool's permissions, role by role: tests/api/test_admin_roles.py.
    user = get_user_model().objects.create_user("staff", "s@example.com", "pw-staff-1", is_staff=True)
    client.force_login(user)
    assert client.get(url).status_code == 403


def test_the_admin_index_links_both_tools(staff_client):
    page = staff_client.get(reverse("admin:index")).content.decode()
    assert f'href="{RESOLVE_URL}"' in page and f'href="{INSPECT_URL}"' in page


# --- resolver: every citation form -----------------------------------------------------------------


def test_markdown_memory_lines_land_on_the_exact_entry_version(staff_client, demo):
    text = (
        '    Scope: "project:demo"\n'
        '    Artifact: family="memory", id="memory", revision=3\n'
        '    Entry: id="entry-1", version="entry-1-v2"\n'
    )
    response = _resolve_text(staff_client, text)
    assert response.status_code == 302
    assert response["Location"] == _version_page(_version("project:demo", "entry-1-v2"), 3)


def test_markdown_experience_lines_land_on_the_exact_revision(staff_client, demo):
    text = '    Scope: "project:demo"\r\n    Artifact: family="experience", id="experience-1", revision=1\r\n'
    response = _resolve_text(staff_client, text)
    assert response["Location"] == _revision_page(_revision("project:demo", "experience-1", 1))


def test_an_older_live_revision_of_an_entry_version_resolves(staff_client, demo):
    # entry-1-v2 was born in revision 3 and is still live in revision 4: both cite it.
    text = '    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision=4\n'
    text += '    Entry: id="entry-1", version="entry-1-v2"\n'
    landing = _resolve_text(staff_client, text)["Location"]
    assert landing == _version_page(_version("project:demo", "entry-1-v2"), 4)


def test_a_legacy_memory_item_lands_on_the_entry_version(staff_client, demo):
    item = (
        '{"family":"memory","scope":"project:demo","artifact":{"id":"memory","revision":2},'
        '"entry":{"id":"entry-2","version":"entry-2-v1"},"body":"Contract tests…","truncated":false},'
    )
    response = _resolve_text(staff_client, item)
    assert response["Location"] == _version_page(_version("project:demo", "entry-2-v1"), 2)


def test_a_legacy_experience_item_lands_on_the_revision(staff_client, demo):
    item = '{"family":"experience","scope":"team:platform","artifact":{"id":"exp-platform","revision":1},"body":"x"}'
    response = _resolve_text(staff_client, item)
    assert response["Location"] == _revision_page(_revision("team:platform", "exp-platform", 1))


def test_fields_land_on_the_entry_version_or_the_revision(staff_client, demo):
    response = _resolve_fields(
        staff_client,
        scope="project:demo",
        family="memory",
        artifact_id="memory",
        revision="1",
        entry_id="entry-1",
        entry_version="entry-1-v1",
    )
    assert response["Location"] == _version_page(_version("project:demo", "entry-1-v1"), 1)
    response = _resolve_fields(staff_client, scope="project:demo", family="memory", artifact_id="memory", revision="2")
    assert response["Location"] == _revision_page(_revision("project:demo", "memory", 2))
    response = _resolve_fields(
        staff_client, scope="project:demo", family="topic_memory", artifact_id="topic-contract", revision="1"
    )
    assert response["Location"] == _revision_page(_revision("project:demo", "topic-contract", 1))


def test_a_resolver_link_with_get_parameters_resolves_too(staff_client, demo):
    text = '    Scope: "project:demo"\n    Artifact: family="experience", id="experience-1", revision=1'
    response = _resolve_text(staff_client, text, method="get")
    assert response["Location"] == _revision_page(_revision("project:demo", "experience-1", 1))


def test_the_resolver_form_renders_empty(staff_client):
    page = staff_client.get(RESOLVE_URL)
    assert page.status_code == 200
    assert 'name="text-citation"' in page.content.decode()
    assert 'name="fields-scope"' in page.content.decode()


# --- resolver: escaped identities ------------------------------------------------------------------


@pytest.mark.parametrize("assembly", [{"sections": [{"family": "memory", "limit": 1}]}, None])
def test_memory_citations_with_escaped_identities_from_real_content_resolve(staff_client, weird, assembly):
    body = {"scope_id": WEIRD_SCOPE, "query": "rockets"}
    if assembly is not None:
        body["assembly"] = assembly
    content = _api_prepare(staff_client, weird["key"], body).json()["content"]
    assert "\u202e" not in content and "\u2028" not in content  # escaped by the renderer
    if assembly is None:
        content = content.replace(',{"family":"experience"', '\n{"family":"experience"').split("\n")[4]
        content = content.removeprefix('{"items":[')
    # Paste the whole (one-memory-entry) content or the legacy item as it appears.
    response = _resolve_text(staff_client, content)
    assert response.status_code == 302, _not_found_message(response)
    assert response["Location"] == _version_page(_version(WEIRD_SCOPE, WEIRD_VERSION), 1)


def test_an_experience_with_escaped_identities_resolves_from_its_metadata_lines(staff_client, weird):
    body = {
        "scope_id": WEIRD_SCOPE,
        "query": "rockets",
        "assembly": {"sections": [{"family": "experience", "limit": 1}]},
    }
    content = _api_prepare(staff_client, weird["key"], body).json()["content"]
    lines = [line for line in content.split("\n") if line.startswith(("    Scope:", "    Artifact:"))]
    assert lines[0] == '    Scope: "proj \\"q\\"\\nline\\u2028sep\\u202eevil"'
    response = _resolve_text(staff_client, "\n".join(lines))
    assert response["Location"] == _revision_page(_revision(WEIRD_SCOPE, WEIRD_EXPERIENCE, 1))


def test_fields_as_json_literals_resolve_escaped_identities(staff_client, weird):
    response = _resolve_fields(
        staff_client,
        scope=json.dumps(WEIRD_SCOPE),
        family="memory",
        artifact_id=json.dumps(WEIRD_ARTIFACT),
        revision="1",
        entry_id=json.dumps(WEIRD_ENTRY),
        entry_version=json.dumps(WEIRD_VERSION),
        literals="on",
    )
    assert response["Location"] == _version_page(_version(WEIRD_SCOPE, WEIRD_VERSION), 1)


def test_a_similar_but_different_identity_does_not_resolve(staff_client, weird):
    # Same text without the bidi override: a different scope, so nothing matches.
    text = '    Scope: "proj \\"q\\"\\nline\\u2028sepevil"\n'
    text += '    Artifact: family="experience", id="exp\\u2066isolate\\u2069", revision=1'
    message = _not_found_message(_resolve_text(staff_client, text))
    assert message == 'Not found: no scope "proj \\"q\\"\\nline\\u2028sepevil".'


def test_not_found_messages_show_invisible_characters_escaped(staff_client, weird):
    text = '    Scope: "proj \\"q\\"\\nline\\u2028sep\\u202eevil"\n'
    text += '    Artifact: family="experience", id="exp\\u2066isolate\\u2069", revision=2'
    response = _resolve_text(staff_client, text)
    message = _not_found_message(response)
    assert message == (
        'Not found: no revision 2 of experience:"exp\\u2066isolate\\u2069" in scope '
        '"proj \\"q\\"\\nline\\u2028sep\\u202eevil" (its revisions are 1–1).'
    )
    assert "\u202e" not in response.content.decode() and "\u2066" not in response.content.decode()


# --- resolver: not found and malformed -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision=7\n'
            '    Entry: id="entry-1", version="entry-1-v2"',
            'no revision 7 of memory:memory in scope "project:demo" (its revisions are 1–4)',
        ),
        (
            '    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision=3\n'
            '    Entry: id="entry-2", version="entry-2-v1"',
            'entry version entry-2-v1 was not live at revision 3 of memory:memory in scope "project:demo" '
            "(it was live only in revision 2)",
        ),
        (
            '    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision=2\n'
            '    Entry: id="entry-1", version="entry-1-v2"',
            'entry version entry-1-v2 was not live at revision 2 of memory:memory in scope "project:demo" '
            "(it is live from revision 3 on)",
        ),
        (
            '    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision=4\n'
            '    Entry: id="entry-1", version="entry-1-v1"',
            'entry version entry-1-v1 was not live at revision 4 of memory:memory in scope "project:demo" '
            "(it was live in revisions 1–2)",
        ),
        (
            '    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision=3\n'
            '    Entry: id="entry-2", version="entry-1-v2"',
            'entry version entry-1-v2 of memory:memory in scope "project:demo" belongs to entry entry-1, '
            "not to entry entry-2",
        ),
        (
            '    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision=3\n'
            '    Entry: id="entry-9", version="entry-9-v1"',
            'no entry version entry-9-v1 in memory:memory in scope "project:demo"',
        ),
        (
            '    Scope: "project:nowhere"\n    Artifact: family="memory", id="memory", revision=3',
            'no scope "project:nowhere"',
        ),
        (
            '    Scope: "project:demo"\n    Artifact: family="experience", id="memory", revision=1',
            'no artifact experience:memory in scope "project:demo"',
        ),
        (
            '{"family":"experience","scope":"team:platform","artifact":{"id":"exp-platform","revision":2}}',
            'no revision 2 of experience:exp-platform in scope "team:platform" (its revisions are 1–1)',
        ),
    ],
)
def test_unknown_citations_name_what_did_not_match_and_never_fall_back(staff_client, demo, text, message):
    response = _resolve_text(staff_client, text)
    assert response.status_code == 200  # no redirect: never the head instead
    assert _not_found_message(response) == f"Not found: {message}."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello", "no citation found"),
        ('    Scope: "project:demo"', "the Artifact line is missing"),
        ('    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision=0', "between 1 and"),
        ('{"family":"memory","scope":"project:demo"', "not a valid JSON item"),
    ],
)
def test_malformed_pasted_citations_are_reported(staff_client, demo, text, message):
    response = _resolve_text(staff_client, text)
    assert response.status_code == 200
    errors = html.unescape(re.search(r'id="resolve-text-errors">(.*?)</div>', response.content.decode(), re.S)[1])
    assert "Malformed citation:" in errors and message in errors


def test_malformed_fields_are_reported(staff_client, demo):
    response = _resolve_fields(
        staff_client, scope="project:demo", family="experience", artifact_id="x", revision="1", entry_id="e"
    )
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert "Malformed citation: entry id and entry version must be given together" in page
    response = _resolve_fields(staff_client, scope="project:demo", family="memory", artifact_id="x", revision="zero")
    assert response.status_code == 200 and "Enter a whole number." in response.content.decode()


# --- exact revision pages --------------------------------------------------------------------------


def test_revision_pages_show_bodies_exactly_and_invisible_characters_visibly(staff_client, demo):
    revision = services.experience_revision_create(
        scope=demo["scope"],
        artifact_id="exp-invisible",
        body="<script>alert(1)</script>\nright\u202eleft zero\u200bwidth\ttab",
        author=AUTHOR,
    )
    page = staff_client.get(_revision_page(revision)).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # Exactly as stored, and escaped visibly, with the characters named.
    assert "right\u202eleft zero\u200bwidth\ttab" in page
    assert "right\\u202Eleft zero\\u200Bwidth\\u0009tab" in page
    assert "U+202E RIGHT-TO-LEFT OVERRIDE ×1" in page and "U+200B ZERO WIDTH SPACE ×1" in page
    # The citation as prepared content prints it.
    assert html.escape('Artifact: family="experience", id="exp-invisible", revision=1') in page


def test_a_body_without_invisible_characters_is_shown_once(staff_client, demo):
    page = staff_client.get(_revision_page(_revision("project:demo", "experience-1", 1))).content.decode()
    assert page.count("Situation: The HTTP API contract changed.") == 1
    assert "powercontext-body-escaped" not in page


def test_entry_version_pages_show_the_citation_lines_escaped(staff_client, weird):
    page = staff_client.get(_version_page(_version(WEIRD_SCOPE, WEIRD_VERSION))).content.decode()
    assert html.escape('    Scope: "proj \\"q\\"\\nline\\u2028sep\\u202eevil"') in page
    assert html.escape('Entry: id="entry\\nwith\\u2029breaks", version="v\\u202e1 \\"quoted\\""') in page


# --- inspector: the same content as the API --------------------------------------------------------

INSPECTED_REQUESTS = [
    pytest.param(
        {
            "sections": [{"family": "experience", "limit": 2}, {"family": "memory", "limit": 5}],
            "show": ["confidence", "recall_rank"],
        },
        8000,
        id="guide",
    ),
    pytest.param({}, 8000, id="defaults"),
    pytest.param(
        {"sections": [{"family": "memory", "limit": 1}, {"family": "topic_memory", "limit": 2}]}, 8000, id="limits"
    ),
    pytest.param({"sections": [{"family": "memory", "limit": 16}], "show": ["recall_rank"]}, 700, id="tight-budget"),
    pytest.param(None, 8000, id="legacy"),
    pytest.param(None, 600, id="legacy-tight"),
]


@pytest.mark.parametrize(("assembly", "max_bytes"), INSPECTED_REQUESTS)
def test_inspector_content_equals_the_api_content(staff_client, demo, assembly, max_bytes):
    query = "OpenAPI contract change"
    body = {"scope_id": "project:demo", "query": query, "max_bytes": max_bytes}
    if assembly is not None:
        body["assembly"] = assembly
    api = _api_prepare(staff_client, demo["key"], body).json()

    response = _inspect(
        staff_client, demo["scope"], query, max_bytes=str(max_bytes), assembly=assembly, legacy=assembly is None
    )
    assert response.status_code == 200
    assert _inspected_content(response) == api["content"]
    assert _inspected_bytes(response) == api["content_bytes"]
    assert response.context["result"].content == api["content"]


@pytest.mark.parametrize(("assembly", "max_bytes"), INSPECTED_REQUESTS)
def test_inspector_decisions_match_the_included_and_skipped_entries(staff_client, demo, assembly, max_bytes):
    query = "OpenAPI contract change"
    body = {"scope_id": "project:demo", "query": query, "max_bytes": max_bytes}
    if assembly is not None:
        body["assembly"] = assembly
    content = _api_prepare(staff_client, demo["key"], body).json()["content"]
    in_content = _content_citations(content)

    response = _inspect(
        staff_client, demo["scope"], query, max_bytes=str(max_bytes), assembly=assembly, legacy=assembly is None
    )
    rows = response.context["rows"]
    included = [row.decision.citation for row in rows if row.included]
    skipped = [row for row in rows if not row.included]
    if assembly is None:  # legacy content interleaves families; decisions are listed family by family
        assert sorted(included, key=repr) == sorted(in_content, key=repr)
    else:
        assert included == in_content
    for row in skipped:
        assert row.decision.outcome == "skipped" and row.decision.reason
        if row.decision.reason != "duplicate":
            assert row.decision.citation not in in_content
    # Every candidate is linked to its exact page; the page of an entry version is that version.
    page = response.content.decode()
    for row in rows:
        citation = row.decision.citation
        revision = _revision(citation.scope_id, citation.artifact_id, citation.revision)
        assert row.revision_url == _revision_page(revision)
        assert f'href="{row.revision_url}"' in page
        if citation.entry_version is not None:
            version = _version(citation.scope_id, citation.entry_version)
            assert row.entry_version_url == _version_page(version, citation.revision)
            assert f'href="{row.entry_version_url}"' in page
    # Bytes: included entries report what they used; the content is exactly the sum plus the frame.
    assert all(row.decision.bytes for row in rows if row.included)


def test_inspector_shows_skip_reasons_and_recall_ranks(staff_client, demo):
    assembly = {"sections": [{"family": "memory", "limit": 1}, {"family": "experience", "limit": 1}]}
    response = _inspect(staff_client, demo["scope"], "OpenAPI contract change client", assembly=assembly)
    rows = response.context["rows"]
    memory = [row for row in rows if row.decision.citation.family == "memory"]
    assert [row.decision.recall_rank for row in memory] == list(range(1, len(memory) + 1))
    assert memory[0].decision.outcome == "included" and memory[0].placed_as == "Memory 1"
    assert {row.decision.reason for row in memory[1:]} == {"family_limit_reached"}
    page = response.content.decode()
    assert 'data-reason="family_limit_reached"' in page
    assert '<td class="placed">Memory 1</td>' in page


def test_the_inspector_legend_says_why_recall_rank_differs_from_score_order(staff_client, demo):
    response = _inspect(staff_client, demo["scope"], "OpenAPI contract change client", assembly={})
    # two scopes answer: their candidates are interleaved, so ranks follow the scopes' turns, not the scores
    assert {row.decision.citation.scope_id for row in response.context["rows"]} == {"project:demo", "team:platform"}
    page = response.content.decode()
    legend = page[page.index('id="recall-rank-help"') : page.index("</p>", page.index('id="recall-rank-help"'))]
    legend = " ".join(legend.split())
    assert "Recall rank is the order of the family's merged pool, not of the scores" in legend
    assert "round robin across scopes" in legend
    assert "every scope's first, then every scope's second" in legend


def test_inspector_reports_budget_skips_with_the_bytes_needed(staff_client, demo):
    services.experience_revision_create(
        scope=demo["scope"], artifact_id="exp-long", body="OpenAPI contract " + "x" * 3000, author=AUTHOR
    )
    assembly = {"sections": [{"family": "experience", "limit": 8}]}
    response = _inspect(staff_client, demo["scope"], "OpenAPI contract", max_bytes="512", assembly=assembly)
    rows = response.context["rows"]
    budget = [row for row in rows if row.decision.reason in ("budget", "truncation_below_minimum")]
    assert budget, [row.decision for row in rows]
    for row in budget:
        assert row.decision.bytes > 0  # what the complete entry would have needed
        assert row.placed_as is None


@pytest.mark.parametrize("literals", [True, False], ids=["typed-as-a-literal", "typed-exactly"])
def test_escaped_scopes_are_typed_and_prepared_like_the_api(staff_client, weird, literals):
    body = {"scope_id": WEIRD_SCOPE, "query": "rockets", "assembly": {}}
    api = _api_prepare(staff_client, weird["key"], body).json()
    response = _inspect(staff_client, weird["scope"], "rockets", assembly={}, literals=literals)
    assert _inspected_content(response) == api["content"]
    page = response.content.decode()
    assert "\u202e" not in page and "\u2028" not in page  # every identity shown escaped
    assert html.escape('"proj \\"q\\"\\nline\\u2028sep\\u202eevil" — Weird') in page
    rows = response.context["rows"]
    assert {row.decision.citation for row in rows} == {
        Citation(WEIRD_SCOPE, "memory", WEIRD_ARTIFACT, 1, WEIRD_ENTRY, WEIRD_VERSION),
        Citation(WEIRD_SCOPE, "experience", WEIRD_EXPERIENCE, 1),
    }


@pytest.mark.parametrize("unticked", ["false", "0", ""])
def test_an_unticked_literals_box_in_a_link_still_shows_identities_escaped(staff_client, weird, unticked):
    # A shared link saying literals=false is the box unticked: the scope id typed exactly is shown back escaped.
    params = {"scope": WEIRD_SCOPE, "query": "rockets", "max_bytes": "8000", "assembly": "{}", "literals": unticked}
    page = staff_client.get(INSPECT_URL, params).content.decode()
    assert "\u202e" not in page and "\u2028" not in page
    assert _inspected_content(staff_client.get(INSPECT_URL, params)) is not None


def test_inspector_query_line_breaks_are_taken_as_typed(staff_client, demo):
    # Browsers submit textarea line breaks as CRLF; the inspector prepares what was typed (LF).
    api = _api_prepare(
        staff_client, demo["key"], {"scope_id": "project:demo", "query": "OpenAPI\ncontract", "assembly": {}}
    ).json()
    response = _inspect(staff_client, demo["scope"], "OpenAPI\r\ncontract", assembly={})
    assert _inspected_content(response) == api["content"]
    assert json.loads(response.context["request_json"])["query"] == "OpenAPI\ncontract"


def test_legacy_mode_prepares_the_legacy_envelope(staff_client, demo):
    response = _inspect(staff_client, demo["scope"], "OpenAPI contract", assembly='{"ignored": true}', legacy=True)
    content = _inspected_content(response)
    assert "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1" in content
    assert "legacy envelope" in response.content.decode()
    assert "assembly" not in json.loads(response.context["request_json"])


def test_no_sections_is_the_empty_result(staff_client, demo):
    response = _inspect(staff_client, demo["scope"], "OpenAPI", assembly={"sections": []})
    assert response.context["result"].status == "empty"
    assert _inspected_content(response) is None
    assert 'id="prepared-content-empty"' in response.content.decode()
    assert response.context["rows"] == []


def test_the_inspector_writes_nothing(staff_client, demo):
    counts = (ArtifactRevision.objects.count(), MemoryEntryVersion.objects.count(), RecallDocument.objects.count())
    with CaptureQueriesContext(connection) as queries:
        response = _inspect(staff_client, demo["scope"], "OpenAPI contract change", assembly={})
    assert response.status_code == 200
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
    ]
    assert writes == []
    assert counts == (
        ArtifactRevision.objects.count(),
        MemoryEntryVersion.objects.count(),
        RecallDocument.objects.count(),
    )


def test_the_inspector_form_renders_empty_and_lists_no_scope_or_key(staff_client, demo, weird):
    response = staff_client.get(INSPECT_URL)
    assert response.status_code == 200
    page = response.content.decode()
    assert '<input type="text" name="scope"' in page and '<input type="text" name="api_key"' in page
    assert "<option" not in page
    assert "team:platform" not in page and "Weird" not in page and "inspector-comparison" not in page
    assert "result" not in response.context or response.context.get("result") is None


@pytest.mark.parametrize(
    ("method", "params"),
    [
        pytest.param("get", {}, id="empty-form"),
        pytest.param("get", {"scope": "project:demo"}, id="as-the-operator"),
        pytest.param("get", {"scope": "project:demo", "api_key": "inspector-comparison"}, id="as-a-key-by-name"),
        pytest.param("get", {"scope": "project:demo", "api_key": "KEY_ID"}, id="as-a-key-by-id"),
        pytest.param("get", {"scope": "tenant:nope", "api_key": "nobody"}, id="unknown-scope-and-key"),
        pytest.param("post", {"scope": "project:demo", "api_key": "inspector-comparison"}, id="posted"),
    ],
)
def test_the_inspector_runs_the_same_statements_with_one_scope_or_three_hundred(staff_client, demo, method, params):
    # Every scope and key is found by an exact lookup: the page never reads the whole table of either.
    key_id = str(ApiKey.objects.get(name="inspector-comparison").pk)
    params = {name: key_id if value == "KEY_ID" else value for name, value in params.items()}
    if params:
        params |= {"query": "OpenAPI contract", "assembly": "{}"}

    def statements() -> tuple[int, int]:
        """The statements the page ran and the size of the page; no statement reads either table whole."""
        with CaptureQueriesContext(connection) as queries:
            response = getattr(staff_client, method)(INSPECT_URL, params)
        assert response.status_code == 200
        for sql in (query["sql"] for query in queries.captured_queries):
            if any(f'"{model._meta.db_table}"' in sql for model in (Scope, ApiKey)):
                assert " WHERE " in sql, sql
        return len(queries.captured_queries), len(response.content)

    statements()  # the session and the user, as on any later request
    few = statements()
    Scope.objects.bulk_create(Scope(scope_id=f"tenant:{number}", title=f"Tenant {number}") for number in range(300))
    ApiKey.objects.bulk_create(
        ApiKey(name=f"tenant-key-{number}", key_prefix="pc_tenant", key_sha256=f"{number:064x}")
        for number in range(300)
    )
    assert statements() == few


# --- inspector: validation as the API does it ------------------------------------------------------

INVALID = [
    pytest.param({"query": "   "}, id="blank-query"),
    pytest.param({"query": ""}, id="empty-query"),
    pytest.param({"query": "x" * 8193}, id="long-query"),
    pytest.param({"max_bytes": 100}, id="max-bytes-low"),
    pytest.param({"max_bytes": 40000}, id="max-bytes-high"),
    pytest.param({"max_bytes": "lots"}, id="max-bytes-text"),
    pytest.param({"assembly": None}, id="assembly-null"),
    pytest.param({"assembly": []}, id="assembly-array"),
    pytest.param({"assembly": {"sections": [{"family": "skill", "limit": 1}]}}, id="unknown-family"),
    pytest.param(
        {"assembly": {"sections": [{"family": "memory", "limit": 1}, {"family": "memory", "limit": 2}]}},
        id="duplicate-family",
    ),
    pytest.param({"assembly": {"sections": [{"family": "memory", "limit": 17}]}}, id="limit-high"),
    pytest.param({"assembly": {"show": ["score"], "sort_by": "score"}}, id="unknown-show-and-field"),
    pytest.param({"assembly": {"format": "html"}, "max_bytes": 10}, id="several-at-once"),
]


@pytest.mark.parametrize("change", INVALID)
def test_inspector_reports_the_api_validation_errors_with_their_paths(staff_client, demo, change):
    body = {"scope_id": "project:demo", "query": "OpenAPI", "max_bytes": 8000, "assembly": {}, **change}
    api = _api_prepare(staff_client, demo["key"], body)
    assert api.status_code == 422
    expected = api.json()["error"]["fields"]

    assembly = json.dumps(body["assembly"])
    response = _inspect(staff_client, demo["scope"], body["query"], max_bytes=str(body["max_bytes"]), assembly=assembly)
    assert response.status_code == 200
    assert _inspected_errors(response) == expected
    assert _inspected_content(response) is None and "result" not in response.context


def test_inspector_reports_invalid_json_and_a_missing_assembly(staff_client, demo):
    response = _inspect(staff_client, demo["scope"], "OpenAPI", assembly='{"sections": [}')
    [error] = _inspected_errors(response)
    assert error["path"] == "assembly" and error["message"].startswith("is not valid JSON")
    response = _inspect(staff_client, demo["scope"], "OpenAPI", assembly="  ")
    assert _inspected_errors(response) == [
        {"path": "assembly", "message": "enter an assembly object (e.g. {}) or tick legacy mode"}
    ]


@pytest.mark.parametrize(
    ("params", "error"),
    [
        pytest.param({"scope": "project:nope"}, 'No scope has the id "project:nope".', id="unknown-scope"),
        pytest.param({"scope": "999999"}, 'No scope has the id "999999".', id="a-number-is-no-scope-id"),
        pytest.param(
            {"scope": '"project:nope"', "literals": "on"}, 'No scope has the id "project:nope".', id="literal"
        ),
        pytest.param({"scope": "project:nope", "literals": "on"}, "scope id must be one JSON", id="not-a-literal"),
        pytest.param({"scope": "s" * 201}, "scope id is longer than 200 characters", id="too-long"),
        pytest.param({"api_key": "999999"}, "No API key has the id 999999.", id="unknown-key-id"),
        pytest.param({"api_key": "nobody"}, 'No API key is named "nobody".', id="unknown-key-name"),
    ],
)
def test_inspector_refuses_an_unknown_scope_or_key_naming_it(staff_client, demo, params, error):
    response = staff_client.get(INSPECT_URL, {"scope": "project:demo", "query": "x", "assembly": "{}", **params})
    assert response.status_code == 200
    assert html.escape(error) in response.content.decode()
    assert "result" not in response.context


SPOOF = "spoof:\u202eevil\u202c"  # reads "spoof:live" when shown raw


def _no_raw_bidi(page: str) -> bool:
    return "\u202e" not in page and "\u202c" not in page


@pytest.mark.parametrize(("field", "error"), [("scope", "No scope has the id"), ("api_key", "No API key is named")])
def test_inspector_lookup_errors_show_the_value_sent_escaped(staff_client, demo, field, error):
    params = {"scope": "project:demo", "query": "x", "assembly": "{}", field: SPOOF}
    page = staff_client.get(INSPECT_URL, params).content.decode()
    assert f"{error} {html.escape(json_literal(SPOOF))}." in page
    assert _no_raw_bidi(page)


def test_inspector_validation_errors_show_an_echoed_key_escaped(staff_client, demo):
    response = _inspect(staff_client, demo["scope"], "OpenAPI", assembly=json.dumps({SPOOF: 1}))
    assert _inspected_errors(response) == [{"path": "assembly.spoof:\\u202Eevil\\u202C", "message": "unknown field"}]
    assert _no_raw_bidi(response.content.decode())


def test_resolver_choice_errors_show_the_value_sent_escaped(staff_client, demo):
    fields = {"fields-scope": "project:demo", "fields-artifact_id": "memory", "fields-revision": "1"}
    page = staff_client.get(RESOLVE_URL, {**fields, "fields-family": SPOOF}).content.decode()
    assert f"Select a valid choice. {html.escape(json_literal(SPOOF))} is not one of" in page
    assert _no_raw_bidi(page)


def test_an_empty_max_bytes_uses_the_api_default(staff_client, demo):
    api = _api_prepare(staff_client, demo["key"], {"scope_id": "project:demo", "query": "OpenAPI", "assembly": {}})
    response = _inspect(staff_client, demo["scope"], "OpenAPI", max_bytes="", assembly={})
    assert _inspected_content(response) == api.json()["content"]
    assert response.context["max_bytes"] == 8000


def test_a_failing_recall_source_is_reported_not_hidden(staff_client, demo, settings):
    settings.POWERCONTEXT_RECALL_SOURCES = {**settings.POWERCONTEXT_RECALL_SOURCES, "memory": "builtins.len"}
    response = _inspect(staff_client, demo["scope"], "OpenAPI", assembly={})
    page = html.unescape(response.content.decode())
    assert "recall source for memory failed" in page and "503" in page
    assert _inspected_content(response) is None


@pytest.mark.parametrize("page", ["revision", "entry_version"])
def test_exact_pages_never_show_a_raw_identity_control_character(staff_client, weird, page):
    # Heading, breadcrumb, title, links and citation lines all show the escaped identity; the bodies
    # here have no controls, so no raw bidi control or separator may appear anywhere on the page.
    if page == "revision":
        url = _revision_page(_revision(WEIRD_SCOPE, WEIRD_EXPERIENCE, 1))
    else:
        url = _version_page(_version(WEIRD_SCOPE, WEIRD_VERSION))
    html_page = staff_client.get(url).content.decode()
    for char in ("\u202e", "\u2028", "\u2029", "\u2066", "\u2069", "\u200b"):
        index = html_page.find(char)
        assert index == -1, f"raw U+{ord(char):04X} in …{html_page[max(0, index - 200) : index + 50]!r}"
    assert html.escape('in scope "proj \\"q\\"\\nline\\u2028sep\\u202eevil"') in html_page


# --- hostile input: a form error, never a 500 ------------------------------------------------------------


@pytest.mark.parametrize(
    "pasted",
    [
        "[" * 950 + "]" * 950,
        '{"items": ' + "[" * 950 + "]" * 950 + "}",
        '    Scope: "project:demo"\n    Artifact: family="experience", id="experience-1", revision=' + "9" * 5000,
    ],
    ids=["deep-array", "deep-envelope", "5000-digit-revision"],
)
def test_the_resolver_answers_hostile_pastes_with_a_form_error(staff_client, demo, pasted):
    response = staff_client.post(RESOLVE_URL, {"text-citation": pasted})
    assert response.status_code == 200
    assert "Malformed citation" in response.content.decode()


def test_the_resolver_fields_refuse_a_5000_digit_revision_with_a_form_error(staff_client, demo):
    fields = {"fields-scope": "project:demo", "fields-family": "experience", "fields-artifact_id": "experience-1"}
    response = staff_client.post(RESOLVE_URL, {**fields, "fields-revision": "9" * 5000})
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()


@pytest.mark.parametrize(
    "assembly",
    ['{"\\ud800": 1}', '{"format": "\\ud800"}', '{"sections": [{"family": "\\udfff", "limit": 1}]}', "[" * 950],
)
def test_the_inspector_answers_hostile_assembly_json_with_errors(staff_client, demo, assembly):
    scope = Scope.objects.get(scope_id="project:demo")
    response = _inspect(staff_client, scope, "OpenAPI", assembly=assembly)
    assert response.status_code == 200
    assert _inspected_errors(response)
    assert "\ud800" not in response.content.decode("utf-8")
