"""A scope's authority tier (seeds/003) is set by operators only: in the admin by staff holding
``artifacts.change_scope_authority``, recorded in the admin log; never by an API key; one of the tiers or null (the
default) by every path; and shown to keys in ``GET /v1/scopes`` as the effective tier. Each case runs on the current
engine (CI runs SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from artifacts import services
from artifacts.models import Scope
from artifacts.permissions import CHANGE_SCOPE_AUTHORITY
from tests.api.factories import auth, make_key
from vocabulary.authority import AUTHORITY_TIERS

pytestmark = pytest.mark.django_db

SUPERUSER = "superuser"
ROLES = {
    SUPERUSER: (),
    "scope-and-authority": (
        "artifacts.view_scope",
        "artifacts.add_scope",
        "artifacts.change_scope",
        CHANGE_SCOPE_AUTHORITY,
    ),
    "scope-only": ("artifacts.view_scope", "artifacts.add_scope", "artifacts.change_scope"),
    "authority-only": (CHANGE_SCOPE_AUTHORITY,),
    "no-permission": (),
}
MAY_SET = {SUPERUSER, "scope-and-authority"}
MAY_CHANGE = MAY_SET | {"scope-only"}


def as_role(role: str) -> Client:
    users = get_user_model().objects
    if role == SUPERUSER:
        user = users.create_superuser("root", "root@example.com", "pw-root-1")
    else:
        user = users.create_user(role, f"{role}@example.com", "pw-staff-1", is_staff=True)
        for name in ROLES[role]:
            app_label, codename = name.split(".")
            user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    client = Client()
    client.force_login(user)
    return client


def scope_form(title: str, **fields) -> dict:
    return {
        "title": title,
        "references-TOTAL_FORMS": "0",
        "references-INITIAL_FORMS": "0",
        "references-MIN_NUM_FORMS": "0",
        "references-MAX_NUM_FORMS": "64",
        **fields,
    }


@pytest.fixture
def scope():
    return services.scope_create(scope_id="project:tiered", title="Tiered")


def test_the_permission_exists_with_its_name():
    permission = Permission.objects.get(content_type__app_label="artifacts", codename="change_scope_authority")
    assert permission.name == "Can set a scope's authority tier (selection policy)"
    assert CHANGE_SCOPE_AUTHORITY == "artifacts.change_scope_authority"


@pytest.mark.parametrize("role", ROLES)
def test_the_change_page_offers_the_tier_only_to_staff_who_may_set_it(role, scope):
    page = as_role(role).get(reverse("admin:artifacts_scope_change", args=[scope.pk]))
    if role not in MAY_CHANGE:
        assert page.status_code == 403
        return
    assert page.status_code == 200
    text = page.content.decode()
    assert ('name="authority"' in text) == (role in MAY_SET)
    if role not in MAY_SET:
        assert "user_default (default)" in text  # shown read-only


@pytest.mark.parametrize("role", ROLES)
def test_only_staff_who_may_set_the_tier_change_it_and_the_admin_log_records_it(role, scope):
    response = as_role(role).post(
        reverse("admin:artifacts_scope_change", args=[scope.pk]),
        scope_form("Tiered, renamed", authority="current_turn"),
    )
    scope.refresh_from_db()
    if role not in MAY_CHANGE:
        assert response.status_code == 403
        assert (scope.title, scope.authority) == ("Tiered", None)
        return
    assert response.status_code == 302, response.content
    assert scope.title == "Tiered, renamed"
    assert scope.authority == ("current_turn" if role in MAY_SET else None)
    entry = LogEntry.objects.get(object_id=str(scope.pk))
    assert ("Authority" in entry.get_change_message()) == (role in MAY_SET)


@pytest.mark.parametrize("role", ["scope-and-authority", "scope-only"])
def test_a_new_scope_gets_a_tier_only_from_staff_who_may_set_it(role):
    form = scope_form("New", scope_id="project:new", authority="workspace_override")
    assert as_role(role).post(reverse("admin:artifacts_scope_add"), form).status_code == 302
    assert Scope.objects.get(scope_id="project:new").authority == ("workspace_override" if role in MAY_SET else None)


def test_the_tier_can_be_set_back_to_the_default(scope):
    client = as_role(SUPERUSER)
    url = reverse("admin:artifacts_scope_change", args=[scope.pk])
    assert client.post(url, scope_form("Tiered", authority="workspace_override")).status_code == 302
    assert client.post(url, scope_form("Tiered", authority="")).status_code == 302
    scope.refresh_from_db()
    assert scope.authority is None


def test_the_form_refuses_a_value_that_is_no_tier(scope):
    page = as_role(SUPERUSER).post(
        reverse("admin:artifacts_scope_change", args=[scope.pk]), scope_form("Tiered", authority="admin")
    )
    assert page.status_code == 200
    assert "Select a valid choice" in page.content.decode()
    scope.refresh_from_db()
    assert scope.authority is None


# --- the database: one of the tiers or null, by every path ------------------------------------------


def raw(sql: str, params=()) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.mark.parametrize("value", ["admin", "", "Current_Turn", "current_turn "])
def test_the_database_refuses_a_tier_that_is_not_one(scope, value):
    with pytest.raises(DatabaseError):
        raw("UPDATE artifacts_scope SET authority = %s WHERE id = %s", [value, scope.pk])
    with pytest.raises(DatabaseError):
        raw(
            "INSERT INTO artifacts_scope (scope_id, title, created_at, authority) VALUES ('project:raw', '', %s, %s)",
            [timezone.now(), value],
        )
    scope.authority = value
    with pytest.raises(DatabaseError), transaction.atomic():
        scope.save()
    assert list(Scope.objects.values_list("scope_id", "authority")) == [("project:tiered", None)]


def test_the_database_keeps_the_title_and_tier_changeable_and_the_id_not(scope):
    for tier in (*AUTHORITY_TIERS, None):
        raw("UPDATE artifacts_scope SET authority = %s, title = %s WHERE id = %s", [tier, f"t {tier}", scope.pk])
        scope.refresh_from_db()
        assert (scope.authority, scope.title) == (tier, f"t {tier}")
    with pytest.raises(DatabaseError):
        raw(
            "UPDATE artifacts_scope SET scope_id = 'project:moved', authority = 'current_turn' WHERE id = %s",
            [scope.pk],
        )


# --- API keys: read it, never write it ----------------------------------------------------------------


def test_the_scope_list_shows_each_scope_s_effective_tier(client):
    scopes = {tier: services.scope_create(scope_id=f"scope:{tier}") for tier in AUTHORITY_TIERS}
    unset = services.scope_create(scope_id="scope:unset")
    for tier, scope in scopes.items():
        Scope.objects.filter(pk=scope.pk).update(authority=tier)
    key = make_key(read=[*scopes.values(), unset])
    response = client.get("/v1/scopes", **auth(key))
    assert response.status_code == 200
    assert {s["scope_id"]: s["authority"] for s in response.json()["scopes"]} == {
        "scope:current_turn": "current_turn",
        "scope:workspace_override": "workspace_override",
        "scope:user_default": "user_default",
        "scope:unset": "user_default",
    }


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/memory/entries", {"entry_id": "e", "body": "b"}),
        ("/v1/experiences/revisions", {"artifact_id": "x", "body": "b"}),
        ("/v1/profile/candidates", {"body": "b"}),
    ],
)
def test_no_write_an_api_key_makes_can_set_a_tier(client, scope, path, body):
    key = make_key(read=[scope], write=[scope])
    payload = {"scope_id": scope.scope_id, **body, "authority": "current_turn"}
    response = client.post(path, payload, content_type="application/json", **auth(key))
    assert response.status_code == 422
    assert [f["path"] for f in response.json()["error"]["fields"]] == ["authority"]
    scope.refresh_from_db()
    assert scope.authority is None
    listed = client.get("/v1/scopes", {"authority": "current_turn"}, **auth(key))
    assert listed.status_code == 422
