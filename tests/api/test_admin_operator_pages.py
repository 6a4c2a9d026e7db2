"""Admin pages an operator asked for: scope references and counts, short hashes, entries inline, cited revisions."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from artifacts.admin import history
from artifacts.models import ArtifactRevision, MemoryEntryVersion
from tests.api.factories import add_experience, add_memory, make_scope, update_memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def scopes():
    first, second = make_scope("team:first"), make_scope("team:second")
    demo = make_scope("project:demo", references=[second, first])
    add_memory(demo, {"e1": "first <i>entry</i>", "e2": "second entry"})
    update_memory(demo, "e1", "first entry, revised")
    add_experience(demo, "exp", "a lesson")
    add_experience(first, "exp", "another lesson")
    return {"demo": demo, "first": first, "second": second}


def _row_of(page: str, identity: str) -> str:
    start = page.index(f">{identity}</")
    return page[start : page.index("</tr>", start)]


def test_the_scope_list_shows_references_in_order_and_artifact_counts_without_a_query_per_scope(staff_client, scopes):
    url = reverse("admin:artifacts_scope_changelist")
    page = staff_client.get(url).content.decode()
    demo = _row_of(page, "project:demo")
    assert "team:second, team:first" in demo
    assert '<td class="field-artifact_count">2</td>' in demo
    assert '<td class="field-artifact_count">1</td>' in _row_of(page, "team:first")
    with CaptureQueriesContext(connection) as few:
        staff_client.get(url)
    for index in range(5):
        make_scope(f"project:more-{index}", references=[scopes["first"]])
    with CaptureQueriesContext(connection) as many:
        staff_client.get(url)
    assert len(many.captured_queries) == len(few.captured_queries)


def test_the_revision_list_shows_a_short_hash_and_filters_by_scope(staff_client, scopes):
    url = reverse("admin:artifacts_artifactrevision_changelist")
    revision = ArtifactRevision.objects.get(artifact__scope=scopes["first"])
    page = staff_client.get(url).content.decode()
    assert f">{revision.content_sha256[:12]}</code>" in page
    assert f">{revision.content_sha256}<" not in page
    filtered = staff_client.get(url, {"artifact__scope__id__exact": scopes["first"].pk}).content.decode()
    assert "1 artifact revision" in filtered


def test_a_memory_revision_page_shows_its_live_entries_text_inline_escaped(staff_client, scopes):
    revision = ArtifactRevision.objects.get(artifact__scope=scopes["demo"], artifact__family="memory", revision=1)
    page = staff_client.get(reverse("admin:artifacts_artifactrevision_change", args=[revision.pk])).content.decode()
    assert "first &lt;i&gt;entry&lt;/i&gt;" in page and "<i>entry</i>" not in page
    assert "second entry" in page and "first entry, revised" not in page


def test_a_memory_revision_page_shows_a_bounded_number_of_live_entries(staff_client, monkeypatch):
    monkeypatch.setattr(history, "ADMIN_LIVE_ENTRIES_SHOWN", 3)
    scope = make_scope("project:many")
    add_memory(scope, {f"entry-{i}": f"body number {i}" for i in range(5)})
    revision = ArtifactRevision.objects.get(artifact__scope=scope, revision=1)
    url = reverse("admin:artifacts_artifactrevision_change", args=[revision.pk])

    with CaptureQueriesContext(connection) as queries:
        page = staff_client.get(url).content.decode()

    assert [f"body number {i}" in page for i in range(5)] == [True, True, True, False, False]
    assert "Only the first 3 live entries are shown" in page
    live = [q["sql"] for q in queries.captured_queries if "born_in_revision" in q["sql"] and "LIMIT" in q["sql"]]
    assert len(live) == 1 and "LIMIT 4" in live[0]


def test_resolving_an_entry_citation_confirms_the_cited_revision(staff_client, scopes):
    version = MemoryEntryVersion.objects.get(entry_id="e2")
    fields = {
        "fields-scope": "project:demo",
        "fields-family": "memory",
        "fields-artifact_id": "memory",
        "fields-revision": "2",
        "fields-entry_id": "e2",
        "fields-entry_version": version.version_id,
    }
    response = staff_client.get(reverse("admin-citation-resolve"), fields, follow=True)
    page = reverse("admin:artifacts_memoryentryversion_change", args=[version.pk])
    assert response.redirect_chain[-1][0] == f"{page}?cited_revision=2"
    assert "The citation named revision 2: this version is live in it." in " ".join(response.content.decode().split())
