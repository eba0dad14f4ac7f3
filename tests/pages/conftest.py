"""Actors and a coffee session for the page tests."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from gloveapp.conversations.models import Session
from gloveapp.conversations.services import session_create

PASSWORD = "correct horse battery staple"


def _user(username: str, *, is_staff: bool = False):
    return get_user_model().objects.create_user(
        username=username, password=PASSWORD, is_staff=is_staff
    )


@pytest.fixture
def owner(db):
    return _user("olive")


@pytest.fixture
def other_user(db):
    return _user("oscar")


@pytest.fixture
def staff(db):
    return _user("stella", is_staff=True)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def owner_client(owner) -> Client:
    return client_for(owner)


@pytest.fixture
def session(owner) -> Session:
    return session_create(owner=owner, agent_name="coffee", title="Morning order")


HTMX = {"HTTP_HX_REQUEST": "true"}


def htmx_target(target: str) -> dict[str, str]:
    return {**HTMX, "HTTP_HX_TARGET": target}
