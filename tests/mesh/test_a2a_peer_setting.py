"""The `MESH_A2A_PEERS` setting, its checks and command refusals, and who may reach an A2A
peer on the database transport (a chat only if its entry says so; else as if it did not
exist). Nothing here talks to an A2A agent (tests/mesh/test_a2a_peers.py does)."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.contrib.auth import get_user_model
from django.core.checks import run_checks
from django.core.management import CommandError, call_command
from django.db import connections

from gloveapp.conversations.services import session_create
from gloveapp.ormstore.store import DjangoStore
from mesh.a2a import A2APeerConfig, card_identity
from mesh.a2a_peers import peer_config
from mesh.core import AgentIdentity, mount_mesh, unmount_mesh
from mesh.layers import InvalidMeshConfig, mesh_transports
from mesh.transports.database import DatabaseMeshTransport, mesh_store
from tests.mesh.support import call_tool, make_agent

CARD = "https://x.example/.well-known/agent-card.json"


def check_ids(settings, peers) -> list[tuple[str, str]]:
    settings.MESH_A2A_PEERS = peers
    return [
        (message.id, message.msg)
        for message in run_checks()
        if message.id and message.id.startswith("mesh.")
    ]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"card_url": CARD, "token": "s3cret"}, "secrets come from the environment only"),
        ({"card_url": "ftp://x.example/card"}, "must be the http(s) URL of the agent's card"),
        ({"card_url": CARD, "transport": "elsewhere"}, "names no transport of MESH"),
        ({"card_url": CARD, "colour": "blue"}, "unknown keys: colour"),
        ({"card_url": CARD, "timeout_seconds": 0}, "must be a positive number"),
        ({"card_url": CARD, "chats": "yes"}, "must be true or false"),
    ],
)
def test_a_bad_entry_is_a_system_check_error(settings, entry, expected):
    [(check, message)] = check_ids(settings, {"x": entry})
    assert check == "mesh.E003" and expected in message
    with pytest.raises(InvalidMeshConfig, match=re.escape(expected.split(":")[0])):
        peer_config("x")


def test_a_token_variable_that_is_not_set_is_a_warning_and_refused_at_start(settings, monkeypatch):
    monkeypatch.delenv("X_A2A_TOKEN", raising=False)
    entry = {"card_url": CARD, "token_env": "X_A2A_TOKEN"}
    assert check_ids(settings, {"x": entry}) == [
        ("mesh.W001", "MESH_A2A_PEERS['x']['token_env']: X_A2A_TOKEN is not set.")
    ]
    with pytest.raises(InvalidMeshConfig, match=r"X_A2A_TOKEN .* is not set"):
        peer_config("x")
    monkeypatch.setenv("X_A2A_TOKEN", "from-the-environment")
    config, alias = peer_config("x")
    assert (config.mesh_id, config.card_url, config.token, alias) == (
        "x",
        CARD,
        "from-the-environment",
        "default",
    )
    assert check_ids(settings, {"x": entry}) == []


def test_run_a2a_peers_refuses_an_unknown_name_and_the_in_process_transport(settings):
    settings.MESH_A2A_PEERS = {"x": {"card_url": CARD}}
    with pytest.raises(
        CommandError, match=re.escape("No A2A peer called 'nobody' in MESH_A2A_PEERS.")
    ):
        call_command("run_a2a_peers", "nobody")
    settings.MESH_A2A_PEERS = {}
    with pytest.raises(CommandError, match="configures no A2A peer"):
        call_command("run_a2a_peers")
    settings.MESH_A2A_PEERS = {"x": {"card_url": CARD}}
    settings.MESH = {"default": {"BACKEND": "mesh.transports.inprocess.InProcessMeshTransport"}}
    mesh_transports.reset()
    try:
        with pytest.raises(CommandError, match="needs a mesh transport between processes"):
            call_command("run_a2a_peers", "x")
    finally:
        mesh_transports.reset()


# -- who reaches it: chats only if its entry says so -------------------------------------------


def x_identity(*, chats: bool) -> AgentIdentity:
    from a2a.types import AgentCard, AgentSkill

    card = AgentCard(
        name="Agent X",
        description="Another team's agent.",
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes.", tags=["talk"])],
    )
    return card_identity(A2APeerConfig(mesh_id="x", card_url=CARD, chats=chats), card)


def test_the_card_becomes_the_mesh_identity():
    identity = x_identity(chats=False)
    assert (identity.id, identity.name, identity.capabilities) == (
        "x",
        "Agent X",
        ["a2a", "echo", "talk"],
    )
    assert identity.description == "Another team's agent. Skills: Echo: Echoes.."
    assert identity.metadata["a2a"]["chats"] is False


@pytest.fixture
async def database_mesh(settings):
    settings.MESH = {
        "default": {
            "BACKEND": "mesh.transports.database.DatabaseMeshTransport",
            "CONFIG": {"poll_interval": 0.01},
        }
    }
    mesh_transports.reset()
    transport = DatabaseMeshTransport(poll_interval=0.01)
    mounted: list = []
    yield transport, mounted
    for glove in mounted:
        await unmount_mesh(glove, unregister=False)
    mesh_transports.reset()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


async def chat_agent(transport, mounted):
    owner = await sync_to_async(get_user_model().objects.create_user)("ann", password="x")
    session = await sync_to_async(session_create)(owner=owner, agent_name="coffee")
    chat_id = f"chat-{session.pk}"
    glove, _, _ = make_agent(chat_id, store=DjangoStore(session.pk))
    identity = AgentIdentity(id=chat_id, name="A chat", description="", capabilities=["chat"])
    await mount_mesh(
        glove, adapter=transport.adapter(chat_id, inbox_session=session.pk), identity=identity
    )
    mounted.append(glove)
    return glove


async def server_agent(transport, mounted):
    glove, _, _ = make_agent("planner", store=mesh_store("planner"))
    identity = AgentIdentity(id="planner", name="Planner", description="")
    await mount_mesh(glove, adapter=transport.adapter("planner"), identity=identity)
    mounted.append(glove)
    return glove


async def send_to(glove, to: str):
    return await call_tool(
        glove, "glove_mesh_send_message", {"to": to, "content": "hello", "blocking": False}
    )


async def listed(glove) -> set[str]:
    result = await call_tool(glove, "glove_mesh_list_agents", {})
    return {agent["id"] for agent in result.data["agents"]}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
async def test_a_chat_reaches_an_a2a_peer_only_if_its_entry_opens_it_to_chats(database_mesh):
    transport, mounted = database_mesh
    await sync_to_async(session_create)(session_id="mesh:x", title="x")
    await transport.adapter("x").register(x_identity(chats=False))
    chat = await chat_agent(transport, mounted)
    planner = await server_agent(transport, mounted)

    assert "x" in await listed(planner)
    assert (await send_to(planner, "x")).status == "success"
    # To a chat, a closed A2A peer is an agent that does not exist.
    assert "x" not in await listed(chat)
    refused, nobody = await send_to(chat, "x"), await send_to(chat, "nobody")
    assert refused.status == nobody.status == "error"
    assert refused.message == nobody.message.replace("nobody", "x")

    await transport.adapter("x").register(x_identity(chats=True))
    assert "x" in await listed(chat)
    assert (await send_to(chat, "x")).status == "success"
