"""Staff see and do only what their permissions say: every operator page and admin action, as each role.

Roles: staff with no permission, view-only staff (every model's view permission, as Django names them), staff with
one relevant permission each (and the pairs a page needs together), and a superuser. Tenants' text (a memory body,
a logged query) is the thing to protect: it appears only on the pages whose permission the user holds.
"""

from __future__ import annotations

import html

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from artifacts import services
from artifacts.models import ApiKey, ArtifactRevision, MemoryEntryVersion, PrepareLog
from tests.api.factories import add_memory, make_key_object, make_scope, prepare

pytestmark = pytest.mark.django_db

TENANT_TEXT = "TENANTSECRET alpha release notes"
QUERY = "alpha QUERYSECRET"
INSPECT_URL = reverse("admin-prepare-inspect")
RESOLVE_URL = reverse("admin-citation-resolve")
INSPECTOR = "artifacts.run_prepare_inspector"
LOG = "artifacts.view_preparelog"
LOG_CONTENT = "artifacts.view_prepare_log_content"
REVISIONS = "artifacts.view_artifactrevision"
ENTRY_VERSIONS = "artifacts.view_memoryentryversion"
KEYS = "artifacts.view_apikey"
CHANGE_KEYS = "artifacts.change_apikey"
CHANGE_CANDIDATES = "artifacts.change_profilecandidate"
VIEW_ONLY = "view-only"
SUPERUSER = "superuser"

ROLES = {
    "no-permission": (),
    VIEW_ONLY: (),  # every model's view_<model> permission (see _user)
    "view-log": (LOG,),
    "view-log-content-alone": (LOG_CONTENT,),
    "view-log-and-content": (LOG, LOG_CONTENT),
    "view-log-content-and-inspector": (LOG, LOG_CONTENT, INSPECTOR),
    "run-inspector": (INSPECTOR,),
    "view-revisions": (REVISIONS,),
    "view-entry-versions": (ENTRY_VERSIONS,),
    "view-revisions-and-entry-versions": (REVISIONS, ENTRY_VERSIONS),
    "change-keys": (CHANGE_KEYS,),
    "change-candidates": (CHANGE_CANDIDATES,),
    SUPERUSER: (),
}


def _holds(role: str, *permissions: str) -> bool:
    """What the role may do, stated from the permission names (a superuser holds them all)."""
    if role == SUPERUSER:
        return True
    held = set(ROLES[role])
    if role == VIEW_ONLY:
        held = {LOG, REVISIONS, ENTRY_VERSIONS, KEYS}  # the view permissions the pages below need
    return set(permissions) <= held


def _user(role: str):
    users = get_user_model().objects
    if role == SUPERUSER:
        return users.create_superuser("root", "root@example.com", "pw-root-1")
    user = users.create_user(role, f"{role}@example.com", "pw-staff-1", is_staff=True)
    if role == VIEW_ONLY:
        views = [
            p for p in Permission.objects.select_related("content_type") if p.codename == f"view_{p.content_type.model}"
        ]
        user.user_permissions.add(*views)
    for name in ROLES[role]:
        app_label, codename = name.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return user


@pytest.fixture(params=list(ROLES))
def role(request):
    return request.param


@pytest.fixture
def as_role(role):
    client = Client()
    client.force_login(_user(role))
    return client


@pytest.fixture
def tenant(client):
    """A tenant's scope with a memory, a read key, one logged prepare that returned its text, a pending candidate."""
    scope = make_scope("project:tenant")
    add_memory(scope, {"e1": TENANT_TEXT})
    api_key, key = make_key_object(read=[scope])
    response = prepare(client, key, scope_id="project:tenant", query=QUERY)
    assert TENANT_TEXT in response.json()["content"]
    candidate = services.profile_candidate_propose(scope=scope, artifact_id="profile", body="Tea.", proposed_by="host")
    return {"scope": scope, "api_key": api_key, "key": key, "log": PrepareLog.objects.get(), "candidate": candidate}


def _text(response) -> str:
    return html.unescape(response.content.decode())


# --- operator tools ------------------------------------------------------------------------------------


@pytest.mark.parametrize("run_as_key", [False, True], ids=["every-scope", "as-a-key"])
def test_the_inspector_runs_only_for_staff_who_may_run_it(as_role, role, tenant, run_as_key):
    params = {"scope": tenant["scope"].scope_id, "query": "alpha", "assembly": "{}"}
    if run_as_key:
        params["api_key"] = tenant["api_key"].pk
    response = as_role.get(INSPECT_URL, params)
    if _holds(role, INSPECTOR):
        assert response.status_code == 200 and TENANT_TEXT in _text(response)
    else:
        assert response.status_code == 403
        assert "TENANTSECRET" not in _text(response) and "project:tenant" not in _text(response)


def test_the_resolver_opens_only_for_staff_who_may_view_revisions_and_entry_versions(as_role, role, tenant):
    text = '    Scope: "project:tenant"\n    Artifact: family="memory", id="memory", revision=1'
    response = as_role.post(RESOLVE_URL, {"text-citation": text})
    if _holds(role, REVISIONS, ENTRY_VERSIONS):
        revision = ArtifactRevision.objects.get(artifact__scope=tenant["scope"])
        assert response.status_code == 302
        assert response["Location"] == reverse("admin:artifacts_artifactrevision_change", args=[revision.pk])
    else:
        assert response.status_code == 403


def test_the_admin_index_links_only_the_tools_the_user_may_use(as_role, role):
    page = as_role.get(reverse("admin:index")).content.decode()
    links = {
        INSPECT_URL: _holds(role, INSPECTOR),
        RESOLVE_URL: _holds(role, REVISIONS, ENTRY_VERSIONS),
        reverse("admin:artifacts_preparelog_changelist"): _holds(role, LOG),
    }
    shown = {url: f'href="{url}"' in page for url in links}
    assert shown == links
    assert ('id="powercontext-tools"' in page) == any(links.values())


@pytest.mark.parametrize("page", ["inspector", "resolver"])
def test_each_tool_links_the_other_only_for_staff_who_may_use_it(as_role, role, tenant, page):
    url, other, needs = {
        "inspector": (INSPECT_URL, RESOLVE_URL, (INSPECTOR,)),
        "resolver": (RESOLVE_URL, INSPECT_URL, (REVISIONS, ENTRY_VERSIONS)),
    }[page]
    if not _holds(role, *needs):
        assert as_role.get(url).status_code == 403
        return
    other_needs = (REVISIONS, ENTRY_VERSIONS) if page == "inspector" else (INSPECTOR,)
    assert (f'href="{other}"' in as_role.get(url).content.decode()) == _holds(role, *other_needs)


# --- the prepare log ---------------------------------------------------------------------------------------


def test_the_prepare_log_list_shows_metadata_and_never_the_query(as_role, role, tenant):
    response = as_role.get(reverse("admin:artifacts_preparelog_changelist"))
    if not _holds(role, LOG):
        assert response.status_code == 403
        return
    page = _text(response)
    assert response.status_code == 200 and "project:tenant" in page and "1 prepare log entry" in page
    assert "QUERYSECRET" not in page and "TENANTSECRET" not in page


def test_searching_the_prepare_log_never_finds_an_entry_by_its_query(as_role, role, tenant):
    url = reverse("admin:artifacts_preparelog_changelist")
    if not _holds(role, LOG):
        assert as_role.get(url, {"q": "QUERYSECRET"}).status_code == 403
        return
    assert as_role.get(url, {"q": "QUERYSECRET"}).context["cl"].result_count == 0
    assert as_role.get(url, {"q": tenant["log"].content_sha256}).context["cl"].result_count == 1
    # The query's hash confirms a guessed query: it finds the entry only for staff who may read queries.
    found_by_query_hash = as_role.get(url, {"q": tenant["log"].query_sha256}).context["cl"].result_count
    assert found_by_query_hash == (1 if _holds(role, LOG_CONTENT) else 0)


@pytest.mark.parametrize(
    "probe",
    [
        {"query__startswith": "alpha"},
        {"query__contains": "QUERYSECRET"},
        {"record__contains": "TENANTSECRET"},
        {"query_sha256": "QUERY_SHA256"},
        {"query__regex": "("},
        {"created_at__year": "2026"},
        {"time__lt": "2026-01-01"},
    ],
    ids=["query prefix", "query part", "record part", "query hash", "regular expression", "a year", "time lookup"],
)
def test_no_role_can_filter_the_prepare_log_by_what_its_page_hides(as_role, role, tenant, probe):
    # Django lets a URL filter on any field of the model; only the page's own filters are allowed here (400).
    url = reverse("admin:artifacts_preparelog_changelist")
    params = {name: tenant["log"].query_sha256 if value == "QUERY_SHA256" else value for name, value in probe.items()}
    assert as_role.get(url, params).status_code == (400 if _holds(role, LOG) else 403)


def test_the_prepare_log_pages_own_filters_still_work(as_role, role, tenant):
    if not _holds(role, LOG):
        return
    url = reverse("admin:artifacts_preparelog_changelist")
    offered = [
        {"http_status__exact": "200"},
        {"scope__id__exact": str(tenant["scope"].pk)},
        {"time": "hour"},
    ]
    assert [as_role.get(url, params).context["cl"].result_count for params in offered] == [1, 1, 1]


def test_no_role_can_filter_api_keys_by_their_stored_hash(as_role, role, tenant):
    response = as_role.get(reverse("admin:artifacts_apikey_changelist"), {"key_sha256__startswith": "a"})
    assert response.status_code in (400, 403)


def test_a_prepare_log_entry_shows_content_only_with_the_content_permission(as_role, role, tenant):
    log = tenant["log"]
    response = as_role.get(reverse("admin:artifacts_preparelog_change", args=[log.pk]))
    if not _holds(role, LOG):
        assert response.status_code == 403
        return
    page = _text(response)
    # The metadata: time, key, scope as sent, status, sizes, hashes; the key's name is the key's, so only with
    # its view permission (else its id: tests/api/test_admin_related_data.py).
    assert response.status_code == 200
    assert '"project:tenant"' in page
    assert (tenant["api_key"].name in page) == _holds(role, KEYS)
    assert log.content_sha256 in page and str(log.content_bytes) in page
    may_read = _holds(role, LOG_CONTENT)
    assert ("QUERYSECRET" in page) == may_read
    assert ("TENANTSECRET" in page) == may_read
    assert ("Candidates and decisions" in page) == may_read
    assert (INSPECT_URL in page) == (may_read and _holds(role, INSPECTOR))


# --- admin actions and forms -----------------------------------------------------------------------------


def _action_function(action):
    """An admin action's function: Django 6.1 hands back an ``Action`` (unpacking it is deprecated), 5.2 a tuple."""
    return getattr(action, "func", None) or action[0]


def test_every_admin_action_declares_the_permission_it_needs(rf):
    request = rf.get("/admin/")
    request.user = get_user_model()(is_staff=True, is_superuser=True, is_active=True)
    undeclared = [
        f"{type(model_admin).__name__}.{name}"
        for model_admin in admin.site._registry.values()
        for name, action in model_admin.get_actions(request).items()
        if not getattr(_action_function(action), "allowed_permissions", ())
    ]
    assert undeclared == []


def _post_action(client, model: str, action: str, pk: int):
    url = reverse(f"admin:artifacts_{model}_changelist")
    return client.post(url, {"action": action, "_selected_action": [pk], "index": "0"})


def test_revoking_keys_needs_the_change_permission(as_role, role, client, tenant):
    _post_action(as_role, "apikey", "revoke_keys", tenant["api_key"].pk)
    revoked = ApiKey.objects.get(pk=tenant["api_key"].pk).revoked_at is not None
    assert revoked == _holds(role, CHANGE_KEYS)
    expected = 401 if revoked else 200
    assert prepare(client, tenant["key"], scope_id="project:tenant", query="alpha").status_code == expected


@pytest.mark.parametrize("action", ["commit_candidates", "reject_candidates"])
def test_committing_and_rejecting_candidates_need_the_change_permission(as_role, role, tenant, action):
    candidate = tenant["candidate"]
    _post_action(as_role, "profilecandidate", action, candidate.pk)
    candidate.refresh_from_db()
    profile_revisions = ArtifactRevision.objects.filter(artifact__family="profile").count()
    if _holds(role, CHANGE_CANDIDATES):
        expected = ("committed", 1) if action == "commit_candidates" else ("rejected", 0)
        assert (candidate.status, profile_revisions) == expected
    else:
        assert (candidate.status, profile_revisions) == ("pending", 0)


def test_the_actions_are_offered_only_to_staff_who_may_post_them(as_role, role, tenant):
    for model, actions, needs in (
        ("apikey", ["revoke_keys"], CHANGE_KEYS),
        ("profilecandidate", ["commit_candidates", "reject_candidates"], CHANGE_CANDIDATES),
    ):
        response = as_role.get(reverse(f"admin:artifacts_{model}_changelist"))
        if response.status_code == 403:
            continue
        page = response.content.decode()
        assert [f'value="{action}"' in page for action in actions] == [_holds(role, needs)] * len(actions)


def _key_form(**fields) -> dict:
    return {
        "grants-TOTAL_FORMS": "0",
        "grants-INITIAL_FORMS": "0",
        "grants-MIN_NUM_FORMS": "0",
        "grants-MAX_NUM_FORMS": "1000",
        **fields,
    }


def test_no_role_can_clear_or_set_revoked_at_through_the_key_form(as_role, role, client, tenant):
    api_key = tenant["api_key"]
    url = reverse("admin:artifacts_apikey_change", args=[api_key.pk])
    # Not revoked: the form does not revoke it either (revocation is the action's and the command's).
    as_role.post(url, _key_form(revoked_at_0="2026-01-01", revoked_at_1="00:00:00"))
    assert ApiKey.objects.get(pk=api_key.pk).revoked_at is None
    services.api_key_revoke(api_key=api_key)
    revoked_at = ApiKey.objects.get(pk=api_key.pk).revoked_at
    response = as_role.post(url, _key_form(revoked_at_0="", revoked_at_1=""))
    assert response.status_code == (302 if _holds(role, CHANGE_KEYS) else 403)
    assert ApiKey.objects.get(pk=api_key.pk).revoked_at == revoked_at
    assert prepare(client, tenant["key"], scope_id="project:tenant", query="alpha").status_code == 401


def test_a_superuser_sees_revoked_at_on_the_key_form_but_no_field_to_change_it(tenant):
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-1"))
    page = client.get(reverse("admin:artifacts_apikey_change", args=[tenant["api_key"].pk])).content.decode()
    assert "Revoked at" in page and 'name="revoked_at_0"' not in page


@pytest.mark.parametrize("model", ["artifactrevision", "memoryentryversion"])
def test_a_row_page_refused_for_lack_of_permission_reads_no_row_first(tenant, model):
    # The same statements whether the row exists or not: the time taken tells nothing either.
    client = Client()
    client.force_login(_user("no-permission"))
    existing = (ArtifactRevision if model == "artifactrevision" else MemoryEntryVersion).objects.first().pk
    answers = []
    for pk in (existing, existing + 10_000):
        url = reverse(f"admin:artifacts_{model}_change", args=[pk]) + "?cited_revision=1"
        with CaptureQueriesContext(connection) as queries:
            status = client.get(url).status_code
        answers.append((status, len(queries)))
    assert answers[0][0] == answers[1][0] == 403
    assert answers[0][1] == answers[1][1]
