from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from gloveapp.conversations.services import session_create
from tests.approvals import agents


@pytest.fixture
def orders_agent(settings):
    agents.register()
    agents.RAN.clear()
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "orders": {"factory": "tests.approvals.agents.orders_agent", "model": "approvals-test"},
    }
    return agents


@pytest.fixture
def customer(db):
    return get_user_model().objects.create_user("nina", password="pw-nina-1")


@pytest.fixture
def barista(db):
    user = get_user_model().objects.create_user("bea", password="pw-bea-1", is_staff=True)
    user.groups.add(Group.objects.get_or_create(name="baristas")[0])
    return user


@pytest.fixture
def manager(db):
    user = get_user_model().objects.create_user("max", password="pw-max-1", is_staff=True)
    user.groups.add(Group.objects.get_or_create(name="managers")[0])
    return user


@pytest.fixture
def other_staff(db):
    return get_user_model().objects.create_user("otto", password="pw-otto-1", is_staff=True)


@pytest.fixture
def groups(db):
    return [Group.objects.get_or_create(name=name)[0] for name in ("baristas", "managers")]


@pytest.fixture
def session_id(customer, orders_agent, groups) -> str:
    return session_create(owner=customer, agent_name="orders", title="Order").pk
