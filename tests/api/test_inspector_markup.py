"""The prepare inspector shows stored markup as text, never as markup (issue 51, item 7a).

A tenant's body is untrusted: a memory entry, an experience or a topic memory holding ``<script>``, an ``<img>``
with an event handler or a ``</pre>`` that would close the content's block must reach a staff member's browser
escaped, in Markdown V1 and in the legacy envelope alike, while the text the page shows (unescaped) is still the
API's content byte for byte. A template that rendered the content ``|safe`` would run the tenant's script in the
operator's admin session (stored XSS against staff).
"""

import html
import json
import re

import pytest

from artifacts import services
from artifacts.services import EntryVersionWrite
from tests.api.factories import make_key, make_scope, ok_json, prepare

pytestmark = pytest.mark.django_db

INSPECT_URL = "/admin/powercontext/inspect/"
QUERY = "rollout checklist"
SCRIPT = '<script>alert("pc-inspector")</script>'
IMAGE = '<img src=x onerror="alert(document.cookie)">'
CLOSING = "</pre><b>not bold</b>"
MEMORY_BODY = f"rollout checklist: {SCRIPT} {IMAGE} {CLOSING} &amp; done"
EXPERIENCE_BODY = f"Situation: the rollout checklist.\nLesson: {SCRIPT}"
TOPIC_BODY = f"Rollout checklist details {IMAGE}"
RAW_MARKUP = ("<script>alert(", "<img src=x", "</pre><b>", "<b>not bold", "<i>title", "<u>summary")
"""The stored markup as a browser would parse it: none of it may reach the page unescaped."""


@pytest.fixture
def key():
    scope = make_scope("project:markup")
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        writes=[EntryVersionWrite(entry_id="hostile", version_id=None, body=MEMORY_BODY)],
        author="tests",
    )
    services.experience_revision_create(scope=scope, artifact_id="lesson", body=EXPERIENCE_BODY, author="tests")
    services.topic_memory_revision_create(
        scope=scope,
        artifact_id="rollout",
        title="Rollout checklist <i>title</i>",
        summary="The rollout checklist <u>summary</u>",
        body=TOPIC_BODY,
        author="tests",
    )
    return make_key(read=[scope])


ASSEMBLY = {
    "sections": [
        {"family": "memory", "limit": 2},
        {"family": "experience", "limit": 2},
        {"family": "topic_memory", "limit": 2},
    ]
}


@pytest.mark.parametrize("legacy", [False, True], ids=["markdown", "legacy"])
def test_markup_in_stored_bodies_is_shown_escaped_and_equal_to_the_api_content(client, staff_client, key, legacy):
    body = {"scope_id": "project:markup", "query": QUERY, "max_bytes": 8000}
    params = {"scope": "project:markup", "query": QUERY, "max_bytes": "8000"}
    if legacy:
        params["legacy"] = "on"
    else:
        body["assembly"] = ASSEMBLY
        params["assembly"] = json.dumps(ASSEMBLY)
    api_content = ok_json(prepare(client, key, body))["content"]
    assert [markup for markup in RAW_MARKUP if markup not in api_content] == []  # every family's markup is shown

    response = staff_client.get(INSPECT_URL, params)

    assert response.status_code == 200
    assert response.context["result"].content == api_content
    page = response.content.decode()
    assert [markup for markup in RAW_MARKUP if markup in page] == []
    assert "&lt;script&gt;" in page and "&lt;/pre&gt;&lt;b&gt;not bold&lt;/b&gt;" in page
    blocks = re.findall(r'<pre class="powercontext-content" id="prepared-content">(.*?)</pre>', page, re.S)
    assert len(blocks) == 1, "the content stays in one block: a body's </pre> does not close it"
    assert html.unescape(blocks[0]) == api_content
    assert "&amp;amp; done" in page  # a body's own entity is shown as typed, not decoded
