"""A turn waiting on a person is parked in the database: no worker, no lease, no slot.

The worker in the test's event loop (`turn_worker`) parks at once here
(GLOVE_TURN_PARK_AFTER_SECONDS = 0); the answer (a decision, a prompt's answer, a Stop)
puts the turn back on the queue and the next attempt continues it from the stored
conversation: the waiting call runs again and finds its answer, the model is not asked
again for the call, nothing is asked twice.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from gloveapp.approvals.models import ApprovalNotification, ApprovalRequest
from gloveapp.approvals.services import AlreadyDecided, approval_decide
from gloveapp.conversations.models import Message
from gloveapp.conversations.services import session_create
from gloveapp.core.approvals.decisions import Decision
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn, TurnSlot
from tests.turns import waiting_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

decide = sync_to_async(approval_decide)


@pytest.fixture
def waiter(settings):
    waiting_agent.register()
    waiting_agent.RAN.clear()
    waiting_agent.MODEL_CALLS.clear()
    settings.GLOVE_AGENTS = {
        **settings.GLOVE_AGENTS,
        "waiter": {"factory": "tests.turns.waiting_agent.waiter_agent", "model": "waiter-test"},
    }
    settings.GLOVE_TURN_PARK_AFTER_SECONDS = 0
    return waiting_agent


@pytest.fixture
def customer(transactional_db):
    return get_user_model().objects.create_user("nora", password="pw-nora-1")


@pytest.fixture
def barista(transactional_db):
    user = get_user_model().objects.create_user("bo", password="pw-bo-1", is_staff=True)
    user.groups.add(Group.objects.get_or_create(name="baristas")[0])
    return user


@pytest.fixture
def session_id(customer, waiter) -> str:
    return session_create(owner=customer, agent_name="waiter", title="Waiter").pk


async def _parked(session_id: str) -> Turn:
    for _ in range(3000):
        turn = await Turn.objects.filter(session_id=session_id, status="waiting").afirst()
        if turn is not None:
            return turn
        await asyncio.sleep(0.01)
    states = [t async for t in Turn.objects.filter(session_id=session_id).values("status")]
    raise AssertionError(f"the turn never parked: {states}")


async def _tool_results(session_id: str) -> list[dict]:
    results = []
    async for row in Message.objects.filter(session_id=session_id).order_by("seq"):
        results += [result["result"] for result in row.tool_results or []]
    return results


async def test_a_turn_waiting_for_a_barista_holds_no_worker_and_goes_on_once_approved(
    session_id, barista, waiter, turn_worker
):
    await turns.submit_message(session_id=session_id, text="order the usual")
    parked = await _parked(session_id)
    request = await ApprovalRequest.objects.aget(session_id=session_id)

    assert parked.worker_id == "" and parked.lease_until is None
    assert turn_worker.running == {}
    assert await sync_to_async(turns.is_busy)(session_id)
    assert request.status == "open"
    notified = await ApprovalNotification.objects.filter(request=request).acount()

    await decide(
        request_id=request.pk,
        decision=Decision("approve", request.fingerprint),
        user=barista,
        channel="page",
    )
    await turns.wait_until_idle(session_id)

    turn = await Turn.objects.aget(pk=parked.pk)
    assert turn.status == "done"
    assert (turn.attempts, turn.resumes) == (2, 1)
    assert not turn.retried
    assert waiter.RAN == [("place_order", waiting_agent.ORDER)]
    # The model was asked for the call once, and once for the reply after its result.
    assert waiter.MODEL_CALLS == ["order the usual", waiter.MODEL_CALLS[1]]
    [result] = await _tool_results(session_id)
    assert result["status"] == "success"
    assert await ApprovalRequest.objects.filter(session_id=session_id).acount() == 1
    assert await TurnSlot.objects.filter(turn_id=turn.pk).acount() == 1
    # No notification was queued again for the same request.
    assigned = ApprovalNotification.objects.filter(request=request, event="assigned")
    assert await assigned.acount() == notified


async def test_a_permission_prompt_answered_after_parking_runs_the_tool_once(
    session_id, customer, waiter, turn_worker
):
    await turns.submit_message(session_id=session_id, text="charge it")
    parked = await _parked(session_id)
    [slot] = await sync_to_async(turns.visible_slots)(session_id)

    assert await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="once")
    await turns.wait_until_idle(session_id)

    assert waiter.RAN == [("charge_card", 42)]
    assert (await Turn.objects.aget(pk=parked.pk)).status == "done"
    assert await TurnSlot.objects.filter(turn_id=parked.pk).acount() == 1


async def test_a_display_slot_answered_after_parking_continues_the_waiting_call(
    session_id, customer, waiter, turn_worker
):
    await turns.submit_message(session_id=session_id, text="confirm please")
    parked = await _parked(session_id)
    [slot] = await sync_to_async(turns.visible_slots)(session_id)
    assert slot.id == f"t{parked.pk}-slot_1"

    assert await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="confirm")
    await turns.wait_until_idle(session_id)

    # confirm_order is not retry_safe: it ran again only because it was waiting on a person.
    assert waiter.RAN == [("confirm_order", "confirm")]
    [result] = await _tool_results(session_id)
    assert result["data"] == {"confirmed": True}
    assert await TurnSlot.objects.filter(turn_id=parked.pk).acount() == 1


async def test_a_later_message_queues_behind_a_parked_turn(
    session_id, barista, waiter, turn_worker
):
    await turns.submit_message(session_id=session_id, text="order the usual")
    await _parked(session_id)
    ahead = await turns.submit_message(session_id=session_id, text="hi there")
    await asyncio.sleep(0.3)

    assert ahead == 1
    assert await Turn.objects.filter(session_id=session_id, status="queued").acount() == 1
    request = await ApprovalRequest.objects.aget(session_id=session_id)
    await decide(
        request_id=request.pk,
        decision=Decision("approve", request.fingerprint),
        user=barista,
        channel="page",
    )
    await turns.wait_until_idle(session_id)

    statuses = [t.status async for t in Turn.objects.filter(session_id=session_id)]
    assert statuses == ["done", "done"]
    texts = [m.text async for m in Message.objects.filter(session_id=session_id, sender="agent")]
    assert texts[-1] == "Hello: hi there"


async def test_stop_on_a_parked_turn_ends_it_and_withdraws_its_request(
    session_id, customer, barista, waiter, turn_worker
):
    await turns.submit_message(session_id=session_id, text="order the usual")
    parked = await _parked(session_id)
    request = await ApprovalRequest.objects.aget(session_id=session_id)

    assert await turns.cancel(session_id, user_id=customer.pk)
    await turns.wait_until_idle(session_id)

    turn = await Turn.objects.aget(pk=parked.pk)
    assert turn.status == "cancelled"
    assert (await ApprovalRequest.objects.aget(pk=request.pk)).status == "withdrawn"
    [result] = await _tool_results(session_id)
    assert result["status"] == "aborted"
    with pytest.raises(AlreadyDecided, match="withdrawn without a decision"):
        await decide(
            request_id=request.pk,
            decision=Decision("approve", request.fingerprint),
            user=barista,
            channel="rest",
        )
    assert waiter.RAN == []


async def test_a_quick_answer_goes_on_where_the_turn_runs(
    session_id, customer, waiter, settings, turn_worker
):
    settings.GLOVE_TURN_PARK_AFTER_SECONDS = 60
    await turns.submit_message(session_id=session_id, text="confirm please")
    for _ in range(3000):
        slots = await sync_to_async(turns.visible_slots)(session_id)
        if slots:
            break
        await asyncio.sleep(0.01)

    assert await turns.answer_slot(session_id=session_id, slot_id=slots[0].id, value="confirm")
    await turns.wait_until_idle(session_id)

    turn = await Turn.objects.filter(session_id=session_id).alast()
    assert (turn.status, turn.attempts, turn.resumes) == ("done", 1, 0)
    assert waiter.RAN == [("confirm_order", "confirm")]


async def test_a_stopping_worker_parks_a_turn_waiting_on_a_person_at_once(
    session_id, customer, waiter, settings, turn_worker
):
    from gloveapp.turns.engine import TurnEngine
    from gloveapp.turns.queue.fetch import fetcher_for_backend
    from gloveapp.turns.queue.tasks import enqueue_session

    settings.GLOVE_TURN_PARK_AFTER_SECONDS = 600
    await turns.submit_message(session_id=session_id, text="confirm please")
    for _ in range(3000):
        slots = await sync_to_async(turns.visible_slots)(session_id)
        if slots:
            break
        await asyncio.sleep(0.01)

    await turn_worker.stop(grace=5)
    parked = await Turn.objects.filter(session_id=session_id).alast()
    successor = TurnEngine(requeue=enqueue_session, worker_id="successor")
    serving = asyncio.ensure_future(successor.serve(fetch=fetcher_for_backend()))
    try:
        assert await turns.answer_slot(session_id=session_id, slot_id=slots[0].id, value="confirm")
        await turns.wait_until_idle(session_id)
    finally:
        await successor.stop(grace=5)
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving

    assert (parked.status, parked.worker_id) == ("waiting", "")
    turn = await Turn.objects.aget(pk=parked.pk)
    assert (turn.status, turn.worker_id, turn.resumes) == ("done", "successor", 1)
    assert waiter.RAN == [("confirm_order", "confirm")]
