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

from gloveapp.core.store import InboxStore, InboxTransitionError, supports_inbox
from gloveapp.core.types import InboxItem, now_iso
from mesh.core.adapter import MeshAdapter, Unsubscribe
from mesh.core.errors import MeshStoreUnsupportedError
from mesh.core.inbound import (
    ack_response,
    broadcast_tag,
    from_tag,
    inbound_item,
    late_ack_item,
    waiting_item,
    waiting_tag,
)
from mesh.core.tools import MESH_TOOL_NAMES, build_mesh_tools
from mesh.core.types import AgentIdentity, IncomingMeshMessage, MeshMessage

__all__ = [
    "MeshMount",
    "broadcast_tag",
    "from_tag",
    "mesh_mount_of",
    "mount_mesh",
    "unmount_mesh",
    "waiting_tag",
]

logger = logging.getLogger("mesh")

NAME_CACHE_SECONDS = 2.0


class MeshMount:
    """One agent's membership of the mesh: its handler, its tools and its waiting items."""

    def __init__(
        self, agent: Any, adapter: MeshAdapter, identity: AgentIdentity, *, receive: bool = True
    ) -> None:
        self.agent = agent
        self.receive = receive
        # An inbox store: `mount_mesh` refuses any other (MeshStoreUnsupportedError).
        self.store: InboxStore = agent.store
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
        item = waiting_item(message.id, request, message.created_at)
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
            found: InboxItem | None = await finder(tag)
            return found.id if found is not None else None
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
        outcome = await self.resolve_waiting(message.ack_of, ack_response(message))
        if outcome is False:
            # The wait was already over (a second ack, later acks of a blocking broadcast):
            # surfaced as an ordinary inbox item, as glove-mesh's docs promise.
            await self._add(late_ack_item(message, await self.peer_name(message.from_)))

    async def _on_message(self, message: IncomingMeshMessage) -> None:
        await self._add(inbound_item(message, await self.peer_name(message.from_)))
        if message.kind == "direct" and message.in_reply_to:
            # Reply implies ack: the reply item is stored first, then the wait is resolved.
            await self.resolve_waiting(message.in_reply_to, message.content)

    async def _add(self, item: InboxItem) -> None:
        await self.store.add_inbox_item(item)
        self.arrivals.set()

    async def _on_stored(self, message: IncomingMeshMessage) -> None:
        # The transport already wrote the inbox (the database transport does it in the
        # sender's transaction): only wake the agent, if there is something to read (an ack
        # of a non-blocking send changes nothing).
        if await self.store.get_resolved_inbox_items():
            self.arrivals.set()

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        check_store = getattr(self.adapter, "check_store", None)
        if callable(check_store):
            check_store(self.store)
        if not self.receive:
            # The tools only: another process (a peer runner) receives for this agent and
            # keeps it registered; a second subscriber would store every message twice.
            for tool in self.tools:
                self.agent.fold(tool)
            return
        stored_by_transport = bool(getattr(self.adapter, "delivers_to_inbox", False))
        handler = self._on_stored if stored_by_transport else self.handle
        # Subscribe before registering, so nothing sent to a freshly listed agent is missed.
        self._unsubscribe = await self.adapter.subscribe(handler)
        if stored_by_transport and await self.store.get_resolved_inbox_items():
            self.arrivals.set()  # delivered while this agent was away
        await self.adapter.register(self.identity)
        for tool in self.tools:
            self.agent.fold(tool)

    async def stop(self, *, unregister: bool = True) -> None:
        for name in MESH_TOOL_NAMES:
            self.agent.unfold(name)
        if self._unsubscribe is not None:
            await self._unsubscribe()
            self._unsubscribe = None
        if unregister and self.receive:
            await self.adapter.unregister()


_mounts: weakref.WeakKeyDictionary[Any, MeshMount] = weakref.WeakKeyDictionary()


async def mount_mesh(
    agent: Any, *, adapter: MeshAdapter, identity: AgentIdentity, receive: bool = True
) -> MeshMount:
    """Put `agent` (a `Glove`) on the mesh through `adapter` as `identity`.

    Raises `MeshStoreUnsupportedError` if the agent's store has no inbox. Mounting an agent
    that is already mounted with the same adapter and identity returns the existing mount;
    with a different adapter or identity, the old mount is replaced. `receive=False` folds
    the tools without subscribing or registering: for a turn that runs in one process while
    another process receives the agent's messages into the same (shared) store.
    """
    if not supports_inbox(agent.store):
        raise MeshStoreUnsupportedError()
    current = _mounts.get(agent)
    if current is not None:
        if (
            current.adapter is adapter
            and current.identity == identity
            and current.receive == receive
        ):
            return current
        await unmount_mesh(agent)
    mount = MeshMount(agent, adapter, identity, receive=receive)
    await mount.start()
    _mounts[agent] = mount
    return mount


async def unmount_mesh(agent: Any, *, unregister: bool = True) -> bool:
    """Take `agent` off the mesh; returns False if it was not mounted.

    With `unregister=False` the agent stays listed: on a durable transport (the database)
    messages sent to it while it is away wait in its inbox until it comes back.
    """
    mount = _mounts.pop(agent, None)
    if mount is None:
        return False
    await mount.stop(unregister=unregister)
    return True


def mesh_mount_of(agent: Any) -> MeshMount | None:
    return _mounts.get(agent)
