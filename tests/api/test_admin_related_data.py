"""A page shows another model's data only to staff who may view that model too (``artifacts.admin.related``).

One case per page and related model, each as two roles: staff holding only what the page needs, who must not see
the related data (its text, names and links), and staff holding the related model's view permission too, who do.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from artifacts import services
from artifacts.models import (
    ApiKey,
    ApiKeyGrant,
    ArtifactRevision,
    ContextReference,
    MemoryEntryVersion,
    PrepareLog,
    ProfileCandidate,
    Scope,
)
from artifacts.services import EntryVersionWrite
from tests.api.factories import make_key, make_scope, prepare

pytestmark = pytest.mark.django_db

KEY_NAME = "host-key-KEYSECRET"
STAFF_NAME = "staffer-USERSECRET"
ENTRY_BODY = "ENTRYSECRET alpha release notes"
SCOPE_TITLE = "Tenant TITLESECRET"

REVISIONS = "artifacts.view_artifactrevision"
ENTRY_VERSIONS = "artifacts.view_memoryentryversion"
ARTIFACTS = "artifacts.view_artifact"
SCOPES = "artifacts.view_scope"
KEYS = "artifacts.view_apikey"
GRANTS = "artifacts.view_apikeygrant"
REFERENCES = "artifacts.view_contextreference"
CANDIDATES = "artifacts.view_profilecandidate"
USERS = "auth.view_user"
LOG = "artifacts.view_preparelog"
LOG_CONTENT = "artifacts.view_prepare_log_content"
INSPECTOR = "artifacts.run_prepare_inspector"


@dataclass(frozen=True)
class World:
    scope: Scope
    api_key: ApiKey
    memory: ArtifactRevision
    entry: MemoryEntryVersion
    profile: ArtifactRevision
    candidate: ProfileCandidate
    log: PrepareLog


@pytest.fixture
def world(client) -> World:
    """A tenant's scope (titled, referencing another) and a key reading it; a memory revision written with the key,
    a profile candidate it proposed that a staff user committed in the admin, one logged prepare of the key's, and
    that staff user's admin edits of the key's grants and the scope's references (their history)."""
    scope = make_scope("project:tenant", title=SCOPE_TITLE)
    other, granted = make_scope("project:other"), make_scope("project:granted")
    services.scope_references_set(scope=scope, targets=[other])
    key = make_key(read=[scope, other], name=KEY_NAME)
    api_key = ApiKey.objects.get(name=KEY_NAME)
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        writes=[EntryVersionWrite(entry_id="e1", version_id=None, body=ENTRY_BODY)],
        author=f"api-key:{KEY_NAME}",  # as a write with the key records it (artifacts/api/views.py)
    )
    candidate = services.profile_candidate_propose(
        scope=scope, artifact_id="profile", body="Tea.", proposed_by=f"api-key:{KEY_NAME}"
    )
    assert ENTRY_BODY in prepare(client, key, scope_id="project:tenant", query="alpha release").json()["content"]

    staffer = Client()
    staffer.force_login(get_user_model().objects.create_superuser(STAFF_NAME, "staff@example.com", "pw-staff-1"))
    changelist = reverse("admin:artifacts_profilecandidate_changelist")
    staffer.post(changelist, {"action": "commit_candidates", "_selected_action": [candidate.pk], "index": "0"})
    key_form = {
        **_formset("grants", 1),
        "grants-0-scope": granted.pk,
        "grants-0-can_read": "on",
        "grants-0-api_key": api_key.pk,
    }
    assert staffer.post(reverse("admin:artifacts_apikey_change", args=[api_key.pk]), key_form).status_code == 302
    scope_form = {
        "title": SCOPE_TITLE,
        "authority": "",
        **_formset("references", 1),
        "references-0-target": granted.pk,
        "references-0-position": "9",
        "references-0-scope": scope.pk,
    }
    assert staffer.post(reverse("admin:artifacts_scope_change", args=[scope.pk]), scope_form).status_code == 302
    assert ApiKeyGrant.objects.filter(api_key=api_key, scope=granted).exists()
    assert ContextReference.objects.filter(scope=scope, target=granted).exists()

    memory = ArtifactRevision.objects.get(artifact__scope=scope, artifact__family="memory")
    profile = ArtifactRevision.objects.get(artifact__scope=scope, artifact__family="profile")
    assert profile.author == f"admin:{STAFF_NAME}"
    return World(
        scope=scope,
        api_key=api_key,
        memory=memory,
        entry=MemoryEntryVersion.objects.get(artifact=memory.artifact),
        profile=profile,
        candidate=ProfileCandidate.objects.get(pk=candidate.pk),
        log=PrepareLog.objects.get(),
    )


def _formset(prefix: str, total: int) -> dict:
    return {
        f"{prefix}-TOTAL_FORMS": str(total),
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


def _change(model: str, pk: int) -> str:
    return reverse(f"admin:artifacts_{model}_change", args=[pk])


def _changelist(model: str, **params) -> str:
    url = reverse(f"admin:artifacts_{model}_changelist")
    return f"{url}?{urlencode(params)}" if params else url


def _history(model: str, pk: int) -> str:
    return reverse(f"admin:artifacts_{model}_history", args=[pk])


def _href(url: str) -> str:
    return f'href="{url}'


def _inspect(world: World) -> str:
    """The inspector, run as the world's key typed by its id."""
    params = {"scope": "project:tenant", "query": "alpha", "assembly": "{}", "api_key": world.api_key.pk}
    return f"{reverse('admin-prepare-inspect')}?{urlencode(params)}"


PAGES: dict[str, Callable[[World], str]] = {
    "revision list": lambda w: _changelist("artifactrevision"),
    "memory revision page": lambda w: _change("artifactrevision", w.memory.pk),
    "profile revision page": lambda w: _change("artifactrevision", w.profile.pk),
    "entry version page": lambda w: _change("memoryentryversion", w.entry.pk),
    "artifact page": lambda w: _change("artifact", w.memory.artifact_id),
    "candidate list": lambda w: _changelist("profilecandidate"),
    "candidate page": lambda w: _change("profilecandidate", w.candidate.pk),
    "scope list": lambda w: _changelist("scope"),
    "prepare log list": lambda w: _changelist("preparelog"),
    "prepare log searched by the key's name": lambda w: _changelist("preparelog", q=KEY_NAME),
    "prepare log entry": lambda w: _change("preparelog", w.log.pk),
    "inspector as the key": _inspect,
    "API key history": lambda w: _history("apikey", w.api_key.pk),
    "scope history": lambda w: _history("scope", w.scope.pk),
}
"""Every page that may show another model's data, as a URL in the world."""

SHOWN: dict[str, Callable[[World], str]] = {
    "the key's name": lambda w: KEY_NAME,
    "an author naming the key": lambda w: f"api-key:{KEY_NAME}",
    "an author naming the staff user": lambda w: f"admin:{STAFF_NAME}",
    "the staff user's name": lambda w: STAFF_NAME,
    "the entry's body": lambda w: ENTRY_BODY,
    "the entry version's link": lambda w: _href(_change("memoryentryversion", w.entry.pk)),
    "the revision's link": lambda w: _href(_change("artifactrevision", w.memory.pk)),
    "the memory's link": lambda w: _href(_change("artifact", w.memory.artifact_id)),
    "the profile's link": lambda w: _href(_change("artifact", w.candidate.artifact_id)),
    "the scope's link": lambda w: _href(_change("scope", w.scope.pk)),
    "the scope's title": lambda w: SCOPE_TITLE,
    "the references column": lambda w: "project:other, project:granted",
    "the artifact count column": lambda w: 'class="field-artifact_count"',
    # Searching by a key's name confirms the name: the entry is found (its row linked) only with view_apikey.
    "the entry found": lambda w: _href(_change("preparelog", w.log.pk)),
    # The inspector link carries the key: by name only with view_apikey (else by id).
    "the key's name in the inspector link": lambda w: urlencode({"api_key": f'"{KEY_NAME}"'}),
    "the grant added": lambda w: "→ project:granted: read",
    "the reference added": lambda w: "project:tenant → project:granted",
}
"""What of another model a page may show, as the (HTML-unescaped) page reads it."""

CASES = [
    # (page, the permissions the page needs, the related model's view permission, what only that permission shows)
    ("revision list", (REVISIONS,), KEYS, "an author naming the key"),
    ("revision list", (REVISIONS,), USERS, "an author naming the staff user"),
    ("memory revision page", (REVISIONS,), KEYS, "an author naming the key"),
    ("profile revision page", (REVISIONS,), USERS, "an author naming the staff user"),
    ("memory revision page", (REVISIONS,), ENTRY_VERSIONS, "the entry's body"),
    ("memory revision page", (REVISIONS,), ENTRY_VERSIONS, "the entry version's link"),
    ("memory revision page", (REVISIONS,), ARTIFACTS, "the memory's link"),
    ("entry version page", (ENTRY_VERSIONS,), ARTIFACTS, "the memory's link"),
    ("artifact page", (ARTIFACTS,), REVISIONS, "the revision's link"),
    ("artifact page", (ARTIFACTS,), SCOPES, "the scope's link"),
    ("candidate list", (CANDIDATES,), KEYS, "an author naming the key"),
    ("candidate page", (CANDIDATES,), KEYS, "an author naming the key"),
    ("candidate page", (CANDIDATES,), ARTIFACTS, "the profile's link"),
    ("scope list", (SCOPES,), REFERENCES, "the references column"),
    ("scope list", (SCOPES,), ARTIFACTS, "the artifact count column"),
    ("prepare log list", (LOG,), KEYS, "the key's name"),
    ("prepare log searched by the key's name", (LOG,), KEYS, "the entry found"),
    ("prepare log entry", (LOG,), KEYS, "the key's name"),
    ("prepare log entry", (LOG,), SCOPES, "the scope's link"),
    ("prepare log entry", (LOG, LOG_CONTENT), REVISIONS, "the revision's link"),
    ("prepare log entry", (LOG, LOG_CONTENT), ENTRY_VERSIONS, "the entry version's link"),
    ("prepare log entry", (LOG, LOG_CONTENT, INSPECTOR), KEYS, "the key's name in the inspector link"),
    ("inspector as the key", (INSPECTOR,), KEYS, "the key's name"),
    ("inspector as the key", (INSPECTOR,), SCOPES, "the scope's title"),
    ("inspector as the key", (INSPECTOR,), REVISIONS, "the revision's link"),
    ("inspector as the key", (INSPECTOR,), ENTRY_VERSIONS, "the entry version's link"),
    ("API key history", (KEYS,), USERS, "the staff user's name"),
    ("API key history", (KEYS,), GRANTS, "the grant added"),
    ("scope history", (SCOPES,), USERS, "the staff user's name"),
    ("scope history", (SCOPES,), REFERENCES, "the reference added"),
]
ROLES = ["the page's permissions only", "and the related model's view permission"]


def _case_id(case: tuple) -> str:
    page, _, related, shown = case
    return f"{page}: {shown} ({related})"


def _staff(*permissions: str):
    user = get_user_model().objects.create_user("reader", "reader@example.com", "pw-reader-1", is_staff=True)
    for name in permissions:
        app_label, codename = name.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return user


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_a_page_shows_a_related_models_data_only_with_its_view_permission(world, case, role):
    page, needs, related, shown = case
    related_held = role == ROLES[1]
    client = Client()
    client.force_login(_staff(*needs, *((related,) if related_held else ())))

    response = client.get(PAGES[page](world))

    assert response.status_code == 200
    assert (SHOWN[shown](world) in html.unescape(response.content.decode())) == related_held


@pytest.mark.parametrize(
    "case",
    [
        ("revision list", (REVISIONS,), KEYS),
        ("memory revision page", (REVISIONS,), KEYS),
        ("memory revision page", (REVISIONS,), ENTRY_VERSIONS),
        ("prepare log entry", (LOG,), KEYS),
        ("API key history", (KEYS,), GRANTS),
        ("API key history", (KEYS,), USERS),
    ],
    ids=lambda case: f"{case[0]} ({case[2]})",
)
def test_what_a_page_hides_it_says_which_permission_shows(world, case):
    page, needs, related = case
    client = Client()
    client.force_login(_staff(*needs))

    assert f"hidden: needs {related}" in html.unescape(client.get(PAGES[page](world)).content.decode())


@pytest.mark.parametrize("role", ROLES)
def test_the_revision_list_sorts_by_author_only_for_staff_who_read_every_author(world, role):
    # Sorted by author, the rows would be in the order of the names the column hides.
    client = Client()
    client.force_login(_staff(REVISIONS, *((KEYS, USERS) if role == ROLES[1] else ())))
    columns = client.get(_changelist("artifactrevision")).context["cl"].list_display
    [author] = [column for column in columns if getattr(column, "__name__", "") == "author_column"]

    assert getattr(author, "admin_order_field", None) == ("author" if role == ROLES[1] else None)
