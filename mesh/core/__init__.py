"""The mesh's Django-free core: types, the adapter protocol, the in-process network,
`mount_mesh`/`unmount_mesh` and the four tools. Nothing here imports Django."""

from __future__ import annotations

from mesh.core.adapter import MeshAdapter, MeshHandler, Unsubscribe
from mesh.core.errors import (
    MeshAccessDeniedError,
    MeshError,
    MeshNotRegisteredError,
    MeshStoreUnsupportedError,
    MeshUnknownAgentError,
    MeshUnknownMessageError,
)
from mesh.core.mount import (
    MeshMount,
    broadcast_tag,
    from_tag,
    mesh_mount_of,
    mount_mesh,
    unmount_mesh,
    waiting_tag,
)
from mesh.core.network import InMemoryMeshAdapter, MeshNetwork
from mesh.core.security import MeshGuard
from mesh.core.tools import (
    ACK_TOOL,
    BROADCAST_TOOL,
    LIST_TOOL,
    MESH_TOOL_NAMES,
    SEND_TOOL,
)
from mesh.core.types import (
    AgentIdentity,
    IncomingMeshMessage,
    MeshMessage,
    new_message_id,
)

__all__ = [
    "ACK_TOOL",
    "BROADCAST_TOOL",
    "LIST_TOOL",
    "MESH_TOOL_NAMES",
    "SEND_TOOL",
    "AgentIdentity",
    "InMemoryMeshAdapter",
    "IncomingMeshMessage",
    "MeshAccessDeniedError",
    "MeshAdapter",
    "MeshError",
    "MeshGuard",
    "MeshHandler",
    "MeshMessage",
    "MeshMount",
    "MeshNetwork",
    "MeshNotRegisteredError",
    "MeshStoreUnsupportedError",
    "MeshUnknownAgentError",
    "MeshUnknownMessageError",
    "Unsubscribe",
    "broadcast_tag",
    "from_tag",
    "mesh_mount_of",
    "mount_mesh",
    "new_message_id",
    "unmount_mesh",
    "waiting_tag",
]
