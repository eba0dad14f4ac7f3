"""One turn with the Glove runtime: what a worker does once it has claimed a turn.

The turn's agent gets the session's store, the configured model, its tools and, on the mesh,
the mesh tools: as a chat (GLOVE_CHAT_MESH) or as the mesh peer whose inbox the session is
(`turns.mesh_peer` keeps that peer on the mesh and queues its wake-up turns).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from gloveapp.agents.config import AgentSpec, configured_model
from gloveapp.agents.handoff_config import handoff_of
from gloveapp.conversations import handoff
from gloveapp.conversations.append import FencedOff
from gloveapp.conversations.models import Session
from gloveapp.conversations.tool_frames import (
    TOOL_FRAMES,
    TOOL_USE,
    TOOL_USE_RESULT,
    frame_call_id,
    frame_tool_name,
    tool_reading,
    with_reading,
)
from gloveapp.core.abort import AbortSignal
from gloveapp.core.approvals.policy import APPROVAL_RENDERER
from gloveapp.core.builtin_tools import create_request_human_tool
from gloveapp.core.compaction import CompactionConfig
from gloveapp.core.display import PERMISSION_RENDERER, DisplayManager, Slot
from gloveapp.core.glove import Glove
from gloveapp.core.providers.errors import ModelConfigurationError, ModelProviderError
from gloveapp.core.tools import Tool
from gloveapp.core.types import Message
from gloveapp.live.transient import broadcast_transient
from gloveapp.turns import claim, fence, person_gate, submit
from gloveapp.turns.extensions import model_provider_of, mount_extensions
from gloveapp.turns.models import MeshPeer, Turn
from gloveapp.turns.observe_turn import TurnObserver
from gloveapp.turns.spending import Spending, SpendingStopped
from gloveapp.turns.turn_store import TurnStore
from gloveapp.versions.selectors import agent_spec_at
from mesh.core import AgentIdentity, mount_mesh, unmount_mesh
from mesh.layers import build_transport, get_mesh_transport, mesh_config
from mesh.transports.database import DatabaseMeshTransport
from mesh.transports.inprocess import InProcessMeshTransport

logger = logging.getLogger(__name__)

GENERIC_SLOT_TEMPLATE = "tools/generic_slot.html"
PERMISSION_SLOT_TEMPLATE = "tools/permission_request.html"
APPROVAL_SLOT_TEMPLATE = "tools/approval_request.html"
FORWARDED_EVENTS = frozenset({"text_delta", "tool_use", "tool_use_result"})


def inbox_ttl() -> timedelta | None:
    """How long an item the agent posts may wait before `expire_inbox_items` answers it."""
    seconds = settings.GLOVE_INBOX_TTL_SECONDS
    return timedelta(seconds=seconds) if seconds else None


def turn_agent(turn: Turn) -> AgentSpec:
    """The agent of the turn's session as the turn's version makes it (an unknown agent
    raises ImproperlyConfigured)."""
    agent_name = Session.objects.values_list("agent_name", flat=True).get(pk=turn.session_id)
    return agent_spec_at(agent_name, turn.agent_version_id)


def model_provider(spec: AgentSpec) -> str:
    """The provider part of the agent's model spec (`anthropic`, `openai`, `demo`...)."""
    return model_provider_of(spec)


def agent_tools(spec: AgentSpec) -> dict[str, Tool]:
    return {tool.name: tool for tool in spec.tools}


async def answer_turn(
    turn: Turn,
    *,
    display: DisplayManager,
    abort: AbortSignal,
    spec: AgentSpec,
    tools: dict[str, Tool],
    rerun: frozenset[str] = frozenset(),
    observer: TurnObserver | None = None,
) -> str:
    """Run the turn to its end; returns the reply text. A retried or continued turn whose
    request is already stored resumes from the stored conversation instead of asking again;
    the calls in `rerun` (they waited on a person) run again and find their answers.
    `observer` times and counts its model and tool calls (metrics, usage, timeline)."""
    session_id = turn.session_id
    # The claim's gate: a turn of a chat a person answers never calls the model.
    await sync_to_async(person_gate.check_agent_answers)(turn)
    model = configured_model(agent=spec.name, spec=spec.model, model_settings=spec.model_settings)
    if observer is not None:
        model = observer.observe_model(model)
    model = PersonGatedModel(model, turn)
    adapter_name = getattr(model, "name", "")
    if observer is not None:
        observer.counts_on_store = True
    # Fenced: once another worker took the turn back, or a person took the chat over, this
    # attempt stores nothing more. Each reply's tokens are counted with it, on the session,
    # the turn and its model.
    store = TurnStore(
        turn,
        inbox_ttl=inbox_ttl(),
        model=(lambda: observer.model) if observer is not None else (lambda: adapter_name),
        stored=observer.stored if observer is not None else None,
        fence=person_gate.gated_fence(turn, fence.turn_fence(turn)),
    )
    glove = Glove(
        store=store,
        model=model,
        display_manager=display,
        system_prompt=spec.system_prompt,
        compaction_config=CompactionConfig(compaction_instructions=spec.compaction_instructions),
        max_tool_result_bytes=settings.GLOVE_TOOL_RESULT_MAX_BYTES,
    )
    for tool in tools.values():
        glove.fold(tool)
    if handoff_of(spec).tool:
        glove.fold(request_human_tool(turn, spec))

    readings: dict[str, dict[str, Any]] = {}

    async def forward(event_type: str, payload: dict[str, Any]) -> None:
        if event_type in TOOL_FRAMES:
            payload = await read_tool_frame(event_type, payload, tools, readings)
        if event_type in FORWARDED_EVENTS:
            # Named by turn: a watcher of one turn (an A2A stream) tells its frames from
            # those of the session's turn before it.
            await broadcast(session_id, event_type, {**payload, "turnId": turn.pk})

    glove.add_subscriber(forward)
    if observer is not None:
        observer.tool_names = glove.tool_names
        glove.add_subscriber(observer.on_event)
    glove.build()
    resume = turn.continues and await sync_to_async(claim.turn_request_stored)(turn)
    if resume:
        stored = await sync_to_async(claim.turn_stored_reply)(turn)
        if stored is not None:
            return stored  # answered before its worker could finish it: not twice
    if turn.source == submit.MESH_SOURCE and not resume:
        if not await glove.store.get_resolved_inbox_items():
            # A wake-up whose mail an earlier turn already read: no model call for nothing.
            return ""
    leave_mesh = await join_peer_mesh(glove, session_id=session_id)
    if leave_mesh is None:
        leave_mesh = await join_chat_mesh(glove, session_id=session_id, spec=spec)
    try:
        async with mount_extensions(
            glove,
            turn=turn,
            worker_id=turn.worker_id,
            spec=spec,
            tools=tools,
            inbox_ttl=inbox_ttl(),
        ):
            # Every model call of the turn (subagents' too) within its budgets.
            spending = Spending(turn=turn, display=display, session_id=session_id).begin()
            try:
                if resume:
                    result = await glove.resume_request(abort=abort, rerun=rerun)
                else:
                    result = await glove.process_request(turn.text, abort=abort)
            except FencedOff:
                if await sync_to_async(fence.turn_holds)(turn):
                    # The turn is still this worker's: the gate refused it, a person
                    # answers now. Its reply is withheld.
                    raise person_gate.PersonAnswers(session_id) from None
                raise
            finally:
                Spending.end(spending)
    finally:
        if leave_mesh is not None:
            await leave_mesh()
    if isinstance(result, Message):  # a hook ended the request with its own message
        return result.text
    return result.messages[-1].text if result.messages else ""


class PersonGatedModel:
    """The turn's model, asked only while the agent answers the chat: a person who took it
    over meanwhile stops the turn before its next model call (`PersonAnswers`)."""

    def __init__(self, inner: Any, turn: Turn) -> None:
        self._inner = inner
        self._turn = turn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def prompt(self, messages: Any, tools: Any, notify: Any, abort: Any = None) -> Any:
        await sync_to_async(person_gate.check_agent_answers)(self._turn)
        result = await self._inner.prompt(messages, tools, notify, abort)
        if getattr(result, "stop_reason", None) in person_gate.REFUSALS:
            self._turn.refused = True  # counts for the agent's "after N failed turns" rule
        return result


def request_human_tool(turn: Turn, spec: AgentSpec) -> Tool:
    """`glove_request_human` for this turn: the chat goes to the agent's handoff group's
    queue, asked by the agent (this turn's closing words still land, nothing after)."""
    group = handoff_of(spec).group

    def hand_off(reason: str) -> str:
        try:
            handoff.handoff_request(
                session_id=turn.session_id,
                reason=reason,
                group=group,
                actor=handoff.Actor(label=f"the agent ({spec.name})"),
                via="tool",
                turn_id=turn.pk,
            )
        except handoff.HandoffConflict:
            # Asked by this turn already (a retried call): the same answer again; anything
            # else (a person holds the chat) is the tool's error, which the model reads.
            if not handoff.agent_answers(turn.session_id, turn.pk):
                raise
        who = f"a person from the {group}" if group else "a person"
        return handoff.started_note(who=who, reason=reason, by="The agent")

    return create_request_human_tool(sync_to_async(hand_off))


async def read_tool_frame(
    event_type: str,
    payload: dict[str, Any],
    tools: dict[str, Tool],
    readings: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """A tool frame with what the page shows of its call (`tool_frames`): the summary is
    read from the call's arguments in `tool_use` and kept (`readings`, by call id) for its
    result."""
    name, call_id = frame_tool_name(payload), frame_call_id(payload)
    reading = readings.pop(call_id, None) if event_type == TOOL_USE_RESULT and call_id else None
    if reading is None:
        tool = tools.get(name)
        args = payload.get("input") if event_type == TOOL_USE else None
        summary = None
        if tool is not None and tool.summary is not None and isinstance(args, dict):
            # A sync function that may read the database: off the event loop.
            summary = await sync_to_async(tool.summarize)(args)
        reading = tool_reading(tool, name, summary)
        if event_type == TOOL_USE and call_id:
            readings[call_id] = reading
    return with_reading(payload, reading)


def slot_template(tools: dict[str, Tool], slot: Slot) -> str:
    if slot.renderer == PERMISSION_RENDERER:
        return PERMISSION_SLOT_TEMPLATE
    if slot.renderer == APPROVAL_RENDERER:
        return APPROVAL_SLOT_TEMPLATE
    tool = tools.get(slot.tool_name or "")
    own = tool is not None and tool.slot_template and slot.renderer == tool.name
    return (tool.slot_template if own and tool else None) or GENERIC_SLOT_TEMPLATE


def readable_error(error: BaseException) -> str:
    """What the page says about a failed turn: plain words, no internals."""
    if isinstance(error, SpendingStopped):
        return str(error)
    if isinstance(error, Session.DoesNotExist):
        return "This conversation no longer exists."
    if isinstance(error, ImproperlyConfigured):
        return f"The agent is not configured correctly: {error}"
    if isinstance(error, ModelConfigurationError):
        return f"The model is not configured correctly: {error}"
    if isinstance(error, ModelProviderError):
        return f"The model provider could not answer ({error.provider}): {error.message}"
    return (
        f"Something went wrong while answering ({type(error).__name__}). "
        "The details are in the server log; send the message again to retry."
    )


async def broadcast(session_id: str, event_type: str, payload: dict[str, Any]) -> None:
    """Push a transient event to the session's pages, bounded in time: a frozen or dead
    channel layer loses the live push (the stored events still reach the pages through the
    event log), it never holds the turn up."""
    try:
        await asyncio.wait_for(
            broadcast_transient(session_id, event_type, payload),
            timeout=settings.GLOVE_LIVE_SEND_TIMEOUT_SECONDS,
        )
    except TimeoutError:
        logger.warning("live push of %s to session %s timed out", event_type, session_id)
    except Exception:
        logger.exception("could not push %s to session %s", event_type, session_id)


# -- the mesh, for the turn's agent ---------------------------------------------------------
def chat_mesh_id(session_id: str) -> str:
    return f"chat-{session_id}"


async def join_chat_mesh(
    glove: Glove, *, session_id: str, spec: AgentSpec
) -> Callable[[], Awaitable[Any]] | None:
    """Put a chat turn's agent on the mesh (GLOVE_CHAT_MESH); returns how to leave again.

    Only on the database transport: a peer's reply must reach the chat while no turn runs,
    and there the sender's transaction writes it into the chat's inbox directly.
    """
    if not settings.GLOVE_CHAT_MESH:
        return None
    transport = get_mesh_transport()
    if not isinstance(transport, DatabaseMeshTransport):
        logger.warning("GLOVE_CHAT_MESH needs MESH_TRANSPORT=database; chats stay off the mesh")
        return None
    mesh_id = chat_mesh_id(session_id)
    identity = AgentIdentity(
        id=mesh_id,
        name=f"{spec.title} (chat)",
        description=f"A customer chat with {spec.title}.",
        capabilities=["chat"],
    )
    adapter = transport.adapter(mesh_id, inbox_session=session_id)
    await mount_mesh(glove, adapter=adapter, identity=identity)
    # Stays registered after the turn: a reply that comes later still finds the chat.
    return lambda: unmount_mesh(glove, unregister=False)


async def join_peer_mesh(glove: Glove, *, session_id: str) -> Callable[[], Awaitable[Any]] | None:
    """A turn of a mesh peer's inbox (a wake-up, on a turn worker): give its agent the mesh
    tools, sending as the peer through the peer's transport; `run_agent` receives."""
    peer = await MeshPeer.objects.filter(session_id=session_id).afirst()
    if peer is None:
        return None
    shared = get_mesh_transport(peer.transport)
    # The in-process network must be the process's one; other transports are built for the
    # turn, inside its event loop (a plain task worker runs each session in a fresh loop).
    transport = (
        shared
        if isinstance(shared, InProcessMeshTransport)
        else build_transport(mesh_config()[peer.transport], peer.transport)
    )
    identity = AgentIdentity(
        id=peer.mesh_id,
        name=peer.name,
        description=peer.description,
        capabilities=peer.capabilities,
    )
    await mount_mesh(
        glove, adapter=transport.adapter(peer.mesh_id), identity=identity, receive=False
    )

    async def leave() -> None:
        await unmount_mesh(glove, unregister=False)
        if transport is not shared:
            await transport.close()

    return leave
