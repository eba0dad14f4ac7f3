"""The demo over the mesh: a customer asks Brew to check with the roastery, a roastery peer
answers, and Brew passes the answer on; offline demo model, database transport."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.contrib.auth import get_user_model
from django.db import connections

from gloveapp.conversations.services import session_create
from gloveapp.ormstore.store import DjangoStore
from gloveapp.turns import public as turns
from gloveapp.turns.mesh_peer import run_mesh_peer
from mesh.layers import get_mesh_transport, mesh_transports
from tests.mesh.support import eventually, items

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def chat_mesh(settings):
    settings.MESH = {
        "default": {
            "BACKEND": "mesh.transports.database.DatabaseMeshTransport",
            "CONFIG": {"poll_interval": 0.01},
        }
    }
    settings.GLOVE_CHAT_MESH = True
    settings.GLOVE_MODEL = ""  # the offline demo model
    mesh_transports.reset()
    yield
    mesh_transports.reset()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


async def test_brew_asks_the_roastery_over_the_mesh_and_relays_its_answer(chat_mesh, turn_worker):
    customer = await sync_to_async(get_user_model().objects.create_user)("carla", password="x")
    session = await sync_to_async(session_create)(owner=customer, agent_name="coffee")
    roastery = asyncio.create_task(
        run_mesh_peer(
            agent_name="roastery", mesh_id="roastery", capabilities=["stock"], max_turns=1
        )
    )
    registry = get_mesh_transport().adapter("test")
    await eventually(lambda: registry.get_agent("roastery"))

    await turns.submit_message(session_id=session.pk, text="Please ask the roastery about Kenya AA")
    await turns.wait_until_idle(session.pk)
    assert await asyncio.wait_for(roastery, 30) == 1

    chat = DjangoStore(session.pk)
    [reply] = await eventually(lambda: items(chat, tag="mesh:from:roastery"))
    assert reply.response.startswith("Roastery here: ")
    assert "bags of Kenya AA are in stock." in reply.response
    [waited] = [i for i in await chat.get_inbox_items() if i.tag.startswith("mesh:waiting:")]
    assert (waited.status, waited.response) == ("resolved", reply.response)

    await turns.submit_message(session_id=session.pk, text="Any news?")
    await turns.wait_until_idle(session.pk)
    said = [m.text for m in await chat.get_messages() if m.sender == "agent"]
    assert any("I'll ask the roastery about Kenya AA." in text for text in said)
    assert said[-1].count("Roastery here: ") == 1  # the reply and the resolved wait, said once
