"""The prepare log's admin pages: find a past prepare, read exactly what the agent got, and why."""

import html
import re
from urllib.parse import parse_qs, urlparse

import pytest
from django.urls import reverse

from artifacts import services
from artifacts.models import ArtifactRevision, MemoryEntryVersion, PrepareLog
from tests.api.factories import (
    PREPARE_URL,
    add_experience,
    add_memory,
    make_key,
    make_key_object,
    make_scope,
    prepare,
)
from tests.api.test_admin import _changelist_rows
from vocabulary.escaping import escape_invisible, json_literal

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged(client):
    demo = make_scope("project:demo")
    add_memory(demo, {"m1": "alpha <b>bold</b> note\u202e", "m2": "alpha second"})
    add_experience(demo, "exp-1", "alpha lesson")
    api_key, key = make_key_object(read=[demo])
    response = prepare(client, key, query="alpha", max_bytes=4000, assembly={"show": ["recall_rank"]})
    prepare(client, key, scope_id="project:missing")
    return {"demo": demo, "api_key": api_key, "key": key, "content": response.json()["content"]}


def _page(staff_client, log: PrepareLog) -> str:
    response = staff_client.get(reverse("admin:artifacts_preparelog_change", args=[log.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_log_list_filters_by_status_key_scope_and_time(staff_client, logged):
    url = reverse("admin:artifacts_preparelog_changelist")
    assert staff_client.get(url).status_code == 200
    assert "2 prepare log entries" in staff_client.get(url).content.decode()
    assert "1 prepare log entry" in staff_client.get(url, {"http_status": "404"}).content.decode()
    by_key = {"api_key__id__exact": logged["api_key"].pk}
    assert "2 prepare log entries" in staff_client.get(url, by_key).content.decode()
    assert "1 prepare log entry" in staff_client.get(url, {"scope__id__exact": logged["demo"].pk}).content.decode()
    assert "2 prepare log entries" in staff_client.get(url, {"time": "hour"}).content.decode()
    answered = PrepareLog.objects.get(http_status=200)
    assert "1 prepare log entry" in staff_client.get(url, {"q": answered.content_sha256}).content.decode()
    assert "1 prepare log entry" in staff_client.get(url, {"q": "project:missing"}).content.decode()


def test_the_log_list_sorts_only_by_its_indexed_columns(staff_client, logged):
    # Sorting the whole log (up to its size cap) by an unindexed column was a scan and a sort per view.
    url = reverse("admin:artifacts_preparelog_changelist")

    def statuses(order: str) -> list[int]:
        return [log.http_status for log in staff_client.get(url, {"o": order}).context["cl"].result_list]

    assert statuses("") == [404, 200]  # newest first
    assert statuses("1") == [200, 404]  # by time, oldest first
    assert statuses("-1") == [404, 200]
    for unindexed in ("4", "-4", "8", "3", "2"):  # status, duration, scope, API key
        assert statuses(unindexed) == [404, 200]


def test_the_log_list_counts_in_words_and_shows_durations_rounded_with_their_unit(staff_client, logged):
    PrepareLog.objects.filter(http_status=200).update(duration_ms=38.28197200004979)
    PrepareLog.objects.filter(http_status=404).update(duration_ms=None)
    page = staff_client.get(reverse("admin:artifacts_preparelog_changelist")).content.decode()

    assert "2 prepare log entries" in page and "2 prepare log<" not in page
    rows = _changelist_rows(page)
    answered = PrepareLog.objects.get(http_status=200)
    refused = PrepareLog.objects.get(http_status=404)
    by_entry = {row[0]: row for row in rows}
    assert by_entry[f"#{answered.pk}"][-1] == "38.3 ms"
    assert by_entry[f"#{refused.pk}"][-1] == "-"  # no duration: the admin's empty value
    assert by_entry[f"#{refused.pk}"][4] == f"404 {refused.error_code}"
    assert "38.28197200004979" not in page
    # the entry's own page shows it the same way
    assert "38.3 ms" in _page(staff_client, answered)


def test_a_log_entry_shows_the_replayed_content_exactly_as_the_agent_got_it(staff_client, logged):
    page = _page(staff_client, PrepareLog.objects.get(http_status=200))
    assert "equals the logged one" in page and "ALARM" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page
    # The invisible character reached the agent as a visible escape, and the page shows just that.
    assert "\u202e" not in page and "note\\u202e" in page.lower()
    assert html.escape(logged["content"], quote=False).split("\n")[0] in page


def test_a_log_entry_lists_every_candidate_with_its_decision_and_links_to_the_exact_rows(staff_client, logged):
    page = _page(staff_client, PrepareLog.objects.get(http_status=200))
    for version in MemoryEntryVersion.objects.select_related("artifact"):
        # the entry version's page, naming the revision the prepare cited (the head when it ran)
        cited = version.artifact.head_revision
        assert (
            reverse("admin:artifacts_memoryentryversion_change", args=[version.pk]) + f"?cited_revision={cited}" in page
        )
    experience = ArtifactRevision.objects.get(artifact__artifact_id="exp-1")
    assert reverse("admin:artifacts_artifactrevision_change", args=[experience.pk]) in page
    assert page.count("<td>included</td>") == 3


def test_a_mismatching_replay_is_an_alarm(staff_client, logged):
    log = PrepareLog.objects.get(http_status=200)
    PrepareLog.objects.filter(pk=log.pk).update(content_bytes=1)
    page = _page(staff_client, log)
    assert "ALARM: the replay differs from what was logged." in page
    assert "differs from the logged 1" in page


def test_a_log_entry_opens_the_inspector_with_the_same_request_and_key(staff_client, logged):
    log = PrepareLog.objects.get(http_status=200)
    page = _page(staff_client, log)
    start = page.index(reverse("admin-prepare-inspect"))
    url = html.unescape(page[start : page.index('"', start)])
    params = parse_qs(urlparse(url).query)
    assert params["scope"] == ['"project:demo"'] and params["literals"] == ["on"] and params["query"] == ["alpha"]
    assert params["max_bytes"] == ["4000"] and params["api_key"] == [json_literal(logged["api_key"].name)]
    inspected = staff_client.get(url).content.decode()
    assert html.escape(logged["content"].split("\n")[0], quote=False) in inspected


def test_a_refused_prepare_shows_its_status_and_no_body(staff_client, logged):
    page = _page(staff_client, PrepareLog.objects.get(http_status=404))
    assert "not_found" in page and "nothing to replay" in page
    assert "&quot;project:missing&quot;" in page


def test_log_entries_cannot_be_added_changed_or_deleted(staff_client, logged):
    log = PrepareLog.objects.first()
    assert staff_client.get(reverse("admin:artifacts_preparelog_add")).status_code == 403
    assert staff_client.post(reverse("admin:artifacts_preparelog_delete", args=[log.pk])).status_code == 403
    page = _page(staff_client, log)
    assert 'name="_save"' not in page


def test_a_scope_id_with_a_bidi_control_is_escaped_in_the_list(staff_client, client):
    key = make_key(read=[make_scope("project:demo")])
    prepare(client, key, scope_id="evil\u202escope")
    page = staff_client.get(reverse("admin:artifacts_preparelog_changelist")).content.decode()
    assert "\u202e" not in page and "evil\\u202escope" in page.lower()


def test_an_unauthenticated_prepare_is_listed_filtered_and_shown_without_a_key(staff_client, client, logged):
    # No Authorization header and an empty body: the row has no key and no scope.
    assert client.post(PREPARE_URL, data="{}", content_type="application/json").status_code == 401
    refused = PrepareLog.objects.get(http_status=401)
    assert refused.api_key_id is None
    url = reverse("admin:artifacts_preparelog_changelist")
    for params in ({}, {"http_status": "401"}, {"q": "project:missing"}, {"o": "3"}):
        response = staff_client.get(url, params)
        assert response.status_code == 200, params
    rows = _changelist_rows(staff_client.get(url, {"http_status": "401"}).content.decode())
    # after the entry and its time: no key, no scope, the status with its error code
    assert [row[2:5] for row in rows] == [["-", "-", "401 unauthenticated"]]
    page = _page(staff_client, refused)
    assert "— (no valid key)" in page and "unauthenticated" in page


# --- hostile values on an entry's page: a query and a scope id that would run or reorder if shown raw -----------

HOSTILE_SCOPE = "proj:<script>alert(\"s\")</script>'x'\u202eevil\u202c"
HOSTILE_QUERY = "alpha <script>alert(\"q\")</script> 'single' & \u202eevil\u202c"
BIDI = ("\u202e", "\u202c")


def _field(page: str, name: str) -> str:
    """The HTML the admin renders for one read-only field of an entry's page."""
    match = re.search(rf'class="form-row field-{name}">.*?<div class="readonly">(.*?)</div>\s*</div>', page, re.S)
    assert match, f"no field {name} on the page"
    return match.group(1)


@pytest.fixture
def hostile(client):
    scope = make_scope(HOSTILE_SCOPE)
    demo = make_scope("project:demo")
    add_memory(scope, {"e1": "alpha in the hostile scope"})
    add_memory(demo, {"e1": "alpha in the demo scope"})
    key = make_key(read=[scope, demo])
    assert prepare(client, key, scope_id=HOSTILE_SCOPE, query="alpha").status_code == 200
    assert prepare(client, key, scope_id=HOSTILE_SCOPE + "-missing", query="alpha").status_code == 404
    assert prepare(client, key, scope_id="project:demo", query=HOSTILE_QUERY).status_code == 200
    return {
        "answered": PrepareLog.objects.get(scope_sent=HOSTILE_SCOPE),
        "refused": PrepareLog.objects.get(http_status=404),
        "query": PrepareLog.objects.get(query=HOSTILE_QUERY),
    }


@pytest.mark.parametrize("row", ["answered", "refused"])
def test_an_entry_shows_the_scope_as_sent_escaped_with_its_quotes(staff_client, hostile, row):
    log = hostile[row]
    page = _page(staff_client, log)
    # Exactly the JSON literal (quotes and all, the bidi controls as \u escapes), HTML-escaped: as link text when
    # the scope exists, as text when it does not.
    shown = html.escape(json_literal(log.scope_sent))
    assert "\\u202eevil\\u202c" in json_literal(log.scope_sent)
    if row == "answered":
        url = reverse("admin:artifacts_scope_change", args=[log.scope_id])
        assert _field(page, "scope_shown") == f'<a href="{url}">{shown}</a>'
    else:
        assert _field(page, "scope_shown") == shown
    # Nowhere on the page (title, breadcrumbs, scopes read, candidates) raw: no markup, no bidi control.
    assert "<script>" not in page and not any(char in page for char in BIDI)


def test_an_entry_shows_the_query_escaped(staff_client, hostile):
    page = _page(staff_client, hostile["query"])
    request = _field(page, "request_shown")
    assert "<script>" not in page
    # First with the bidi controls as visible escapes, then exactly as sent, both HTML-escaped and isolated.
    assert html.escape(escape_invisible(HOSTILE_QUERY)) in request
    assert f'unicode-bidi: isolate">{html.escape(HOSTILE_QUERY)}</pre>' in request
    assert "Contains 2 invisible or control character(s)" in request


def test_a_log_entry_of_a_scope_and_key_with_line_breaks_reopens_the_inspector_exactly(staff_client, client):
    # The link types both as JSON literals: a text input would drop the line break, a bidi control would be raw.
    scope = make_scope("proj\nline\u202eevil")
    add_memory(scope, {"m1": "alpha note"})
    api_key, key = services.api_key_create(name='key "q"\u202eevil', read_scopes=[scope])
    response = prepare(client, key, scope_id=scope.scope_id, query="alpha", max_bytes=4000, assembly={})
    page = _page(staff_client, PrepareLog.objects.get())
    start = page.index(reverse("admin-prepare-inspect"))
    inspected = staff_client.get(html.unescape(page[start : page.index('"', start)]))
    assert inspected.context["result"].content == response.json()["content"]
    assert inspected.context["run_as"] == json_literal(api_key.name)  # shown escaped, as every identity
    assert "\u202e" not in inspected.content.decode()
