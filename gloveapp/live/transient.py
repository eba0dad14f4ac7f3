"""Ephemeral events that are shown once and never stored: "text_delta", "tool_use",
"tool_result", "slot.pushed", "slot.resolved", "turn.started", "turn.finished".

They go straight to the stream's shared group, so they reach the session's sockets in every
server process that shares the channel layer (with the in-memory layer: this process only).
A client that was away misses them by design; what they lead to is stored and replayed.
Frames carry `"id": null`.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from gloveapp.live.groups import stream_group
from gloveapp.live.streams import session_stream


async def broadcast_transient(session_id: str, type: str, payload: dict) -> None:
    """Send an unstored event to everyone watching the session."""
    await stream_broadcast_transient(session_stream(session_id), type, payload)


async def stream_broadcast_transient(stream: str, type: str, payload: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(
        group := stream_group(stream),
        # The group named: a process's hub reads every group on one channel (live/hub.py).
        {"type": "live.transient", "group": group, "event": type, "payload": payload},
    )


def broadcast_transient_sync(session_id: str, type: str, payload: dict) -> None:
    """`broadcast_transient` for sync code (a thread running under the server's event loop)."""
    async_to_sync(broadcast_transient)(session_id, type, payload)
