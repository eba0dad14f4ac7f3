"""Helpers for driving the coffee agent through the turns' entry points, as a page would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model

from gloveapp.conversations.models import Message
from gloveapp.conversations.services import session_create
from gloveapp.live.groups import stream_group
from gloveapp.live.streams import session_stream
from gloveapp.turns import public as turns
from inbox.models import InboxItem


@pytest.fixture(autouse=True)
def _worker(close_worker_connections, turn_worker):
    return turn_worker


@pytest.fixture
def customer(transactional_db):
    return get_user_model().objects.create_user("customer")


@pytest.fixture
def staff(transactional_db):
    return get_user_model().objects.create_user("barista", is_staff=True, is_superuser=True)


@pytest.fixture
def session_id(customer) -> str:
    return session_create(owner=customer, agent_name="coffee", title="Brew").pk


async def say(session_id: str, text: str) -> None:
    """Send a message and wait for every queued turn to finish."""
    await turns.submit_message(session_id=session_id, text=text)
    await turns.wait_until_idle(session_id)


async def next_slot(session_id: str) -> turns.SlotView:
    """Wait (on the loop, not a clock) until the running turn shows a prompt."""
    while True:
        slots = await sync_to_async(turns.visible_slots)(session_id)
        if slots:
            return slots[-1]
        busy = await sync_to_async(turns.is_busy)(session_id)
        assert busy, "the turn ended without showing a prompt"
        await asyncio.sleep(0.005)


def _agent_texts(session_id: str) -> list[str]:
    return [
        text
        for text in Message.objects.filter(session_id=session_id, sender="agent")
        .order_by("seq")
        .values_list("text", flat=True)
        if text
    ]


async def last_reply(session_id: str) -> str:
    texts = await sync_to_async(_agent_texts)(session_id)
    return texts[-1] if texts else ""


def _user_texts(session_id: str) -> list[str]:
    return list(
        Message.objects.filter(session_id=session_id, sender="user", framework_context=None)
        .exclude(text="tool results")
        .order_by("seq")
        .values_list("text", flat=True)
    )


async def user_texts(session_id: str) -> list[str]:
    return await sync_to_async(_user_texts)(session_id)


async def inbox_items(session_id: str) -> list[InboxItem]:
    return await sync_to_async(list)(InboxItem.objects.filter(session_id=session_id))


class LiveListener:
    """Joins the session's transient group on the real channel layer, as a socket would."""

    def __init__(self, session_id: str) -> None:
        self.layer = get_channel_layer()
        self.group = stream_group(session_stream(session_id))
        self.channel = ""

    async def __aenter__(self) -> LiveListener:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.layer.group_discard(self.group, self.channel)

    async def until(self, event_type: str) -> list[tuple[str, dict[str, Any]]]:
        """Every event up to and including the first `event_type`."""
        seen = []
        while True:
            message = await self.layer.receive(self.channel)
            seen.append((message["event"], message["payload"]))
            if message["event"] == event_type:
                return seen
