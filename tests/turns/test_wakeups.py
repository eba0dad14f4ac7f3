"""How an answer reaches the worker running the turn, and turns on the RQ backend.

On PostgreSQL the answering transaction NOTIFYs and the worker LISTENs on a connection of
its own; a slow recheck (GLOVE_TURN_ANSWER_RECHECK_SECONDS) is the safety net for a lost
notification. (The answer given through another server process is in test_processes.py.)
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection

from gloveapp.conversations.models import Message
from gloveapp.conversations.services import session_create
from gloveapp.turns import claim, lifecycle, slots, submit, wakeups
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn, TurnSlot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def customer(transactional_db):
    return get_user_model().objects.create_user("nina", password="pw-nina-1")


@pytest.fixture
def session_id(customer) -> str:
    return session_create(owner=customer, agent_name="coffee", title="Brew").pk


@pytest.fixture
def only_notify(settings, requires_postgres):
    """No safety-net recheck within the test: only a NOTIFY can wake the waiting turn."""
    settings.GLOVE_TURN_ANSWER_RECHECK_SECONDS = 3600


@pytest.fixture
def quick_recheck(settings, requires_postgres):
    settings.GLOVE_TURN_ANSWER_RECHECK_SECONDS = 0.2


async def _until(predicate) -> None:
    while not await predicate():  # noqa: ASYNC110 (state in the database or the engine)
        await asyncio.sleep(0.01)


async def _checkout_prompt(session_id: str, engine) -> str:
    """Run a turn up to its permission prompt, with the worker listening; the slot id."""

    async def listening() -> bool:
        return engine.listening

    await _until(listening)
    await turns.submit_message(session_id=session_id, text="add Kenya AA")
    await turns.wait_until_idle(session_id)
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")

    async def prompted() -> bool:
        return bool(await sync_to_async(turns.visible_slots)(session_id))

    await _until(prompted)
    return (await sync_to_async(turns.visible_slots)(session_id))[0].id


async def _agent_texts(session_id: str) -> str:
    return " ".join(
        [
            text
            async for text in Message.objects.filter(session_id=session_id, sender="agent")
            .order_by("seq")
            .values_list("text", flat=True)
        ]
    )


async def test_an_answer_wakes_the_waiting_turn_by_notify(only_notify, session_id, turn_worker):
    slot_id = await _checkout_prompt(session_id, turn_worker)

    assert await turns.answer_slot(session_id=session_id, slot_id=slot_id, value="confirm")
    await turns.wait_until_idle(session_id)

    newest = await Turn.objects.filter(session_id=session_id).alast()
    assert newest.status == Turn.Status.DONE
    assert "Order #" in await _agent_texts(session_id)


async def test_it_stops_a_turn_waiting_on_a_prompt_while_listening(
    only_notify, session_id, turn_worker
):
    await _checkout_prompt(session_id, turn_worker)

    assert await turns.cancel(session_id)
    await turns.wait_until_idle(session_id)

    newest = await Turn.objects.filter(session_id=session_id).alast()
    assert newest.status == Turn.Status.CANCELLED


async def test_it_recovers_an_answer_whose_notification_was_lost(
    quick_recheck, session_id, turn_worker
):
    slot_id = await _checkout_prompt(session_id, turn_worker)
    turn_pk, slot = slot_id[1:].split("-", 1)

    # The answer lands without its NOTIFY (as if the notification were lost).
    answered = await TurnSlot.objects.filter(
        turn_id=int(turn_pk), slot_id=slot, status=TurnSlot.Status.OPEN
    ).aupdate(status=TurnSlot.Status.ANSWERED, answer={"value": "confirm"})
    await turns.wait_until_idle(session_id)

    assert answered == 1
    assert "Order #" in await _agent_texts(session_id)


def test_the_answering_transaction_notifies_the_turn_at_commit(
    requires_postgres, session_id, customer
):
    turn = submit.turn_submit(session_id=session_id, text="hi", user_id=customer.pk).turn
    claim.turn_claim_next(session_id=session_id, worker_id="w")
    TurnSlot.objects.create(
        turn=turn,
        session_id=session_id,
        slot_id="s1",
        renderer="permission_request",
        waits_for_answer=True,
        template="tools/permission_request.html",
    )
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {wakeups.TURNS_CHANNEL}")

        assert slots.slot_answer(session_id=session_id, public_id=f"t{turn.pk}-s1", value="once")
        assert lifecycle.turn_cancel(session_id=session_id)
        payloads = [n.payload for n in listener.notifies(timeout=5, stop_after=2)]

    assert payloads == [str(turn.pk), str(turn.pk)]


# -- the RQ backend --------------------------------------------------------------------------


@pytest.fixture
def rq_backend(settings, redis_url):
    settings.RQ_QUEUES = {"default": {"URL": redis_url}}
    settings.TASKS = {
        "default": {
            "BACKEND": "gloveapp.turns.queue.rq_backend.TurnsRQBackend",
            "QUEUES": ["default"],
        }
    }


async def test_it_runs_turns_in_order_on_the_rq_backend(rq_backend, session_id, turn_worker):
    from gloveapp.turns.queue.tasks import run_session_turns

    for text in ("hello", "show me the menu"):
        await turns.submit_message(session_id=session_id, text=text)
    await turns.wait_until_idle(session_id)
    # The backend's own record of a task the worker took.
    result = await sync_to_async(run_session_turns.enqueue)(session_id)

    async def finished() -> bool:
        await sync_to_async(result.refresh)()
        return result.status == "SUCCESSFUL"

    await _until(finished)

    users = [
        text
        async for text in Message.objects.filter(session_id=session_id, sender="user")
        .exclude(text="tool results")
        .order_by("seq")
        .values_list("text", flat=True)
    ]
    assert users == ["hello", "show me the menu"]
    statuses = [t.status async for t in Turn.objects.filter(session_id=session_id)]
    assert statuses == [Turn.Status.DONE, Turn.Status.DONE]
    assert result.worker_ids and not result.errors
