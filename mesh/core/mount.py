"""`mount_mesh` / `unmount_mesh` (contract §9.4 and Decision 7).

Mounting subscribes the agent's inbox to its adapter, registers its identity and folds the
four mesh tools. Where this differs from glove-mesh (Decision 7):
- the message -> waiting-item map is derived from the store (`mesh:waiting:<id>` items); the
  in-memory map is only a cache, so an ack that arrives after the sender restarted still
  resolves its waiting item;
- an ack for a wait that is already resolved (a second ack, later acks of a blocking
  broadcast) arrives as an ordinary resolved inbox item instead of being dropped;
- mounting twice is harmless (the second mount is the first one), and `unmount_mesh`
  unsubscribes, unregisters and removes the tools.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from gloveapp.core.store import InboxTransitionError, supports_inbox
from gloveapp.core.types import InboxItem, epoch_ms, now_iso
from mesh.core.adapter import MeshAdapter, Unsubscribe
from mesh.core.errors import MeshStoreUnsupportedError
from mesh.core.tools import MESH_TOOL_NAMES, build_mesh_tools
from mesh.core.types import AgentIdentity, IncomingMeshMessage, MeshMessage, random_suffix

logger = logging.getLogger("mesh")

WAITING_PREFIX = "mesh:waiting:"
ACKNOWLEDGED = "acknowledged"
NAME_CACHE_SECONDS = 2.0


def from_tag(sender: str) -> str:
    return f"mesh:from:{sender}"


def broadcast_tag(sender: str) -> str:
    return f"mesh:broadcast:from:{sender}"


def waiting_tag(message_id: str) -> str:
    return f"{WAITING_PREFIX}{message_id}"


def new_mesh_item_id() -> str:
    return f"inbox_{epoch_ms()}_{random_suffix(8)}"


class MeshMount:
    """One agent's membership of the mesh: its handler, its tools and its waiting items."""

    def __init__(self, agent: Any, adapter: MeshAdapter, identity: AgentIdentity) -> None:
        self.agent = agent
        self.store = agent.store
        self.adapter = adapter
        self.identity = identity
        # message id -> waiting item id; a cache of what the store holds, never the truth.
        self._waiting: dict[str, str] = {}
        self._unsubscribe: Unsubscribe | None = None
        self._names: dict[str, tuple[float, str]] = {}
        # Set whenever something lands in the inbox that the agent should look at (a message,
        # a reply, a resolved wait); a peer runner waits on it to wake the agent.
        self.arrivals = asyncio.Event()
        self.tools = build_mesh_tools(self)

    # -- waiting items ---------------------------------------------------------------------
    async def add_waiting_item(self, message: MeshMessage, request: str) -> InboxItem:
        item = InboxItem(
            id=new_mesh_item_id(),
            tag=waiting_tag(message.id),
            request=request,
            response=None,
            status="pending",
            blocking=True,
            created_at=message.created_at,
        )
        await self.store.add_inbox_item(item)
        self._waiting[message.id] = item.id
        return item

    def forget_waiting(self, message_id: str) -> None:
        self._waiting.pop(message_id, None)

    async def _waiting_item_id(self, message_id: str) -> str | None:
        cached = self._waiting.get(message_id)
        if cached is not None:
            return cached
        finder = getattr(self.store, "find_inbox_item_by_tag", None)
        tag = waiting_tag(message_id)
        if callable(finder):
            item = await finder(tag)
            return item.id if item is not None else None
        for item in await self.store.get_inbox_items():
            if item.tag == tag:
                return item.id
        return None

    async def resolve_waiting(self, message_id: str, response: str) -> bool | None:
        """Resolve the wait for `message_id`: True if resolved now, False if it already was,
        None if this agent never waited on that message."""
        item_id = await self._waiting_item_id(message_id)
        if item_id is None:
            return None
        try:
            await self.store.update_inbox_item(
                item_id, {"status": "resolved", "response": response, "resolved_at": now_iso()}
            )
        except InboxTransitionError:
            # Another ack (or a reply) got there first; the guarded update makes it one winner.
            self.forget_waiting(message_id)
            return False
        self.forget_waiting(message_id)
        self.arrivals.set()
        return True

    # -- inbound -------------------------------------------------------------------------------
    async def peer_name(self, agent_id: str) -> str:
        # Names are only shown to the model, and every inbound message needs one: a name
        # read from the registry is reused for a few seconds (one round trip per message
        # would halve a networked transport's throughput).
        now = time.monotonic()
        known = self._names.get(agent_id)
        if known is not None and now - known[0] < NAME_CACHE_SECONDS:
            return known[1]
        try:
            peer = await self.adapter.get_agent(agent_id)
        except Exception:
            logger.exception(
                '[glove-mesh] adapter.getAgent("%s") threw \u2014 falling back to id:', agent_id
            )
            return agent_id
        if peer is None:
            return agent_id
        self._names[agent_id] = (now, peer.name)
        return peer.name

    async def handle(self, message: IncomingMeshMessage) -> None:
        try:
            if message.kind == "ack":
                await self._on_ack(message)
            else:
                await self._on_message(message)
        except Exception:
            logger.exception("[glove-mesh] inbound handler failed:")

    async def _on_ack(self, message: IncomingMeshMessage) -> None:
        if not message.ack_of:
            return
        response = message.ack_note or ACKNOWLEDGED
        outcome = await self.resolve_waiting(message.ack_of, response)
        if outcome is False:
            # The wait was already over (a second ack, later acks of a blocking broadcast):
            # surfaced as an ordinary inbox item, as glove-mesh's docs promise.
            peer = await self.peer_name(message.from_)
            await self._add_resolved(
                tag=from_tag(message.from_),
                request=(
                    f'Acknowledgement from "{peer}" ({message.from_}) of message '
                    f"{message.ack_of} [message id: {message.id}]"
                ),
                response=response,
                created_at=message.created_at,
            )

    async def _on_message(self, message: IncomingMeshMessage) -> None:
        peer = await self.peer_name(message.from_)
        if message.kind == "broadcast":
            tag = broadcast_tag(message.from_)
            request = f'Broadcast from "{peer}" ({message.from_}) [message id: {message.id}]'
        else:
            tag = from_tag(message.from_)
            request = f'Message from "{peer}" ({message.from_}) [message id: {message.id}]'
        if message.in_reply_to:
            request += f" (replying to {message.in_reply_to})"
        await self._add_resolved(
            tag=tag, request=request, response=message.content, created_at=message.created_at
        )
        if message.kind == "direct" and message.in_reply_to:
            # Reply implies ack: the reply item is stored first, then the wait is resolved.
            await self.resolve_waiting(message.in_reply_to, message.content)

    async def _add_resolved(
        self, *, tag: str, request: str, response: str, created_at: str
    ) -> None:
        await self.store.add_inbox_item(
            InboxItem(
                id=new_mesh_item_id(),
                tag=tag,
                request=request,
                response=response,
                status="resolved",
                blocking=False,
                created_at=created_at,
                resolved_at=now_iso(),
            )
        )
        self.arrivals.set()

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        # Subscribe before registering, so nothing sent to a freshly listed agent is missed.
        self._unsubscribe = await self.adapter.subscribe(self.handle)
        await self.adapter.register(self.identity)
        for tool in self.tools:
            self.agent.fold(tool)

    async def stop(self) -> None:
        for name in MESH_TOOL_NAMES:
            self.agent.unfold(name)
        if self._unsubscribe is not None:
            await self._unsubscribe()
            self._unsubscribe = None
        await self.adapter.unregister()


_mounts: weakref.WeakKeyDictionary[Any, MeshMount] = weakref.WeakKeyDictionary()


async def mount_mesh(agent: Any, *, adapter: MeshAdapter, identity: AgentIdentity) -> MeshMount:
    """Put `agent` (a `Glove`) on the mesh through `adapter` as `identity`.

    Raises `MeshStoreUnsupportedError` if the agent's store has no inbox. Mounting an agent
    that is already mounted with the same adapter and identity returns the existing mount;
    with a different adapter or identity, the old mount is replaced.
    """
    if not supports_inbox(agent.store):
        raise MeshStoreUnsupportedError()
    current = _mounts.get(agent)
    if current is not None:
        if current.adapter is adapter and current.identity == identity:
            return current
        await unmount_mesh(agent)
    mount = MeshMount(agent, adapter, identity)
    await mount.start()
    _mounts[agent] = mount
    return mount


async def unmount_mesh(agent: Any) -> bool:
    """Take `agent` off the mesh; returns False if it was not mounted."""
    mount = _mounts.pop(agent, None)
    if mount is None:
        return False
    await mount.stop()
    return True


def mesh_mount_of(agent: Any) -> MeshMount | None:
    return _mounts.get(agent)
