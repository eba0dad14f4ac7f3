"""`run_agent` runs a configured agent as a mesh peer; `mesh_agents` lists the registry."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from asgiref.sync import SyncToAsync
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections

from gloveapp.turns.mesh_peer import run_mesh_peer
from gloveapp.turns.models import Turn
from mesh.core import AgentIdentity, mount_mesh, unmount_mesh
from mesh.layers import get_mesh_transport, mesh_transports
from mesh.transports.database import mesh_store
from tests.core.support import calls
from tests.mesh.support import eventually, items, make_agent, quiet_period

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SHOP = AgentIdentity(id="shop", name="Brew", description="the coffee shop")


@pytest.fixture
def database_mesh(settings):
    settings.MESH = {
        "default": {
            "BACKEND": "mesh.transports.database.DatabaseMeshTransport",
            "CONFIG": {"poll_interval": 0.01},
        }
    }
    mesh_transports.reset()
    yield get_mesh_transport()
    mesh_transports.reset()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


async def test_run_agent_answers_a_question_that_waited_for_it(database_mesh, turn_worker):
    # The roastery ran before (it is registered) and is not running when the shop asks.
    await database_mesh.adapter("roastery").register(
        AgentIdentity(id="roastery", name="Roastery", description="roasts")
    )
    ask = calls(
        (
            "glove_mesh_send_message",
            {"to": "roastery", "content": "How much Kenya AA is left?", "blocking": True},
        )
    )
    shop, _, shop_store = make_agent("shop", [ask, "Asked the roastery."], store=mesh_store("shop"))
    await mount_mesh(shop, adapter=database_mesh.adapter("shop"), identity=SHOP)
    await shop.process_request("Ask the roastery about Kenya AA and wait")

    out = io.StringIO()
    await asyncio.to_thread(
        call_command,
        "run_agent",
        "roastery",
        "--mesh-id",
        "roastery",
        "--capability",
        "stock",
        "--max-turns",
        "1",
        stdout=out,
    )
    assert "roastery: stopped after 1 turn(s)." in out.getvalue()
    # The wake-up ran on the turn worker, as a queued turn like a chat turn.
    turns = [t async for t in Turn.objects.filter(session_id="mesh:roastery")]
    assert [(t.source, t.status, t.worker_id) for t in turns] == [("mesh", "done", "test-worker")]
    [answered] = await eventually(lambda: items(shop_store, status="resolved", blocking=True))
    assert answered.response.startswith("Roastery here: ")
    assert "bags of Kenya AA are in stock." in answered.response
    [reply] = await items(shop_store, tag="mesh:from:roastery")
    assert reply.response == answered.response
    await unmount_mesh(shop)

    listing = io.StringIO()
    await asyncio.to_thread(call_command, "mesh_agents", "--json", stdout=listing)
    registered = {agent["id"]: agent for agent in json.loads(listing.getvalue())}
    assert registered["roastery"]["capabilities"] == ["stock"]  # still there when stopped
    assert registered["roastery"]["name"] == "Roastery"


def test_mesh_agents_says_when_nobody_is_registered(database_mesh):
    out = io.StringIO()
    call_command("mesh_agents", stdout=out)
    assert out.getvalue().strip() == "No agents are registered on the mesh."


def test_run_agent_refuses_an_unknown_agent_and_a_bad_id(database_mesh):
    with pytest.raises(CommandError, match="GLOVE_AGENTS"):
        call_command("run_agent", "nobody", "--mesh-id", "x", "--max-turns", "1")
    with pytest.raises(CommandError, match="--mesh-id"):
        call_command("run_agent", "roastery", "--mesh-id", "two words")


async def test_a_wake_up_refused_by_the_turn_limit_leaves_the_message_for_a_later_turn(
    database_mesh, turn_worker, settings
):
    settings.GLOVE_MESH_TURNS_PER_MINUTE = 0  # the roastery (owned by nobody) may not start any
    roastery = asyncio.create_task(
        run_mesh_peer(agent_name="roastery", mesh_id="roastery", max_turns=1, retry_delay=0.05)
    )
    await eventually(lambda: database_mesh.adapter("shop").get_agent("roastery"))
    ask = calls(
        ("glove_mesh_send_message", {"to": "roastery", "content": "Kenya AA left?"}),
    )
    shop, _, shop_store = make_agent("shop", [ask, "Asked."], store=mesh_store("shop"))
    await mount_mesh(shop, adapter=database_mesh.adapter("shop"), identity=SHOP)
    await shop.process_request("Ask the roastery about Kenya AA")

    await quiet_period()
    assert not await Turn.objects.filter(session_id="mesh:roastery").aexists()
    [waiting] = await items(mesh_store("roastery"))
    assert (waiting.status, waiting.response) == ("resolved", "Kenya AA left?")

    settings.GLOVE_MESH_TURNS_PER_MINUTE = 30  # the peer retries on its own
    assert await asyncio.wait_for(roastery, 30) == 1
    [read] = await items(mesh_store("roastery"))
    assert read.status == "consumed"
    [reply] = await eventually(lambda: items(shop_store, tag="mesh:from:roastery"))
    assert "bags of Kenya AA are in stock." in reply.response
    await unmount_mesh(shop)


async def test_run_agent_refuses_the_in_process_transport(settings):
    settings.MESH = None
    mesh_transports.reset()
    with pytest.raises(CommandError, match="MESH_TRANSPORT=database or redis"):
        await asyncio.to_thread(
            call_command, "run_agent", "roastery", "--mesh-id", "roastery", "--max-turns", "1"
        )
    mesh_transports.reset()


async def test_prune_mesh_forgets_old_senders_and_deleted_chats_and_keeps_the_rest():
    from datetime import timedelta

    from django.utils import timezone

    from gloveapp.conversations.models import Session
    from mesh.core import MeshMessage, MeshUnknownMessageError, new_message_id
    from mesh.models import MeshAgent, MeshSentMessage
    from mesh.transports.database import DatabaseMeshTransport
    from tests.mesh.support import A, B

    transport = DatabaseMeshTransport(poll_interval=0.01)
    shop, roastery = transport.adapter("a"), transport.adapter("b")
    await shop.register(A)
    await roastery.register(B)
    old, recent = new_message_id("a"), new_message_id("a")
    for message_id in (old, recent):
        await shop.send(MeshMessage(id=message_id, from_="a", to="b", content="hello"))
    for chat in ("chat-gone", "chat-kept"):
        await Session.objects.acreate(id=chat, key=chat)
        adapter = transport.adapter(f"chat:{chat}", inbox_session=chat)
        await adapter.register(AgentIdentity(id=f"chat:{chat}", name=chat, description=""))
    month_ago = timezone.now() - timedelta(days=40)
    await MeshSentMessage.objects.filter(message_id=old).aupdate(created_at=month_ago)
    await MeshAgent.objects.aupdate(registered_at=month_ago)
    await Session.objects.filter(id="chat-gone").adelete()
    out = io.StringIO()

    await SyncToAsync(call_command)("prune_mesh", stdout=out)

    assert out.getvalue().strip() == (
        "Deleted 1 sent message record(s), 0 delivery record(s) and 1 deleted chat "
        "registration(s) older than 30 day(s)."
    )
    with pytest.raises(MeshUnknownMessageError):
        await roastery.acknowledge(old, "too late")
    await roastery.acknowledge(recent, "on time")
    registered = await SyncToAsync(list)(MeshAgent.objects.values_list("agent_id", flat=True))
    assert sorted(registered) == ["a", "b", "chat:chat-kept"]
    await transport.close()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


def test_prune_mesh_refuses_a_non_positive_number_of_days():
    with pytest.raises(CommandError, match="--days must be a positive"):
        call_command("prune_mesh", "--days", "0")
