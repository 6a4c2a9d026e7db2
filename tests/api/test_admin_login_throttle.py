"""Admin logins are throttled per username and client address (django-axes): a locked-out attempt hashes no
password, answers a clear 429 page, ends after the cool-off, follows the proxy's view of the client, and the
API never notices."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import MD5PasswordHasher
from django.utils import timezone

from tests.api.factories import add_memory, make_key, make_scope, prepare

pytestmark = pytest.mark.django_db
LOGIN = "/admin/login/"
PASSWORD = "pw-operator-1"


class CountingHasher(MD5PasswordHasher):
    """The test suite's fast hasher, counting every password it hashes or checks."""

    calls = 0

    def encode(self, password, salt):
        CountingHasher.calls += 1
        return super().encode(password, salt)


@pytest.fixture
def staff(settings):
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    settings.AXES_FAILURE_LIMIT = 3
    return get_user_model().objects.create_superuser("operator", "op@example.com", PASSWORD)


def _login(client, password: str, *, username: str = "operator", **headers):
    return client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"}, **headers)


def _fail_until_locked(client, **headers) -> None:
    for _ in range(2):
        response = _login(client, "wrong", **headers)
        assert response.status_code == 200 and "Please enter the correct username" in response.content.decode()
    assert _login(client, "wrong", **headers).status_code == 429  # the third failure locks the pair


def test_after_the_limit_even_the_right_password_is_refused_without_hashing_it(client, staff):
    _fail_until_locked(client)
    before = CountingHasher.calls
    for password in ("wrong", PASSWORD):
        response = _login(client, password)
        assert response.status_code == 429
        page = response.content.decode()
        assert "Login temporarily refused" in page and "15 minutes" in page
        assert response["Retry-After"] == "900"
    assert CountingHasher.calls == before
    assert "_auth_user_id" not in client.session


def test_a_nonexistent_username_is_locked_out_the_same_way(client, staff):
    _fail_until_locked(client, username="nobody")
    before = CountingHasher.calls
    assert _login(client, "wrong", username="nobody").status_code == 429
    assert CountingHasher.calls == before


def test_the_right_password_works_again_after_the_cool_off(client, staff, settings):
    _fail_until_locked(client)
    assert _login(client, PASSWORD).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1))
    response = _login(client, PASSWORD)
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_the_lockout_is_per_username_and_address(client, staff):
    _fail_until_locked(client, REMOTE_ADDR="198.51.100.7")
    assert _login(client, PASSWORD, REMOTE_ADDR="198.51.100.8").status_code == 302


def test_behind_the_proxy_the_address_it_saw_counts_not_what_the_client_claims(client, staff, settings):
    settings.POWERCONTEXT_TRUSTED_PROXIES = 1
    _fail_until_locked(client, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="10.9.9.9, 203.0.113.5")
    # The client rewrites its own part of the header: still the same address as the proxy saw it.
    claimed = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "10.1.1.1, 203.0.113.5"}
    assert _login(client, PASSWORD, **claimed).status_code == 429
    assert AccessAttempt.objects.get().ip_address == "203.0.113.5"
    # Another client behind the same proxy is not locked out.
    other = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.6"}
    assert _login(client, PASSWORD, **other).status_code == 302


def test_the_api_answers_as_usual_while_an_admin_login_is_locked_out(client, staff):
    demo = make_scope("project:demo")
    add_memory(demo, {"m1": "alpha note"})
    key = make_key(read=[demo])
    _fail_until_locked(client)
    response = prepare(client, key, query="alpha")
    assert response.status_code == 200 and "alpha note" in response.json()["content"]
