"""Waits on a person as spans (the SDK's in-memory exporter; tests/observe/test_traces.py
receives the same over OTLP from separate processes): a prompt the turn parked on waits from
its first push to its answer, naming who answered and where; an inbox item consumed by a turn
is a wait linked to the span of its resolution."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db.models import Sum

from gloveapp.conversations.services import session_create
from gloveapp.core.types import InboxItem as CoreInboxItem
from gloveapp.turns import public as turns
from gloveapp.turns.models import SessionUsage, Turn, TurnSlot
from inbox.services import inbox_item_add, inbox_item_resolve

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def finished(spans, prefix: str) -> list:
    return sorted(
        (span for span in spans.get_finished_spans() if span.name.startswith(prefix)),
        key=lambda span: span.start_time,
    )


async def open_slot(session_id: str, renderer: str) -> TurnSlot:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        slot = await TurnSlot.objects.filter(
            session_id=session_id, renderer=renderer, status="open", turn__status="waiting"
        ).afirst()
        if slot is not None:
            return slot
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {renderer} slot parked")


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_prompt_the_turn_parked_on_waits_from_its_push_to_its_answer(
    settings, spans, turn_worker
):
    settings.GLOVE_TURN_PARK_AFTER_SECONDS = 0
    ivy = await sync_to_async(get_user_model().objects.create_user)("ivy")
    session = await sync_to_async(session_create)(owner=ivy, agent_name="coffee")
    await turns.submit_message(session_id=session.pk, text="add 1 Colombia", user_id=ivy.pk)
    await turns.wait_until_idle(session.pk)

    await turns.submit_message(session_id=session.pk, text="checkout", user_id=ivy.pk)
    prompt = await open_slot(session.pk, "permission_request")
    await turns.answer_slot(
        session_id=session.pk,
        slot_id=f"t{prompt.turn_id}-{prompt.slot_id}",
        value={"decision": "approve"},
        by="ivy",
        via="page",
    )
    confirm = await open_slot(session.pk, "checkout")
    await turns.answer_slot(
        session_id=session.pk,
        slot_id=f"t{confirm.turn_id}-{confirm.slot_id}",
        value="confirm",
        by="ivy",
        via="page",
    )
    await turns.wait_until_idle(session.pk)

    turn = await Turn.objects.aget(pk=prompt.turn_id)
    assert turn.status == "done" and turn.resumes == 2
    agents = [
        span
        for span in finished(spans, "invoke_agent coffee")
        if span.attributes["glove.turn.id"] == turn.pk
    ]
    assert [a.attributes["glove.turn.status"] for a in agents] == ["parked", "parked", "done"]
    [wait] = finished(spans, "glove.wait permission_request")
    # Closed by the attempt that resumed after the answer; begun when the first one pushed it.
    assert wait.parent.span_id == agents[1].context.span_id
    assert wait.start_time == int(prompt.created_at.timestamp() * 1_000_000_000)
    assert wait.start_time < agents[1].start_time
    assert wait.attributes["glove.wait.decider"] == "ivy"
    assert wait.attributes["glove.wait.channel"] == "page"
    assert wait.attributes["glove.wait.outcome"] == "resolved"
    [slot_wait] = finished(spans, "glove.wait checkout")
    assert slot_wait.parent.span_id == agents[2].context.span_id

    # Each attempt that parked kept its tokens on the turn: all its model calls are counted.
    chats = [
        span
        for span in finished(spans, "chat ")
        if span.parent.span_id in {a.context.span_id for a in agents}
    ]
    assert sum(chat.attributes["gen_ai.usage.input_tokens"] for chat in chats) == turn.tokens_in
    assert sum(chat.attributes["gen_ai.usage.output_tokens"] for chat in chats) == turn.tokens_out
    # And on the session's usage, which its cost reads: every attempt's tokens, once.
    turns_total = await Turn.objects.filter(session_id=session.pk).aaggregate(
        tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out")
    )
    usage = await SessionUsage.objects.filter(session_id=session.pk).aaggregate(
        tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out")
    )
    assert usage == turns_total
    assert await SessionUsage.objects.filter(session_id=session.pk).acount() == 1  # "demo"


@pytest.mark.usefixtures("close_worker_connections")
async def test_a_consumed_inbox_item_is_a_wait_linked_to_the_span_that_resolved_it(
    spans, turn_worker
):
    jon = await sync_to_async(get_user_model().objects.create_user)("jon")
    sol = await sync_to_async(get_user_model().objects.create_user)("sol", is_staff=True)
    session = await sync_to_async(session_create)(owner=jon, agent_name="coffee")
    watch = CoreInboxItem(
        id="inbox_watch_1", tag="restock_watch", request="Notify when Yirgacheffe is back"
    )
    await sync_to_async(inbox_item_add)(session_id=session.pk, item=watch)
    # Outside any request (as a command or a cron job would): a trace of its own.
    await sync_to_async(inbox_item_resolve)(
        item_id="inbox_watch_1", response="Back on Monday.", resolved_by="command", user=sol
    )

    await turns.submit_message(session_id=session.pk, text="any news?", user_id=jon.pk)
    await turns.wait_until_idle(session.pk)

    [resolve] = finished(spans, "glove.inbox.resolve")
    [agent] = finished(spans, "invoke_agent coffee")
    [wait] = finished(spans, "glove.wait inbox")
    assert resolve.parent is None
    assert resolve.attributes["glove.wait.decider"] == "sol"
    assert wait.parent.span_id == agent.context.span_id
    assert [link.context.span_id for link in wait.links] == [resolve.context.span_id]
    assert wait.links[0].context.trace_id == resolve.context.trace_id != agent.context.trace_id
    assert wait.attributes["glove.inbox.item_id"] == "inbox_watch_1"
    assert wait.attributes["glove.wait.channel"] == "command"
    assert wait.attributes["glove.wait.decider"] == "sol"
    assert wait.end_time <= resolve.end_time
    assert wait.attributes["glove.wait.seconds"] == pytest.approx(
        (wait.end_time - wait.start_time) / 1e9, abs=1e-3
    )
