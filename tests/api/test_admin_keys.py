"""API keys in the admin: a revoked key is never deleted there (its row is what keeps it revoked), an active one is."""

from __future__ import annotations

import pytest
from django.urls import reverse

from artifacts import services
from artifacts.models import ApiKey
from tests.api.factories import make_key, make_key_object, make_scope, prepare

pytestmark = pytest.mark.django_db


def _revoked_and_active():
    scope = make_scope("project:keys")
    revoked, _ = make_key_object(read=[scope])
    services.api_key_revoke(api_key=revoked)
    active, _ = make_key_object(read=[scope])
    return ApiKey.objects.get(pk=revoked.pk), active


def test_a_revoked_key_offers_no_delete_page(admin_client):
    revoked, _ = _revoked_and_active()

    response = admin_client.get(reverse("admin:artifacts_apikey_delete", args=[revoked.pk]))

    assert response.status_code == 403
    assert ApiKey.objects.filter(pk=revoked.pk).exists()


def test_deleting_a_selection_with_a_revoked_key_is_refused_and_deletes_nothing(admin_client):
    revoked, active = _revoked_and_active()

    response = admin_client.post(
        reverse("admin:artifacts_apikey_changelist"),
        {"action": "delete_selected", "_selected_action": [revoked.pk, active.pk], "post": "yes"},
    )

    assert response.status_code == 403
    assert ApiKey.objects.filter(pk__in=[revoked.pk, active.pk]).count() == 2
    assert ApiKey.objects.get(pk=revoked.pk).revoked_at == revoked.revoked_at


def test_a_selection_of_active_keys_is_deleted(admin_client):
    _, active = _revoked_and_active()

    response = admin_client.post(
        reverse("admin:artifacts_apikey_changelist"),
        {"action": "delete_selected", "_selected_action": [active.pk], "post": "yes"},
    )

    assert response.status_code == 302
    assert not ApiKey.objects.filter(pk=active.pk).exists()


def test_a_key_revoked_in_the_admin_stays_refused_by_the_api(admin_client, client):
    scope = make_scope("project:keys")
    key = make_key(read=[scope])
    api_key = ApiKey.objects.get()
    admin_client.post(
        reverse("admin:artifacts_apikey_changelist"), {"action": "revoke_keys", "_selected_action": [api_key.pk]}
    )
    admin_client.post(
        reverse("admin:artifacts_apikey_changelist"),
        {"action": "delete_selected", "_selected_action": [api_key.pk], "post": "yes"},
    )

    assert prepare(client, key, scope_id="project:keys", query="anything").status_code == 401
    assert ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=False).exists()
