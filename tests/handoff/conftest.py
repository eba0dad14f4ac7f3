from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from gloveapp.conversations.models import Message
from tests.fakes import obedient_model


@pytest.fixture
def obedient(settings):
    """The agent `obedient` (the context-obeying fake model), handing off to the baristas."""
    obedient_model.register()
    obedient_model.CALLS.clear()
    obedient_model.STARTED = asyncio.Event()
    obedient_model.RELEASE = None
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "obedient": {
            "factory": "tests.fakes.obedient_model.obedient_agent",
            "model": obedient_model.PROVIDER,
            "handoff": {"group": "baristas", "after_failed_turns": 2},
        },
    }
    return obedient_model


def _user(username: str, *, first_name: str = "", group: str = ""):
    """A user whose password is `pw-<username>-1`; staff in `group` when one is named."""
    user = get_user_model().objects.create_user(
        username, password=f"pw-{username}-1", first_name=first_name, is_staff=bool(group)
    )
    if group:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


@pytest.fixture
def customer(db):
    return _user("nora")


@pytest.fixture
def other_customer(db):
    return _user("olga")


@pytest.fixture
def bea(db):
    return _user("bea", first_name="Bea", group="baristas")


@pytest.fixture
def bo(db):
    return _user("bo", first_name="Bo", group="baristas")


@pytest.fixture
def roaster(db):
    """Staff of another group: an outsider to the baristas' chats."""
    return _user("rita", first_name="Rita", group="roasters")


def agent_messages(session_id: str, *, after: int = 0, upto: int | None = None) -> list[str]:
    """The texts of the agent's own messages (not a person's) in (after, upto]."""
    rows = Message.objects.filter(session_id=session_id, sender="agent", seq__gt=after)
    if upto is not None:
        rows = rows.filter(seq__lte=upto)
    return [row.text for row in rows.order_by("seq") if not (row.extra or {}).get("author")]
