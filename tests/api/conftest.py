"""Actors for the REST remote store: an owner, another user and an anonymous caller.

(The live server fixtures for the `RemoteStore` tests are in tests/conftest.py, shared
with the store contract tests.)"""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def _client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner")  # no password: hashing one costs seconds


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("other")


@pytest.fixture
def owner_client(owner) -> APIClient:
    return _client_for(owner)


@pytest.fixture
def other_client(other_user) -> APIClient:
    return _client_for(other_user)


@pytest.fixture
def anon_client(db) -> APIClient:
    return APIClient()


@pytest.fixture
def session_id(owner_client) -> str:
    """A session the owner created through the API."""
    response = owner_client.post(
        "/api/sessions", {"sessionId": "glove_owner_1", "title": "Coffee"}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()["sessionId"]
