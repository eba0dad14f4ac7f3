"""The mesh's data types (contract §9.1) and their JSON wire form.

The wire form is the JSON the seed's TypeScript `RedisMeshAdapter` publishes: the message's
fields plus `kind` (and `ack_of`/`ack_note` on acks); absent optional fields are left out, as
`JSON.stringify` drops `undefined`. A signed message carries one more field, `signature`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from gloveapp.core.types import epoch_ms, now_iso

MeshKind = Literal["direct", "broadcast", "ack"]
MESH_KINDS: tuple[str, ...] = ("direct", "broadcast", "ack")


@dataclass(slots=True)
class AgentIdentity:
    id: str
    name: str
    description: str
    capabilities: list[str] | None = None
    metadata: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "description": self.description}
        if self.capabilities is not None:
            data["capabilities"] = list(self.capabilities)
        if self.metadata is not None:
            data["metadata"] = dict(self.metadata)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentIdentity:
        capabilities = data.get("capabilities")
        metadata = data.get("metadata")
        return cls(
            id=str(data["id"]),
            name=str(data.get("name", data["id"])),
            description=str(data.get("description", "")),
            capabilities=[str(c) for c in capabilities] if isinstance(capabilities, list) else None,
            metadata=metadata if isinstance(metadata, dict) else None,
        )


@dataclass(slots=True)
class MeshMessage:
    id: str
    from_: str  # `from` on the wire; sender-claimed unless signing is on
    content: str
    created_at: str = field(default_factory=now_iso)
    to: str | None = None
    in_reply_to: str | None = None
    blocking: bool | None = None
    metadata: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "from": self.from_}
        if self.to is not None:
            data["to"] = self.to
        if self.in_reply_to is not None:
            data["in_reply_to"] = self.in_reply_to
        data["content"] = self.content
        data["created_at"] = self.created_at
        if self.blocking is not None:
            data["blocking"] = self.blocking
        if self.metadata is not None:
            data["metadata"] = self.metadata
        return data


@dataclass(slots=True)
class IncomingMeshMessage(MeshMessage):
    kind: MeshKind = "direct"
    ack_of: str | None = None
    ack_note: str | None = None
    signature: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = MeshMessage.to_dict(self)
        data["kind"] = self.kind
        if self.ack_of is not None:
            data["ack_of"] = self.ack_of
        if self.ack_note is not None:
            data["ack_note"] = self.ack_note
        if self.signature is not None:
            data["signature"] = self.signature
        return data

    @classmethod
    def from_message(cls, message: MeshMessage, kind: MeshKind) -> IncomingMeshMessage:
        return cls(
            id=message.id,
            from_=message.from_,
            content=message.content,
            created_at=message.created_at,
            to=message.to,
            in_reply_to=message.in_reply_to,
            blocking=message.blocking,
            metadata=message.metadata,
            kind=kind,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IncomingMeshMessage:
        """Parse a wire message; raises `ValueError` for anything that is not one."""
        if not isinstance(data, dict):
            raise ValueError("a mesh message is a JSON object")
        kind = data.get("kind", "direct")
        if kind not in MESH_KINDS:
            raise ValueError(f"kind must be one of {', '.join(MESH_KINDS)}")
        for name in ("id", "from"):
            if not isinstance(data.get(name), str) or not data[name]:
                raise ValueError(f"{name} must be a non-empty string")
        content = data.get("content", "")
        if not isinstance(content, str):
            raise ValueError("content must be a string")
        optional = {}
        for name in ("to", "in_reply_to", "ack_of", "ack_note", "signature"):
            value = data.get(name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string")
            optional[name] = value
        blocking = data.get("blocking")
        metadata = data.get("metadata")
        return cls(
            id=data["id"],
            from_=data["from"],
            content=content,
            created_at=str(data.get("created_at") or now_iso()),
            blocking=bool(blocking) if blocking is not None else None,
            metadata=metadata if isinstance(metadata, dict) else None,
            kind=kind,
            **optional,
        )


def random_suffix(length: int = 8) -> str:
    """Up to 8 random base-36 characters: hex digits are base-36 digits, and one urandom read
    is cheap (secrets.choice per character cost more than the rest of a delivery)."""
    return os.urandom(4).hex()[:length]


def new_message_id(sender_id: str) -> str:
    """`msg_{senderId}_{epochMs}_{8 base-36 chars}`, glove-mesh's id shape."""
    return f"msg_{sender_id}_{epoch_ms()}_{random_suffix(8)}"


def new_ack_id() -> str:
    return f"ack_{epoch_ms()}_{random_suffix(6)}"


def build_ack(
    *, original_sender: str, ack_of: str, sender: str, note: str | None
) -> IncomingMeshMessage:
    return IncomingMeshMessage(
        id=new_ack_id(),
        from_=sender,
        to=original_sender,
        content=note if note is not None else "",
        created_at=now_iso(),
        kind="ack",
        ack_of=ack_of,
        ack_note=note,
    )
