"""Turns run on the agent's published version from the next turn on, and every message
they store names it."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from gloveapp.conversations.models import Message
from gloveapp.conversations.services import session_create
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from gloveapp.versions.models import AgentPointer
from gloveapp.versions.services import version_draft, version_publish, version_rollback
from tests.fakes import replay_model

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.usefixtures("close_worker_connections", "turn_worker"),
]
REFUNDS = replay_model.PROMPT + '\nwhen "refund" reply "Refunds take 5 days."'


async def say(session_id: str, text: str) -> str:
    await turns.submit_message(session_id=session_id, text=text)
    await turns.wait_until_idle(session_id)
    return await sync_to_async(
        lambda: (
            Message.objects.filter(session_id=session_id, sender="agent")
            .order_by("-seq")
            .values_list("text", flat=True)
            .first()
        )
    )()


@sync_to_async
def publish(prompt: str, staff):
    version = version_draft(agent_name="shop", system_prompt=prompt, author=staff)
    version_publish(version=version, by=staff)
    return version


@sync_to_async
def versions_named(session_id: str) -> list[tuple[int, str, int | None]]:
    return list(
        Message.objects.filter(session_id=session_id)
        .order_by("seq")
        .values_list("seq", "sender", "agent_version_id")
    )


async def test_it_runs_the_next_turn_on_a_published_version_and_rolls_back(
    scripted_shop, staff, customer
):
    session = await sync_to_async(session_create)(owner=customer, agent_name="shop")
    assert await say(session.pk, "I want a refund") == "You said: I want a refund"
    first = await publish(replay_model.PROMPT, staff)
    changed = await publish(REFUNDS, staff)

    assert await say(session.pk, "a refund please") == "Refunds take 5 days."
    await sync_to_async(version_rollback)(agent_name="shop", by=staff)
    assert await say(session.pk, "a refund now") == "You said: a refund now"

    named = await versions_named(session.pk)
    assert [version for _, _, version in named] == [None, None, changed.pk, changed.pk] + [
        first.pk
    ] * 2
    turn_versions = await sync_to_async(
        lambda: list(Turn.objects.order_by("id").values_list("agent_version_id", flat=True))
    )()
    assert turn_versions == [None, changed.pk, first.pk]


async def test_it_names_the_version_of_every_message_with_a_tool_call(
    scripted_shop, staff, customer
):
    session = await sync_to_async(session_create)(owner=customer, agent_name="shop")
    version = await publish(replay_model.PROMPT, staff)

    assert await say(session.pk, "any stock of colombia?") == "colombia is in stock."

    named = await versions_named(session.pk)
    assert [sender for _, sender, _ in named] == ["user", "agent", "user", "agent"]
    assert {version_id for _, _, version_id in named} == {version.pk}


async def test_it_shows_the_version_in_the_staff_timeline_and_transcript(
    scripted_shop, staff, customer
):
    session = await sync_to_async(session_create)(owner=customer, agent_name="shop")
    await publish(REFUNDS, staff)
    await say(session.pk, "hello")
    client = AsyncClient()
    await client.aforce_login(staff)

    page = (await client.get(f"/admin/conversations/session/{session.pk}/change/")).content.decode()

    assert '<span class="timeline__version" data-version>shop v1</span>' in page
    assert '<span class="transcript__version" data-version>shop v1</span>' in page
    assert await sync_to_async(AgentPointer.objects.count)() == 1
