"""SQLite: the processes of one machine wake each other (`gloveapp.lib.wake`) instead of polling.

An idle turn worker and an idle mesh recipient sleep (their safety-net recheck is set to an
hour here, so only a wake-up can be what moves them), and a stored message, an answered
prompt or a mesh delivery still reaches them at once.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction

from gloveapp.conversations.services import session_create
from gloveapp.lib import wake
from gloveapp.turns import public as turns
from gloveapp.turns.models import Turn
from tests.turns.test_wakeups import _agent_texts, _checkout_prompt

pytestmark = [pytest.mark.django_db(transaction=True)]
HOUR = 3600
# Bounds how long a broken test hangs; the wake-ups take milliseconds.
GIVE_UP = 30


@pytest.fixture
def requires_sqlite_file(transactional_db):
    if wake.wake_folder() is None:
        pytest.skip("wake-ups are for a SQLite file (PostgreSQL uses NOTIFY)")


@pytest.fixture
def no_polling(settings, requires_sqlite_file):
    """An hour between looks: only a wake-up can start or continue a turn in the test."""
    settings.GLOVE_TURN_ANSWER_RECHECK_SECONDS = HOUR


@pytest.fixture
def session_id(transactional_db) -> str:
    customer = get_user_model().objects.create_user("nina", password="pw-nina-1")
    return session_create(owner=customer, agent_name="coffee", title="Brew").pk


async def test_a_stored_message_wakes_the_idle_worker(no_polling, session_id, turn_worker):
    await _until_listening(turn_worker)
    # Stored the way another process (the web server) stores it: its own thread and
    # connection.
    submit = sync_to_async(_submit_elsewhere, thread_sensitive=False)

    await submit(session_id, "add Kenya AA")
    await asyncio.wait_for(turns.wait_until_idle(session_id), GIVE_UP)

    newest = await Turn.objects.filter(session_id=session_id).alast()
    assert newest.status == Turn.Status.DONE


async def test_an_answer_wakes_the_waiting_turn(no_polling, session_id, turn_worker):
    slot_id = await asyncio.wait_for(_checkout_prompt(session_id, turn_worker), GIVE_UP)

    assert await turns.answer_slot(session_id=session_id, slot_id=slot_id, value="confirm")
    await asyncio.wait_for(turns.wait_until_idle(session_id), GIVE_UP)

    assert "Order #" in await _agent_texts(session_id)


async def test_a_mesh_delivery_wakes_the_idle_recipient(requires_sqlite_file, monkeypatch):
    from mesh.core import MeshMessage, new_message_id
    from mesh.transports import database
    from tests.mesh.support import A, B

    monkeypatch.setattr(database, "WAKE_RECHECK_SECONDS", HOUR)
    transport = database.DatabaseMeshTransport(poll_interval=HOUR)
    shop, roastery = transport.adapter("a"), transport.adapter("b")
    await shop.register(A)
    await roastery.register(B)
    arrived: asyncio.Queue = asyncio.Queue()

    async def handler(message) -> None:
        await arrived.put(message.content)

    unsubscribe = await roastery.subscribe(handler)
    await asyncio.sleep(0.2)  # the recipient's first look is over: it sleeps now
    await shop.send(MeshMessage(id=new_message_id("a"), from_="a", to="b", content="restock?"))

    assert await asyncio.wait_for(arrived.get(), GIVE_UP) == "restock?"
    await unsubscribe()
    await transport.close()
    await sync_to_async(connections.close_all)()


async def test_a_rolled_back_write_wakes_nobody(requires_sqlite_file):
    woken: list[str] = []
    listener = wake.WakeListener("test", woken.append)
    assert listener.start()
    try:
        await sync_to_async(_wake_then_roll_back)()
        await sync_to_async(_wake_after_commit)()
        for _ in range(500):
            if woken:
                break
            await asyncio.sleep(0.01)
    finally:
        listener.close()

    assert woken == ["committed"]


def _submit_elsewhere(session_id: str, text: str) -> None:
    from asgiref.sync import async_to_sync

    try:
        async_to_sync(turns.submit_message)(
            session_id=session_id, text=text, user_id=get_user_model().objects.get().pk
        )
    finally:
        connection.close()


def _wake_then_roll_back() -> None:
    class RolledBack(Exception):
        pass

    try:
        with transaction.atomic():
            wake.wake_after_commit("test", "rolled back")
            raise RolledBack
    except RolledBack:
        pass


def _wake_after_commit() -> None:
    with transaction.atomic():
        wake.wake_after_commit("test", "committed")


async def _until_listening(engine) -> None:
    for _ in range(500):
        if engine.listening:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the worker never took up local wake-ups")
