"""The four model-callable mesh tools (contract §9.5): names, descriptions, schemas, results.

Schemas are written the way zod's JSON Schema output prints them (as the built-in inbox tool
does); the pydantic models beside them validate input strictly, like zod.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from gloveapp.core.tools import Tool, ToolContext
from gloveapp.core.types import InboxItem, ToolResultData, now_iso
from gloveapp.observe import tracing
from mesh.core.adapter import MeshAdapter
from mesh.core.types import AgentIdentity, MeshMessage, new_message_id

logger = logging.getLogger("mesh")

SEND_TOOL = "glove_mesh_send_message"
BROADCAST_TOOL = "glove_mesh_broadcast"
LIST_TOOL = "glove_mesh_list_agents"
ACK_TOOL = "glove_mesh_acknowledge"
MESH_TOOL_NAMES: tuple[str, ...] = (SEND_TOOL, BROADCAST_TOOL, LIST_TOOL, ACK_TOOL)

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

SEND_DESCRIPTION = (
    "Send a private message to another agent on the mesh network. Use glove_mesh_list_agents "
    "first to find recipient ids. Set blocking=true to wait for the recipient to acknowledge or "
    "reply before continuing \u2014 the result will be delivered into your inbox automatically. "
    "Set in_reply_to to thread a reply to a previous message (the original sender is unblocked "
    "automatically)."
)
SEND_TO = "Recipient agent id on the mesh network. Use glove_mesh_list_agents to find ids."
SEND_CONTENT = "Message body."
SEND_IN_REPLY_TO = (
    "Optional: message id this is in reply to. The original sender will be unblocked if they "
    "were waiting on it."
)
SEND_BLOCKING = (
    "If true, you cannot proceed until the recipient acknowledges or replies. The resolution "
    "will appear in your inbox."
)
BROADCAST_DESCRIPTION = (
    "Broadcast a message to every other agent on the mesh network. Set blocking=true to wait "
    "for at least one acknowledgement before continuing. Acknowledgements and replies are "
    "surfaced in your inbox."
)
BROADCAST_BLOCKING = (
    "If true, wait for at least one acknowledgement before continuing. The first ack received "
    "resolves the wait; later acks arrive as ordinary inbox items."
)
LIST_DESCRIPTION = (
    "List other agents currently registered on the mesh network. Returns each agent's id, "
    "name, description, and capabilities. Optionally filter by capability tag or by "
    "case-insensitive substring of name."
)
LIST_CAPABILITY = "Only show agents whose capabilities[] contains this tag."
LIST_NAME_CONTAINS = "Substring match on agent name (case-insensitive)."
ACK_DESCRIPTION = (
    "Acknowledge receipt of an incoming message from another mesh agent. If the sender was "
    "blocking on this message, they will be unblocked. Use this for lightweight confirmations; "
    "for a substantive reply with content, use glove_mesh_send_message with in_reply_to instead."
)
ACK_MESSAGE_ID = (
    "The id of the incoming mesh message being acknowledged. Look for 'message id: <id>' in the "
    "inbox notification."
)
ACK_NOTE = (
    "Optional short note explaining the acknowledgement. For longer replies with content, use "
    "glove_mesh_send_message with in_reply_to instead."
)


def _string(description: str, *, min_length: int | None = 1) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if min_length is not None:
        schema["minLength"] = min_length
    schema["description"] = description
    return schema


def _boolean(description: str) -> dict[str, Any]:
    return {"default": False, "description": description, "type": "boolean"}


SEND_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "to": _string(SEND_TO),
        "content": _string(SEND_CONTENT),
        "in_reply_to": _string(SEND_IN_REPLY_TO, min_length=None),
        "blocking": _boolean(SEND_BLOCKING),
    },
    "required": ["to", "content", "blocking"],
    "additionalProperties": False,
}
BROADCAST_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {"content": _string(SEND_CONTENT), "blocking": _boolean(BROADCAST_BLOCKING)},
    "required": ["content", "blocking"],
    "additionalProperties": False,
}
LIST_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "filter": {
            "type": "object",
            "properties": {
                "capability": _string(LIST_CAPABILITY, min_length=None),
                "name_contains": _string(LIST_NAME_CONTAINS, min_length=None),
            },
            "additionalProperties": False,
        }
    },
    "additionalProperties": False,
}
ACK_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "type": "object",
    "properties": {
        "message_id": _string(ACK_MESSAGE_ID),
        "note": _string(ACK_NOTE, min_length=None),
    },
    "required": ["message_id"],
    "additionalProperties": False,
}


class _Strict(BaseModel):
    # zod objects strip unknown keys rather than failing; strict types like zod's.
    model_config = ConfigDict(extra="ignore", strict=True)


class SendInput(_Strict):
    to: str = Field(min_length=1)
    content: str = Field(min_length=1)
    in_reply_to: str | None = None
    blocking: bool = False


class BroadcastInput(_Strict):
    content: str = Field(min_length=1)
    blocking: bool = False


class ListFilter(_Strict):
    capability: str | None = None
    name_contains: str | None = None


class ListInput(_Strict):
    filter: ListFilter | None = None


class AcknowledgeInput(_Strict):
    message_id: str = Field(min_length=1)
    note: str | None = None


def error_text(error: BaseException) -> str:
    """What glove-mesh interpolates: the error's message (its class name if it has none)."""
    return str(error) or type(error).__name__


class MeshMember(Protocol):
    """What the tools need of an agent's membership of the mesh (`mount.MeshMount`): who
    it is, its transport, its inbox store and its waiting items."""

    identity: AgentIdentity
    adapter: MeshAdapter
    store: Any

    async def add_waiting_item(self, message: MeshMessage, request: str) -> InboxItem: ...

    def forget_waiting(self, message_id: str) -> None: ...

    async def peer_name(self, agent_id: str) -> str: ...


def build_mesh_tools(mount: MeshMember) -> list[Tool]:
    identity = mount.identity
    adapter = mount.adapter

    async def rollback(item_id: str, response: str) -> None:
        try:
            await mount.store.update_inbox_item(
                item_id, {"status": "consumed", "response": response, "resolved_at": now_iso()}
            )
        except Exception:
            logger.exception("[glove-mesh] failed to roll back pending inbox item %s:", item_id)

    async def deliver(
        message: MeshMessage,
        *,
        tool_name: str,
        waiting_request: str | None,
        record_context: str,
        failure_word: str,
        transmit: Callable[[MeshMessage], Awaitable[None]],
    ) -> ToolResultData | None:
        """Record the wait (when blocking), hand the message over, roll back on failure.

        Returns the error result, or None once the transport accepted the message."""
        waiting: InboxItem | None = None
        if waiting_request is not None:
            try:
                waiting = await mount.add_waiting_item(message, waiting_request)
            except Exception as error:
                return ToolResultData.error(
                    f"{tool_name} failed to record pending blocking item for {message.id}"
                    f"{record_context}: {error_text(error)}"
                )
        try:
            await transmit(message)
        except Exception as error:
            if waiting is not None:
                await rollback(waiting.id, f"{failure_word} failed: {error_text(error)}")
                mount.forget_waiting(message.id)
            return ToolResultData.error(f"{tool_name} failed: {error_text(error)}")
        return None

    async def send_message(params: SendInput, ctx: ToolContext) -> ToolResultData:
        message = MeshMessage(
            id=new_message_id(identity.id),
            from_=identity.id,
            to=params.to,
            in_reply_to=params.in_reply_to,
            content=params.content,
            blocking=params.blocking,
        )
        request = None
        if params.blocking:
            peer = await mount.peer_name(params.to)
            request = f'Waiting for response from "{peer}" ({params.to}) to message {message.id}'
        with tracing.child_span(
            "glove.mesh.send",
            {
                "glove.mesh.message_id": message.id,
                "glove.mesh.from": identity.id,
                "glove.mesh.to": params.to,
                "glove.mesh.blocking": params.blocking,
            },
        ) as span:
            failed = await deliver(
                message,
                tool_name=SEND_TOOL,
                waiting_request=request,
                record_context=f" (to={params.to})",
                failure_word="Send",
                transmit=adapter.send,
            )
            if span is not None:
                span.set_attribute("glove.mesh.outcome", "failed" if failed else "sent")
        return failed or ToolResultData.success(
            {"message_id": message.id, "to": params.to, "blocking": params.blocking}
        )

    async def broadcast(params: BroadcastInput, ctx: ToolContext) -> ToolResultData:
        message = MeshMessage(
            id=new_message_id(identity.id),
            from_=identity.id,
            content=params.content,
            blocking=params.blocking,
        )
        request = None
        if params.blocking:
            request = f"Broadcast {message.id}: waiting for at least one acknowledgement"
        with tracing.child_span(
            "glove.mesh.send",
            {
                "glove.mesh.message_id": message.id,
                "glove.mesh.from": identity.id,
                "glove.mesh.to": "*",
                "glove.mesh.blocking": params.blocking,
            },
        ) as span:
            failed = await deliver(
                message,
                tool_name=BROADCAST_TOOL,
                waiting_request=request,
                record_context="",
                failure_word="Broadcast",
                transmit=adapter.broadcast,
            )
            if span is not None:
                span.set_attribute("glove.mesh.outcome", "failed" if failed else "sent")
        return failed or ToolResultData.success(
            {"message_id": message.id, "blocking": params.blocking}
        )

    async def list_agents(params: ListInput, ctx: ToolContext) -> ToolResultData:
        try:
            agents = await adapter.list_agents()
        except Exception as error:
            return ToolResultData.error(f"{LIST_TOOL} failed: {error_text(error)}")
        capability = params.filter.capability if params.filter else None
        name_contains = params.filter.name_contains if params.filter else None
        needle = name_contains.lower() if name_contains else None
        found = [
            {
                "id": agent.id,
                "name": agent.name,
                "description": agent.description,
                "capabilities": list(agent.capabilities or []),
            }
            for agent in agents
            if agent.id != identity.id
            and (not capability or capability in (agent.capabilities or []))
            and (not needle or needle in agent.name.lower())
        ]
        return ToolResultData.success({"agents": found, "count": len(found)})

    async def acknowledge(params: AcknowledgeInput, ctx: ToolContext) -> ToolResultData:
        try:
            await adapter.acknowledge(params.message_id, params.note)
        except Exception as error:
            return ToolResultData.error(f"{ACK_TOOL} failed: {error_text(error)}")
        return ToolResultData.success({"acknowledged": params.message_id})

    return [
        Tool(SEND_TOOL, SEND_DESCRIPTION, send_message, SendInput, SEND_SCHEMA),
        Tool(BROADCAST_TOOL, BROADCAST_DESCRIPTION, broadcast, BroadcastInput, BROADCAST_SCHEMA),
        Tool(LIST_TOOL, LIST_DESCRIPTION, list_agents, ListInput, LIST_SCHEMA),
        Tool(ACK_TOOL, ACK_DESCRIPTION, acknowledge, AcknowledgeInput, ACK_SCHEMA),
    ]
