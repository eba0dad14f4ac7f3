from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from gloveapp.conversations.services import session_create
from tests.fakes import replay_model

# Customers' messages: a third ask about stock, a few mention a refund.
TEXTS = [
    ["hello", "is there stock of colombia?"],
    ["do you have stock of kenya?", "thanks"],
    ["I want a refund", "ok"],
    ["what is in stock of brazil?"],
    ["good morning"],
]


@pytest.fixture
def scripted_shop(settings):
    """The agent `shop` (tests/fakes/replay_model.py)."""
    replay_model.register()
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "shop": {"factory": "tests.fakes.replay_model.shop_agent", "model": "replay-test"},
    }
    return "shop"


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_superuser("sam", password="pw-sam-1")


@pytest.fixture
def customer(db):
    return get_user_model().objects.create_user("carla", password="pw-carla-1")


def recorded(customer, count: int) -> list[str]:
    """`count` recorded conversations of the shop agent; returns their ids."""
    ids = []
    for index in range(count):
        session = session_create(owner=customer, agent_name="shop", session_id=f"chat-{index}")
        replay_model.record(session.pk, TEXTS[index % len(TEXTS)])
        ids.append(session.pk)
    return ids


def mentions(ids: list[str], word: str) -> set[str]:
    return {
        session_id
        for index, session_id in enumerate(ids)
        if any(word in text for text in TEXTS[index % len(TEXTS)])
    }
