"""The `MeshAdapter` protocol (contract §9.2): one per agent, its view of the network.

Guarantees mount_mesh relies on:
- `send` returns when the transport has accepted the message, not when it was handled;
- `broadcast` never delivers to the sender;
- handler errors never escape the adapter (they are logged; fan-out continues);
- `acknowledge` routes a `kind="ack"` message to the original sender of `message_id`.

`subscribe` is awaitable so a transport can return only once its subscription is live (a
message sent right after mounting must not be missed); it returns an async unsubscribe.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from mesh.core.types import AgentIdentity, IncomingMeshMessage, MeshMessage

MeshHandler = Callable[[IncomingMeshMessage], Awaitable[None]]
Unsubscribe = Callable[[], Awaitable[None]]


@runtime_checkable
class MeshAdapter(Protocol):
    identifier: str
    agent_id: str

    async def register(self, identity: AgentIdentity) -> None: ...

    async def unregister(self) -> None: ...

    async def list_agents(self) -> list[AgentIdentity]:
        """Every registered agent, this one included."""
        ...

    async def get_agent(self, agent_id: str) -> AgentIdentity | None: ...

    async def send(self, message: MeshMessage) -> None: ...

    async def broadcast(self, message: MeshMessage) -> None: ...

    async def acknowledge(self, message_id: str, note: str | None = None) -> None: ...

    async def subscribe(self, handler: MeshHandler) -> Unsubscribe: ...
