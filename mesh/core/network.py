"""The in-process mesh (contract §9.3): `MeshNetwork` + `InMemoryMeshAdapter`.

Delivery is synchronous: the sender's `send` returns after every handler of the recipient has
run. The sender table (message id -> sender, for routing acks) is an LRU by insertion like
glove-mesh's; the mount side does not depend on it across restarts (the waiting items live in
the store), but an in-process network is gone after a restart anyway.

Messages go through their wire form (a dict) between agents, so signing and access rules are
checked exactly as on the other transports.
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from typing import Any

from mesh.core.adapter import MeshHandler, Unsubscribe
from mesh.core.errors import MeshAccessDeniedError, MeshUnknownAgentError, MeshUnknownMessageError
from mesh.core.security import OPEN_GUARD, MeshGuard
from mesh.core.types import AgentIdentity, IncomingMeshMessage, MeshMessage, build_ack

logger = logging.getLogger("mesh")

MISSING_TO = "(missing `to` field)"


class MeshNetwork:
    def __init__(
        self, *, sender_table_capacity: int = 1024, guard: MeshGuard | None = None
    ) -> None:
        self.sender_table_capacity = sender_table_capacity
        self.guard = guard or OPEN_GUARD
        self._agents: dict[str, AgentIdentity] = {}
        self._handlers: dict[str, list[MeshHandler]] = {}
        self._senders: OrderedDict[str, str] = OrderedDict()

    # -- registry --------------------------------------------------------------------------
    def register_agent(self, identity: AgentIdentity) -> None:
        self._agents[identity.id] = identity
        self._handlers.setdefault(identity.id, [])

    def unregister_agent(self, agent_id: str) -> None:
        self._agents.pop(agent_id, None)
        self._handlers.pop(agent_id, None)

    def list_agents(self) -> list[AgentIdentity]:
        return list(self._agents.values())

    def get_agent(self, agent_id: str) -> AgentIdentity | None:
        return self._agents.get(agent_id)

    def attach_handler(self, agent_id: str, handler: MeshHandler) -> None:
        self._handlers.setdefault(agent_id, []).append(handler)

    def detach_handler(self, agent_id: str, handler: MeshHandler) -> None:
        handlers = self._handlers.get(agent_id)
        if handlers and handler in handlers:
            handlers.remove(handler)

    # -- sender table ----------------------------------------------------------------------
    def record_sender(self, message_id: str, sender: str) -> None:
        self._senders.pop(message_id, None)
        self._senders[message_id] = sender
        while len(self._senders) > self.sender_table_capacity:
            self._senders.popitem(last=False)

    def lookup_sender(self, message_id: str) -> str | None:
        return self._senders.get(message_id)  # lookups do not refresh recency, as in glove-mesh

    # -- delivery ------------------------------------------------------------------------------
    async def deliver_direct(self, message: MeshMessage) -> None:
        self.record_sender(message.id, message.from_)
        if not message.to:
            raise MeshUnknownAgentError(MISSING_TO)
        if message.to not in self._agents:
            raise MeshUnknownAgentError(message.to)
        if not self.guard.may_message(message.from_, message.to):
            raise MeshAccessDeniedError(message.from_, message.to)
        await self._fan_out(message.to, IncomingMeshMessage.from_message(message, "direct"))

    async def deliver_broadcast(self, message: MeshMessage) -> None:
        self.record_sender(message.id, message.from_)
        incoming = IncomingMeshMessage.from_message(message, "broadcast")
        for agent_id in list(self._agents):
            if agent_id != message.from_ and self.guard.may_message(message.from_, agent_id):
                await self._fan_out(agent_id, copy.copy(incoming))

    async def deliver_ack(
        self, original_sender: str, ack_of: str, sender: str, note: str | None = None
    ) -> None:
        if not self.guard.may_message(sender, original_sender):
            raise MeshAccessDeniedError(sender, original_sender)
        ack = build_ack(original_sender=original_sender, ack_of=ack_of, sender=sender, note=note)
        await self._fan_out(original_sender, ack)

    async def _fan_out(self, agent_id: str, message: IncomingMeshMessage) -> None:
        if self.guard.signing:
            # Signed: through the wire form, signed and checked exactly as on the network.
            await self._fan_out_wire(agent_id, self.guard.sign(message.to_dict()))
            return
        if self.guard.restricted and not self.guard.admit(
            {"from": message.from_, "id": message.id, "kind": message.kind, "to": message.to},
            agent_id,
        ):
            return
        # Unsigned, the message object itself goes (made for this delivery by the sender's
        # call): a dict round trip per delivery cost a fifth of the in-process path.
        await self._dispatch(agent_id, message)

    async def _fan_out_wire(self, agent_id: str, wire: dict[str, Any]) -> None:
        """Deliver a message in its wire form (signed): the receiver's checks, then parse."""
        if self.guard.admit(wire, agent_id):
            await self._dispatch(agent_id, IncomingMeshMessage.from_dict(wire))

    async def _dispatch(self, agent_id: str, parsed: IncomingMeshMessage) -> None:
        handlers = self._handlers.get(agent_id)
        if not handlers:
            return
        # A message object per handler, made up front: one handler cannot change what the
        # next one sees.
        deliveries = [(handlers[0], parsed)]
        deliveries += [(handler, copy.copy(parsed)) for handler in handlers[1:]]
        for handler, incoming in deliveries:
            try:
                await handler(incoming)
            except Exception:
                logger.exception("[glove-mesh] in-memory handler threw:")


class InMemoryMeshAdapter:
    def __init__(self, network: MeshNetwork, agent_id: str) -> None:
        self.network = network
        self.agent_id = agent_id
        self.identifier = f"in-memory-mesh-{agent_id}"

    async def register(self, identity: AgentIdentity) -> None:
        self.network.register_agent(identity)

    async def unregister(self) -> None:
        self.network.unregister_agent(self.agent_id)

    async def list_agents(self) -> list[AgentIdentity]:
        return self.network.list_agents()

    async def get_agent(self, agent_id: str) -> AgentIdentity | None:
        return self.network.get_agent(agent_id)

    async def send(self, message: MeshMessage) -> None:
        message.from_ = self.agent_id
        await self.network.deliver_direct(message)

    async def broadcast(self, message: MeshMessage) -> None:
        message.from_ = self.agent_id
        message.to = None
        await self.network.deliver_broadcast(message)

    async def acknowledge(self, message_id: str, note: str | None = None) -> None:
        sender = self.network.lookup_sender(message_id)
        if sender is None:
            raise MeshUnknownMessageError(message_id)
        await self.network.deliver_ack(sender, message_id, self.agent_id, note)

    async def subscribe(self, handler: MeshHandler) -> Unsubscribe:
        self.network.attach_handler(self.agent_id, handler)

        async def unsubscribe() -> None:
            self.network.detach_handler(self.agent_id, handler)

        return unsubscribe
