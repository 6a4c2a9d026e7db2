"""Fixtures shared by the API and admin tests."""

import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def staff_client(client, db):
    """The Django test client logged in as a superuser (the operator)."""
    user = get_user_model().objects.create_superuser("operator", "op@example.com", "pw-operator-1")
    client.force_login(user)
    return client
