"""The embedded default: one `MeshNetwork` per transport, i.e. per process."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mesh.core.network import InMemoryMeshAdapter, MeshNetwork
from mesh.core.security import DEFAULT_MAX_AGE, MeshGuard


class InProcessMeshTransport:
    def __init__(
        self,
        *,
        sender_table_capacity: int = 1024,
        signing_keys: Mapping[str, str] | None = None,
        access: Mapping[str, Iterable[str]] | None = None,
        max_age: float = DEFAULT_MAX_AGE,
    ) -> None:
        self.guard = MeshGuard(signing_keys=signing_keys, access=access, max_age=max_age)
        self.network = MeshNetwork(sender_table_capacity=sender_table_capacity, guard=self.guard)

    def adapter(self, agent_id: str) -> InMemoryMeshAdapter:
        return InMemoryMeshAdapter(self.network, agent_id)

    async def close(self) -> None:
        return None
