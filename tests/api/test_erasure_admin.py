"""Erasing from the admin (issue 51, item 3) as each role: only staff holding ``artifacts.erase_content`` reach the
erase pages (403 for everyone else, whatever else they may view or change), never an API key; the page asks for a
reason, and the logged prepares that showed the erased text say so on their page.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from artifacts import services
from artifacts.models import ArtifactRevision, Erasure, MemoryEntryVersion, PrepareLog, Scope
from tests.api.factories import add_experience, add_memory, auth, make_key, prepare

pytestmark = pytest.mark.django_db

SCOPE = "project:erasable-admin"
SECRET = "TENANTSECRET hunter2"
ERASE = "erase_content"
ROLES = {
    "no-permission": (),
    "view-and-change-everything-but-erase": (
        "view_memoryentryversion",
        "view_artifactrevision",
        "view_scope",
        "change_scope",
        "view_preparelog",
        "view_prepare_log_content",
    ),
    "erase-only": (ERASE,),
    "erase-and-view": (ERASE, "view_memoryentryversion", "view_artifactrevision", "view_scope"),
}
MAY_ERASE = {"erase-only", "erase-and-view", "superuser"}


@pytest.fixture
def world(db):
    scope = services.scope_create(scope_id=SCOPE)
    add_memory(scope, {"e1": f"the vault password is {SECRET}", "e2": "deploys run on fridays"})
    add_experience(scope, "exp-1", f"rotated {SECRET}")
    return scope


def staff(role: str) -> Client:
    model = get_user_model()
    if role == "superuser":
        user = model.objects.create_superuser("root", "root@example.com", "pw-root-1")
    else:
        user = model.objects.create_user(role, f"{role}@example.com", "pw-staff-1", is_staff=True)
        user.user_permissions.set(
            Permission.objects.filter(content_type__app_label="artifacts", codename__in=ROLES[role])
        )
    client = Client()
    client.force_login(user)
    return client


def targets() -> dict[str, tuple[str, int]]:
    """Each erasable admin page: (its erase URL name, the row's pk)."""
    return {
        "entry version": ("admin:artifacts_memoryentryversion_erase", MemoryEntryVersion.objects.get(entry_id="e1").pk),
        "revision": (
            "admin:artifacts_artifactrevision_erase",
            ArtifactRevision.objects.get(artifact__artifact_id="exp-1").pk,
        ),
        "scope": ("admin:artifacts_scope_erase", Scope.objects.get(scope_id=SCOPE).pk),
    }


@pytest.mark.parametrize("target", ["entry version", "revision", "scope"])
@pytest.mark.parametrize("role", [*ROLES, "superuser"])
def test_only_staff_holding_the_erase_permission_open_and_use_an_erase_page(world, role, target):
    client = staff(role)
    name, pk = targets()[target]
    url = reverse(name, args=[pk])

    page = client.get(url)
    posted = client.post(url, {"reason": "GDPR art. 17 request #9"})

    if role in MAY_ERASE:
        assert page.status_code == 200
        assert "reason" in page.content.decode() and SECRET not in page.content.decode()
        assert posted.status_code == 302
        record = Erasure.objects.get()
        assert (record.reason, record.erased_by) == (
            "GDPR art. 17 request #9",
            f"admin:{role if role != 'superuser' else 'root'}",
        )
    else:
        assert (page.status_code, posted.status_code) == (403, 403)
        assert not Erasure.objects.exists()
        assert MemoryEntryVersion.objects.get(entry_id="e1").body.endswith(SECRET)


def test_an_erase_page_refuses_a_post_without_a_reason_and_erases_nothing(world):
    name, pk = targets()["entry version"]

    response = staff("erase-only").post(reverse(name, args=[pk]), {"reason": ""})

    assert response.status_code == 200
    assert "This field is required" in response.content.decode()
    assert not Erasure.objects.exists()


def test_an_api_key_never_reaches_an_erase_page(world, client):
    key = make_key(read=[world], write=[world])
    name, pk = targets()["scope"]

    response = client.post(reverse(name, args=[pk]), {"reason": "by key"}, **auth(key))

    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not Erasure.objects.exists()


@pytest.mark.parametrize("role", ["view-and-change-everything-but-erase", "erase-and-view", "superuser"])
def test_the_erase_link_is_on_a_row_s_page_only_for_staff_who_may_erase(world, role):
    version = MemoryEntryVersion.objects.get(entry_id="e1")
    page = staff(role).get(reverse("admin:artifacts_memoryentryversion_change", args=[version.pk])).content.decode()

    erase_url = reverse("admin:artifacts_memoryentryversion_erase", args=[version.pk])
    assert (erase_url in page) == (role in MAY_ERASE)


def test_a_logged_prepare_that_showed_erased_text_says_so_on_its_page(world, client):
    key = make_key(read=[world])
    assert SECRET in prepare(client, key, scope_id=SCOPE, query="vault password hunter2").json()["content"]
    log = PrepareLog.objects.order_by("-pk").first()
    operator = staff("superuser")
    operator.post(reverse("admin:artifacts_scope_erase", args=[world.pk]), {"reason": "court order 12"})

    page = operator.get(reverse("admin:artifacts_preparelog_change", args=[log.pk])).content.decode()

    assert "Erased: this prepare showed content that was erased by erasure #1 (scope)" in page
    assert "court order 12" in page
    assert "hunter2" not in page
    assert "ALARM" not in page


def test_an_erased_revision_s_page_verifies_and_shows_no_text(world):
    operator = staff("superuser")
    revision = ArtifactRevision.objects.get(artifact__artifact_id="exp-1")
    operator.post(reverse("admin:artifacts_artifactrevision_erase", args=[revision.pk]), {"reason": "pasted secret"})

    page = operator.get(reverse("admin:artifacts_artifactrevision_change", args=[revision.pk])).content.decode()

    assert "verified" in page and "MISMATCH" not in page
    assert "hunter2" not in page


def test_no_one_adds_changes_or_deletes_an_erasure_record_in_the_admin(world):
    operator = staff("superuser")
    operator.post(reverse("admin:artifacts_scope_erase", args=[world.pk]), {"reason": "court order 12"})
    record = Erasure.objects.get()
    change = reverse("admin:artifacts_erasure_change", args=[record.pk])

    assert operator.get(reverse("admin:artifacts_erasure_add")).status_code == 403
    assert operator.post(reverse("admin:artifacts_erasure_delete", args=[record.pk])).status_code == 403
    assert operator.get(change).status_code == 200  # read only
    operator.post(change, {"reason": "nothing to see"})
    operator.post(
        reverse("admin:artifacts_erasure_changelist"),
        {"action": "delete_selected", "_selected_action": [record.pk], "post": "yes"},
    )

    assert list(Erasure.objects.values_list("pk", "reason")) == [(record.pk, "court order 12")]
