"""Permission prompts answered once / always / deny, and what the pages hear while a turn runs."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from gloveapp.conversations.models import Message
from gloveapp.conversations.services import session_create
from gloveapp.demo.models import Order
from gloveapp.ormstore.store import DjangoStore
from gloveapp.turns import public as turns
from tests.demo.conftest import LiveListener, last_reply, next_slot, say

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SAVED_CARD = {"payment": "saved_card"}


async def checkout_with_card(session_id: str, permission: str | None) -> None:
    """Check out with the saved card, answering the permission prompt (if one shows)."""
    await say(session_id, "add Kenya AA")
    await turns.submit_message(session_id=session_id, text="checkout")
    slot = await next_slot(session_id)
    if permission is not None:
        assert slot.renderer == "permission_request"
        assert slot.template == "tools/permission_request.html"
        assert slot.input["toolName"] == "checkout"
        assert slot.input["toolInput"] == SAVED_CARD
        assert await turns.answer_slot(session_id=session_id, slot_id=slot.id, value=permission)
        if permission == "deny":
            await turns.wait_until_idle(session_id)
            return
        slot = await next_slot(session_id)
    assert slot.renderer == "checkout"
    await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="confirm")
    await turns.wait_until_idle(session_id)


async def orders(session_id: str) -> int:
    return await sync_to_async(Order.objects.filter(session_id=session_id).count)()


async def test_it_allows_once_without_remembering(session_id):
    await checkout_with_card(session_id, "once")

    assert await orders(session_id) == 1
    store = DjangoStore(session_id)
    assert await store.get_permission("checkout", SAVED_CARD) == "unset"
    await checkout_with_card(session_id, "once")  # asked again
    assert await orders(session_id) == 2


async def test_it_remembers_always_for_the_same_tool_and_input(session_id):
    await checkout_with_card(session_id, "always")

    store = DjangoStore(session_id)
    assert await store.get_permission("checkout", SAVED_CARD) == "granted"
    await checkout_with_card(session_id, None)  # straight to the confirmation
    assert await orders(session_id) == 2


async def test_it_remembers_deny_and_places_nothing(session_id):
    await checkout_with_card(session_id, "deny")

    assert await orders(session_id) == 0
    assert "You didn't allow that" in await last_reply(session_id)
    store = DjangoStore(session_id)
    assert await store.get_permission("checkout", SAVED_CARD) == "denied"
    await say(session_id, "checkout")  # refused at once, no prompt
    assert (await sync_to_async(turns.visible_slots)(session_id)) == []
    assert "You didn't allow that" in await last_reply(session_id)


async def test_it_does_not_ask_permission_to_pay_at_pickup(session_id):
    await say(session_id, "add Kenya AA")
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")

    slot = await next_slot(session_id)

    assert slot.renderer == "checkout"
    await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="cancel")
    await turns.wait_until_idle(session_id)


async def test_it_refuses_an_unknown_permission_answer(session_id):
    await say(session_id, "add Kenya AA")
    await turns.submit_message(session_id=session_id, text="checkout")
    slot = await next_slot(session_id)

    assert not await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="maybe")

    assert (await sync_to_async(turns.visible_slots)(session_id))[0].id == slot.id
    await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="deny")
    await turns.wait_until_idle(session_id)


def _stored_events(session_id: str) -> list[tuple[str, dict]]:
    from gloveapp.live.models import LiveEvent
    from gloveapp.live.streams import session_stream

    rows = LiveEvent.objects.filter(stream=session_stream(session_id)).order_by("id")
    return [(row.type, row.payload) for row in rows if not row.type.startswith("message.")]


async def test_it_streams_the_turn_to_the_session_group(session_id):
    async with LiveListener(session_id) as live:
        await turns.submit_message(session_id=session_id, text="show me the menu")
        events = await live.until("tool_use_result")
    await turns.wait_until_idle(session_id)

    types = [event_type for event_type, _ in events]
    assert "text_delta" in types
    assert types.index("tool_use") < types.index("tool_use_result")
    result = dict(events)["tool_use_result"]
    assert result["tool_name"] == "get_catalogue"
    assert result["result"]["renderData"]["coffees"]
    # The turn's own milestones are stored events: they reach pages in every process.
    stored = await sync_to_async(_stored_events)(session_id)
    stored_types = [event_type for event_type, _ in stored if event_type.startswith("turn.")]
    assert stored_types == ["turn.queued", "turn.started", "turn.finished"]
    assert dict(stored)["turn.finished"]["text"].startswith("That's our menu")


async def test_it_announces_slots_as_they_are_pushed_and_answered(session_id):
    await say(session_id, "add Kenya AA")
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")
    slot = await next_slot(session_id)
    await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="cancel")
    await turns.wait_until_idle(session_id)

    stored = await sync_to_async(_stored_events)(session_id)
    assert ("slot.pushed", {"slot_id": slot.id}) in stored
    assert ("slot.resolved", {"slot_id": slot.id}) in stored
    assert slot.template == "tools/coffee/checkout_slot.html"
    assert slot.waits_for_answer is True


async def test_it_reports_a_misconfigured_agent_and_still_runs_the_next_message(customer):
    session = await sync_to_async(session_create)(owner=customer, agent_name="espresso-bar")
    await turns.submit_message(session_id=session.pk, text="hello")
    await turns.wait_until_idle(session.pk)
    await turns.submit_message(session_id=session.pk, text="hello again")
    await turns.wait_until_idle(session.pk)

    stored = await sync_to_async(_stored_events)(session.pk)
    errors = [payload for kind, payload in stored if kind == "turn.error"]
    started = [payload["text"] for kind, payload in stored if kind == "turn.started"]
    assert "Unknown agent 'espresso-bar'" in errors[0]["message"]
    assert started == ["hello", "hello again"]


async def test_it_reports_a_model_without_its_key_and_writes_nothing(
    session_id, settings, monkeypatch
):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.GLOVE_MODEL = "anthropic:claude-sonnet-4-5"
    await turns.submit_message(session_id=session_id, text="hello")
    await turns.wait_until_idle(session_id)

    error = dict(await sync_to_async(_stored_events)(session_id))["turn.error"]
    assert "ANTHROPIC_API_KEY" in error["message"]
    assert await sync_to_async(Message.objects.filter(session_id=session_id).count)() == 0
