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

from mesh.core import AgentIdentity, mount_mesh, unmount_mesh
from mesh.layers import get_mesh_transport, mesh_transports
from mesh.transports.database import mesh_store
from tests.core.support import calls
from tests.mesh.support import eventually, items, make_agent

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


async def test_run_agent_answers_a_question_that_waited_for_it(database_mesh):
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
