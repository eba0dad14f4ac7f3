"""What arrives becomes an inbox item: the tags and texts every transport writes (§9.4).

Used by `mount_mesh`'s handler (in-process and Redis: the recipient's process writes its own
inbox) and by the database transport (the sender's transaction writes the recipient's inbox).
"""

from __future__ import annotations

from gloveapp.core.types import InboxItem, epoch_ms, now_iso
from mesh.core.types import IncomingMeshMessage, random_suffix

WAITING_PREFIX = "mesh:waiting:"
ACKNOWLEDGED = "acknowledged"


def from_tag(sender: str) -> str:
    return f"mesh:from:{sender}"


def broadcast_tag(sender: str) -> str:
    return f"mesh:broadcast:from:{sender}"


def waiting_tag(message_id: str) -> str:
    return f"{WAITING_PREFIX}{message_id}"


def new_mesh_item_id() -> str:
    return f"inbox_{epoch_ms()}_{random_suffix(8)}"


def ack_response(ack: IncomingMeshMessage) -> str:
    """What an ack resolves a wait with: its note, or "acknowledged"."""
    return ack.ack_note or ACKNOWLEDGED


def _resolved(tag: str, request: str, response: str, created_at: str) -> InboxItem:
    return InboxItem(
        id=new_mesh_item_id(),
        tag=tag,
        request=request,
        response=response,
        status="resolved",
        blocking=False,
        created_at=created_at,
        resolved_at=now_iso(),
    )


def inbound_item(message: IncomingMeshMessage, peer_name: str) -> InboxItem:
    """A direct message or broadcast, as the resolved item the recipient's model will see."""
    if message.kind == "broadcast":
        tag = broadcast_tag(message.from_)
        request = f'Broadcast from "{peer_name}" ({message.from_}) [message id: {message.id}]'
    else:
        tag = from_tag(message.from_)
        request = f'Message from "{peer_name}" ({message.from_}) [message id: {message.id}]'
    if message.in_reply_to:
        request += f" (replying to {message.in_reply_to})"
    return _resolved(tag, request, message.content, message.created_at)


def late_ack_item(ack: IncomingMeshMessage, peer_name: str) -> InboxItem:
    """An ack whose wait was already over (Decision 7: surfaced, not dropped)."""
    request = (
        f'Acknowledgement from "{peer_name}" ({ack.from_}) of message {ack.ack_of} '
        f"[message id: {ack.id}]"
    )
    return _resolved(from_tag(ack.from_), request, ack_response(ack), ack.created_at)


def waiting_item(message_id: str, request: str, created_at: str) -> InboxItem:
    return InboxItem(
        id=new_mesh_item_id(),
        tag=waiting_tag(message_id),
        request=request,
        response=None,
        status="pending",
        blocking=True,
        created_at=created_at,
    )
