"""Sessions, CSRF, users and messages serve the browser pages only: the admin keeps its protections, and
the API neither needs nor honours them (it authenticates every request by its Bearer key)."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.api.factories import auth, make_key, make_scope

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    return get_user_model().objects.create_superuser("operator", "op@example.com", "pw-operator-1")


def test_the_admin_login_still_refuses_a_post_without_its_csrf_token(staff):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/admin/login/", {"username": "operator", "password": "pw-operator-1"})
    assert response.status_code == 403


def test_the_admin_still_logs_in_with_a_session(client, staff):
    # Through the login form: django-axes checks every login against its request (client.login has none).
    response = client.post("/admin/login/", {"username": "operator", "password": "pw-operator-1", "next": "/admin/"})
    assert response.status_code == 302
    assert client.get("/admin/").status_code == 200


def test_an_admin_session_does_not_authenticate_the_api(client, staff):
    make_scope("project:demo")
    client.force_login(staff)
    body = {"scope_id": "project:demo", "query": "anything"}
    response = client.post("/v1/context/prepare", body, content_type="application/json")
    assert response.status_code == 401


def test_api_writes_need_no_csrf_token_and_set_no_cookie(db):
    scope = make_scope("project:demo")
    key = make_key(read=[scope], write=[scope])
    client = Client(enforce_csrf_checks=True)
    body = {"scope_id": "project:demo", "artifact_id": "x", "body": "lesson"}
    response = client.post("/v1/experiences/revisions", body, content_type="application/json", **auth(key))
    assert response.status_code == 201
    assert not response.cookies
