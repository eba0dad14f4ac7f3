"""Dismissing a slot, from the chat page or over REST: one path, Glove's `reject(slotId)`
(issue 33). The waiting tool fails and is run again, so it asks again with a fresh slot; a
dismissed permission prompt is a "no" for that call only."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from gloveapp.conversations.models import Session
from gloveapp.demo.models import Order
from gloveapp.ormstore.store import DjangoStore
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn, TurnSlot
from tests.demo.conftest import last_reply, next_slot, say

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class Customer:
    """The session's owner at the chat page and over REST, checking out."""

    def __init__(self, customer, session_id: str) -> None:
        self.page = Client()
        self.page.force_login(customer)
        self.api = APIClient()
        token = Token.objects.get_or_create(user=customer)[0]
        self.api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        self.key = Session.objects.get(pk=session_id).key

    async def post(self, slot_id: str, body: dict) -> int:
        url = f"/api/sessions/{self.key}/slots/{slot_id}"
        return (await sync_to_async(self.api.post)(url, body, format="json")).status_code


async def start_checkout(customer, session_id: str, text: str) -> tuple[Customer, turns.SlotView]:
    """A cart of Kenya AA checked out with `text`: the customer and the first prompt."""
    who = await sync_to_async(Customer)(customer, session_id)
    await say(session_id, "add Kenya AA")
    await turns.submit_message(session_id=session_id, text=text)
    return who, await next_slot(session_id)


async def parked_turn(session_id: str) -> None:
    """Until the turn waits parked: an answer that comes before the park goes on where the
    turn runs (`Park.ANSWERED`), which the parked case must not count on."""
    while True:
        if await Turn.objects.filter(session_id=session_id, status="waiting").aexists():
            return
        await asyncio.sleep(0.005)


async def fresh_slot(session_id: str, after: str) -> turns.SlotView:
    """The prompt the turn shows once `after` is gone (the re-run tool's new one)."""
    while True:
        slot = await next_slot(session_id)
        if slot.id != after:
            return slot


@pytest.mark.parametrize("parked", [False, True], ids=["running", "parked"])
async def test_a_dismissed_slot_asks_again_the_same_from_the_page_and_over_rest(
    customer, session_id, settings, parked
):
    if parked:  # the turn waits with no worker: the dismissal resumes it on the next attempt
        settings.GLOVE_TURN_PARK_AFTER_SECONDS = 0

    async def when_due() -> None:
        if parked:
            await parked_turn(session_id)

    who, first = await start_checkout(customer, session_id, "checkout, pay at pickup")
    assert first.renderer == "checkout"
    await when_due()
    assert await who.post(first.id, {"dismiss": True}) == 200
    # The tool failed on it and was run again: it asks again, in a slot of its own.
    second = await fresh_slot(session_id, after=first.id)
    assert second.renderer == "checkout"
    assert await who.post(first.id, {"dismiss": True}) == 409
    # The page's Dismiss button takes the same path.
    await when_due()
    closed = await sync_to_async(who.page.post)(
        f"/sessions/{who.key}/slots/{second.id}", {"dismiss": "true"}
    )
    assert closed.status_code == 303
    third = await fresh_slot(session_id, after=second.id)
    await when_due()
    assert await who.post(third.id, {"value": {"confirmed": True}}) == 200
    await turns.wait_until_idle(session_id)

    statuses = await sync_to_async(
        lambda: list(
            TurnSlot.objects.filter(session_id=session_id)
            .order_by("pk")
            .values_list("status", flat=True)
        )
    )()
    assert statuses == ["rejected", "rejected", "resolved"]
    turn = await Turn.objects.filter(session_id=session_id).order_by("pk").alast()
    # Parked, each answer put the turn back on the queue: three resumes, one order.
    assert turn.resumes == (3 if parked else 0)
    assert await sync_to_async(Order.objects.filter(session_id=session_id).count)() == 1
    assert "is placed" in await last_reply(session_id)


async def test_a_dismissed_permission_prompt_is_a_no_for_that_call_only(customer, session_id):
    who, prompt = await start_checkout(customer, session_id, "checkout")
    assert prompt.renderer == "permission_request"
    assert await who.post(prompt.id, {"dismiss": True}) == 200
    await turns.wait_until_idle(session_id)

    assert "You didn't allow that" in await last_reply(session_id)
    assert await DjangoStore(session_id).get_permission("checkout", {"payment": "saved_card"}) == (
        "unset"
    )
    assert await sync_to_async(Order.objects.filter(session_id=session_id).count)() == 0
