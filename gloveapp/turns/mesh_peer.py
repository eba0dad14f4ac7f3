"""A configured agent (GLOVE_AGENTS) as a mesh peer: `manage.py run_agent NAME --mesh-id ID`.

The agent's inbox is the DjangoStore session `mesh:<id>` (on every transport, so its history
and inbox survive restarts and show in the admin and the chat page). It mounts the mesh with
the configured transport, and each time something arrives it runs one turn: `run_turn` below
is the single call that starts a turn, so the turn engine can be switched in one place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from gloveapp.agents.config import AgentSpec, configured_model, get_agent_spec
from gloveapp.conversations.services import DuplicateSession, session_create
from gloveapp.core.compaction import CompactionConfig
from gloveapp.core.glove import Glove
from mesh.core import AgentIdentity, mount_mesh, unmount_mesh
from mesh.core.peer import WAKE_PROMPT, serve_mesh_peer
from mesh.layers import get_mesh_transport
from mesh.services import mesh_session_id
from mesh.transports.database import DatabaseMeshTransport, mesh_store

logger = logging.getLogger(__name__)


def _ensure_session(session_id: str, agent_name: str) -> None:
    try:
        session_create(
            session_id=session_id, agent_name=agent_name, title=f"Mesh inbox of {agent_name}"
        )
    except DuplicateSession:
        pass


def build_peer_glove(spec: AgentSpec, mesh_id: str) -> Glove:
    glove = Glove(
        store=mesh_store(mesh_id),
        model=configured_model(agent=spec.name),
        system_prompt=spec.system_prompt,
        compaction_config=CompactionConfig(compaction_instructions=spec.compaction_instructions),
    )
    for tool in spec.tools:
        glove.fold(tool)
    return glove.build()


def chat_mesh_id(session_id: str) -> str:
    return f"chat-{session_id}"


async def join_chat_mesh(
    glove: Glove, *, session_id: str, spec: AgentSpec
) -> Callable[[], Awaitable[Any]] | None:
    """Put a chat turn's agent on the mesh (GLOVE_CHAT_MESH); returns how to leave again.

    Only on the database transport: a peer's reply must reach the chat while no turn runs,
    and there the sender's transaction writes it into the chat's inbox directly.
    """
    if not settings.GLOVE_CHAT_MESH:
        return None
    transport = get_mesh_transport()
    if not isinstance(transport, DatabaseMeshTransport):
        logger.warning("GLOVE_CHAT_MESH needs MESH_TRANSPORT=database; chats stay off the mesh")
        return None
    mesh_id = chat_mesh_id(session_id)
    identity = AgentIdentity(
        id=mesh_id,
        name=f"{spec.title} (chat)",
        description=f"A customer chat with {spec.title}.",
        capabilities=["chat"],
    )
    adapter = transport.adapter(mesh_id, inbox_session=session_id)
    await mount_mesh(glove, adapter=adapter, identity=identity)
    # Stays registered after the turn: a reply that comes later still finds the chat.
    return lambda: unmount_mesh(glove, unregister=False)


async def run_turn(glove: Glove) -> Any:
    """One turn of a woken peer (the single call to switch to another turn engine)."""
    return await glove.process_request(WAKE_PROMPT)


async def run_mesh_peer(
    *,
    agent_name: str,
    mesh_id: str,
    transport_alias: str = "default",
    description: str | None = None,
    capabilities: Sequence[str] = (),
    max_turns: int | None = None,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[], None] | None = None,
) -> int:
    """Serve until `stop` is set (or `max_turns` turns ran); returns the turns run."""
    spec = get_agent_spec(agent_name)
    await sync_to_async(_ensure_session)(mesh_session_id(mesh_id), spec.name)
    glove = build_peer_glove(spec, mesh_id)
    identity = AgentIdentity(
        id=mesh_id,
        name=spec.title,
        description=description or spec.title,
        capabilities=list(capabilities) or None,
    )
    transport = get_mesh_transport(transport_alias)
    mount = await mount_mesh(glove, adapter=transport.adapter(mesh_id), identity=identity)
    if on_ready is not None:
        on_ready()
    try:
        return await serve_mesh_peer(
            mount, turn=lambda: run_turn(glove), max_turns=max_turns, stop=stop
        )
    finally:
        # Stay registered: on a durable transport, messages sent while this peer is away
        # wait in its inbox.
        await unmount_mesh(glove, unregister=False)
