"""A configured agent (GLOVE_AGENTS) as a mesh peer: `manage.py run_agent NAME --mesh-id ID`.

The agent's inbox is the DjangoStore session `mesh:<id>` (on every transport, so its history
and inbox survive restarts and show in the admin and the chat page). `run_agent` keeps the
peer on the mesh: it subscribes (Redis pub/sub; the database transport's delivery log) so
what arrives lands in that inbox, and each arrival *wakes* the peer: a wake-up turn is queued
on the turn queue (`Turn`, source "mesh") and a turn worker runs it like a chat turn: one
turn at a time per peer, retries, stop, the admin's listing, the per-user turn limit. The
worker mounts the mesh on the turn's agent for sending only (`receive=False`, in
`turns.single_turn`): `run_agent` stays the one receiver, so nothing is stored twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from asgiref.sync import sync_to_async

from gloveapp.agents.config import AgentSpec, configured_model, get_agent_spec
from gloveapp.conversations.services import DuplicateSession, session_create
from gloveapp.core.compaction import CompactionConfig
from gloveapp.core.glove import Glove
from gloveapp.lib.db.outages import Backoff, healing, retry_while_unreachable
from gloveapp.turns import selectors
from gloveapp.turns.models import MeshPeer
from gloveapp.turns.public import wake_mesh_peer_sync
from gloveapp.turns.submit import QueueFull, TurnLimitReached
from mesh.core import AgentIdentity, mount_mesh, unmount_mesh
from mesh.core.mount import MeshMount
from mesh.core.peer import WAKE_PROMPT, wait_for_arrival
from mesh.layers import get_mesh_transport
from mesh.services import mesh_session_id
from mesh.transports.database import mesh_store
from mesh.transports.inprocess import InProcessMeshTransport

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


# How long a peer whose wake-up was refused (turn limit, full queue) waits before trying
# again; its mail stays in the inbox meanwhile.
WAKE_RETRY_SECONDS = 5.0


def _register_peer(
    *, session_id: str, spec: AgentSpec, identity: AgentIdentity, transport_alias: str
) -> None:
    _ensure_session(session_id, spec.name)
    MeshPeer.objects.update_or_create(
        session_id=session_id,
        defaults={
            "mesh_id": identity.id,
            "transport": transport_alias,
            "name": identity.name,
            "description": identity.description,
            "capabilities": identity.capabilities,
        },
    )


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
    retry_delay: float = WAKE_RETRY_SECONDS,
) -> int:
    """Keep the peer on the mesh and queue a wake-up turn for what arrives, until `stop` is
    set (or `max_turns` wake-ups were queued and have run); returns the turns queued."""
    spec = get_agent_spec(agent_name)
    transport = get_mesh_transport(transport_alias)
    if isinstance(transport, InProcessMeshTransport):
        raise ValueError(
            "run_agent needs a mesh transport between processes (its turns run on a turn "
            "worker): set MESH_TRANSPORT=database or redis."
        )
    session_id = mesh_session_id(mesh_id)
    identity = AgentIdentity(
        id=mesh_id,
        name=spec.title,
        description=description or spec.title,
        capabilities=list(capabilities) or None,
    )
    register = sync_to_async(healing(_register_peer))
    await retry_while_unreachable(
        f"run_agent {mesh_id}",
        lambda: register(
            session_id=session_id, spec=spec, identity=identity, transport_alias=transport_alias
        ),
    )
    # This process only receives: the Glove is the mount's holder (inbox store, identity);
    # its turns run on a worker.
    glove = build_peer_glove(spec, mesh_id)
    mount = await mount_mesh(glove, adapter=transport.adapter(mesh_id), identity=identity)
    if await glove.store.get_resolved_inbox_items():
        mount.arrivals.set()  # mail that arrived while the peer was away (or was refused)
    if on_ready is not None:
        on_ready()
    try:
        queued = await _wake_on_arrivals(
            mount, session_id=session_id, max_turns=max_turns, stop=stop, retry_delay=retry_delay
        )
        if max_turns is not None and queued >= max_turns:
            await _wait_idle_or_stop(session_id, stop)
        return queued
    finally:
        # Stay registered: on a durable transport, messages sent while this peer is away
        # wait in its inbox.
        await unmount_mesh(glove, unregister=False)


async def _wake_on_arrivals(
    mount: MeshMount,
    *,
    session_id: str,
    max_turns: int | None,
    stop: asyncio.Event | None,
    retry_delay: float,
) -> int:
    loop = asyncio.get_running_loop()
    queued = 0
    wake = sync_to_async(healing(wake_mesh_peer_sync))
    backoff = Backoff(f"{session_id}: wake-up", log=logger)
    while max_turns is None or queued < max_turns:
        if not await wait_for_arrival(mount, stop):
            break
        try:
            woke = await wake(session_id=session_id, text=WAKE_PROMPT)
        except (TurnLimitReached, QueueFull) as refused:
            # Nothing is lost: the message is in the inbox already, and the next turn of
            # this peer reads it. Try again later, even if nothing else arrives.
            logger.warning(
                "%s: wake-up refused (%s); retrying in %ss", session_id, refused, retry_delay
            )
            loop.call_later(retry_delay, mount.arrivals.set)
            continue
        except Exception as error:
            # The database away (one line, a new connection after a backoff), or a bug
            # (logged whole): the mail waits in the inbox; try again.
            loop.call_later(backoff.failed(error), mount.arrivals.set)
            continue
        backoff.succeeded()
        if woke:
            queued += 1
    return queued


async def _wait_idle_or_stop(session_id: str, stop: asyncio.Event | None) -> None:
    # Stays subscribed while its last turn runs: on Redis, acks and replies to that turn
    # reach the peer only through this process.
    is_busy = sync_to_async(healing(selectors.is_busy))
    while await retry_while_unreachable(f"{session_id}: idle check", lambda: is_busy(session_id)):
        if stop is not None and stop.is_set():
            return
        await asyncio.sleep(0.05)
