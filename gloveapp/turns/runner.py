"""The server-side turn runner: runs each session's turns in the server process, in order.

    position = await submit_message(session_id=..., text="Do you have Yirgacheffe?")
    visible_slots(session_id)            # the prompts a page shows right now
    await answer_slot(session_id=..., slot_id="slot_3", value="confirm")
    is_busy(session_id), queued(session_id)

Each session has one worker, an asyncio task on the server's event loop that is not tied to
the HTTP request that started it, so a turn keeps going when the browser closes. Messages that
arrive while a turn runs wait in the session's queue and run after it, one at a time: turns
are never interleaved. Each session also keeps its display stack here, between turns and page
loads, so a prompt that waits for the customer (a checkout confirmation, a permission request)
is still there when they come back.

Call these from the server's event loop: async views and consumers, or sync views under ASGI
through `async_to_sync` (which runs them on that loop). The stack lives in this process, so
with several server processes a prompt must be answered through the process that runs the
turn (sticky sessions), and a restart drops the turn in flight (its messages so far stay).

Live events: persisted changes (messages, tasks, inbox) reach pages through the outbox; this
module adds the transient ones via `broadcast_transient`: `turn.started`, `turn.finished`,
`turn.error`, `text_delta`, `tool_use`, `tool_use_result`, `slot.pushed`, `slot.resolved`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from gloveapp.agents.config import configured_model, get_agent_spec
from gloveapp.conversations.models import Session
from gloveapp.core.compaction import CompactionConfig
from gloveapp.core.display import PERMISSION_RENDERER, DisplayManager, Slot
from gloveapp.core.display import visible_slots as strategy_filter
from gloveapp.core.executor import PERMISSION_ONCE
from gloveapp.core.glove import Glove
from gloveapp.core.providers.errors import ModelConfigurationError, ModelProviderError
from gloveapp.core.tools import Tool
from gloveapp.ormstore.store import DjangoStore
from gloveapp.turns.mesh_peer import join_chat_mesh

logger = logging.getLogger(__name__)

GENERIC_SLOT_TEMPLATE = "tools/generic_slot.html"
PERMISSION_SLOT_TEMPLATE = "tools/permission_request.html"
FORWARDED_EVENTS = frozenset({"text_delta", "tool_use", "tool_use_result"})
# What a permission prompt may be answered with, and what the executor is told.
PERMISSION_ANSWERS: dict[Any, Any] = {
    "once": PERMISSION_ONCE,
    "always": True,
    "allow": True,
    "deny": False,
    True: True,
    False: False,
}


@dataclass(frozen=True, slots=True)
class SlotView:
    """A display slot as a page renders it: `template` is the tool's colocated slot template,
    or the permission / generic one."""

    id: str
    renderer: str
    input: Any
    tool_name: str | None
    call_id: str | None
    display_strategy: str
    waits_for_answer: bool
    template: str
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "renderer": self.renderer,
            "input": self.input,
            "tool_name": self.tool_name,
            "call_id": self.call_id,
            "display_strategy": self.display_strategy,
            "waits_for_answer": self.waits_for_answer,
            "template": self.template,
            "created_at": self.created_at,
        }


@dataclass(slots=True)
class _SessionRun:
    session_id: str
    display: DisplayManager = field(default_factory=DisplayManager)
    pending: deque[str] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None
    # The last turn's tools, to find each slot's colocated template.
    tools: dict[str, Tool] = field(default_factory=dict)
    # The stack as last announced, to tell pushes from resolutions.
    announced: dict[str, Slot] = field(default_factory=dict)


_runs: dict[str, _SessionRun] = {}


def _run_for(session_id: str) -> _SessionRun:
    run = _runs.get(session_id)
    if run is None:
        run = _SessionRun(session_id=session_id)
        run.display.subscribe(lambda stack: _announce_stack(run, stack))
        _runs[session_id] = run
    return run


def inbox_ttl() -> timedelta | None:
    """How long an item the agent posts may wait before `expire_inbox_items` answers it."""
    seconds = settings.GLOVE_INBOX_TTL_SECONDS
    return timedelta(seconds=seconds) if seconds else None


# -- public API ------------------------------------------------------------------------------
class QueueFull(Exception):
    """Too many messages are already waiting behind this session's running turn."""


async def submit_message(*, session_id: str, text: str) -> int:
    """Queue `text` as the session's next turn; returns how many turns are ahead of it.

    Raises `QueueFull` past GLOVE_MAX_QUEUED_MESSAGES: every queued message is a model call.
    """
    run = _run_for(session_id)
    if len(run.pending) >= settings.GLOVE_MAX_QUEUED_MESSAGES:
        raise QueueFull(
            f"{len(run.pending)} messages are already waiting for this chat; "
            "wait for the agent to answer."
        )
    ahead = len(run.pending) + (1 if is_busy(session_id) else 0)
    run.pending.append(text)
    if run.worker is None or run.worker.done():
        # Not awaited: the turn outlives the request that submitted it. A fresh context, so
        # the worker does not inherit the request's asgiref executor, which dies with it.
        run.worker = asyncio.get_running_loop().create_task(
            _work(run), name=f"glove-turns:{session_id}", context=contextvars.Context()
        )
    return ahead


def is_busy(session_id: str) -> bool:
    """Whether a turn is running (or about to) for this session in this process."""
    run = _runs.get(session_id)
    return run is not None and run.worker is not None and not run.worker.done()


def queued(session_id: str) -> int:
    """Messages waiting behind the running turn."""
    run = _runs.get(session_id)
    return len(run.pending) if run is not None else 0


async def wait_until_idle(session_id: str) -> None:
    """Wait until every queued turn of the session has finished (tests, graceful shutdown)."""
    run = _runs.get(session_id)
    while run is not None and run.worker is not None and not run.worker.done():
        await asyncio.shield(run.worker)


def visible_slots(session_id: str) -> list[SlotView]:
    """The slots a page shows now, in push order, by each slot's display strategy."""
    run = _runs.get(session_id)
    if run is None:
        return []
    return [_slot_view(run, slot) for slot in strategy_filter(run.display.stack)]


async def answer_slot(*, session_id: str, slot_id: str, value: Any) -> bool:
    """Answer a waiting slot. False when nothing waits on it (already answered, gone).

    A permission prompt takes "once" (this call only), "always" (remembered for this tool
    and input) or "deny" (remembered too), as the store's permissions are keyed.
    """
    run = _runs.get(session_id)
    if run is None or not run.display.is_waiting(slot_id):
        return False
    slot = run.display.get_slot(slot_id)
    if slot is not None and slot.renderer == PERMISSION_RENDERER:
        answer = value.get("value") if isinstance(value, dict) else value
        key = answer.strip().lower() if isinstance(answer, str) else answer
        if not isinstance(key, str | bool) or key not in PERMISSION_ANSWERS:
            logger.warning("unknown permission answer %r for slot %s", value, slot_id)
            return False
        value = PERMISSION_ANSWERS[key]
    return run.display.resolve(slot_id, value)


# -- running turns ---------------------------------------------------------------------------
async def _work(run: _SessionRun) -> None:
    while run.pending:
        text = run.pending.popleft()
        await _run_turn(run, text)
    if not run.display.stack and _runs.get(run.session_id) is run:
        # Nothing left to show or answer: forget the session until its next message, so a
        # long-running server does not keep one entry per conversation it ever served.
        del _runs[run.session_id]


async def _run_turn(run: _SessionRun, text: str) -> None:
    session_id = run.session_id
    await broadcast(session_id, "turn.started", {"text": text, "queued": len(run.pending)})
    try:
        agent_name = await sync_to_async(_agent_name)(session_id)
        spec = get_agent_spec(agent_name)
        run.tools = {tool.name: tool for tool in spec.tools}
        glove = Glove(
            store=DjangoStore(session_id, inbox_ttl=inbox_ttl()),
            model=configured_model(agent=spec.name),
            display_manager=run.display,
            system_prompt=spec.system_prompt,
            compaction_config=CompactionConfig(
                compaction_instructions=spec.compaction_instructions
            ),
        )
        for tool in spec.tools:
            glove.fold(tool)

        async def forward(event_type: str, payload: dict[str, Any]) -> None:
            if event_type in FORWARDED_EVENTS:
                await broadcast(session_id, event_type, payload)

        glove.add_subscriber(forward).build()
        leave_mesh = await join_chat_mesh(glove, session_id=session_id, spec=spec)
        try:
            result = await glove.process_request(text)
        finally:
            if leave_mesh is not None:
                await leave_mesh()
    except Exception as error:
        # Every write the loop made is whole (each append is one transaction); the turn just
        # stops here, the page is told why, and the next queued message still runs.
        logger.exception("turn failed in session %s", session_id)
        await broadcast(session_id, "turn.error", {"message": readable_error(error)})
        return
    reply = result.messages[-1].text if result.messages else ""
    await broadcast(session_id, "turn.finished", {"text": reply, "queued": len(run.pending)})


def _agent_name(session_id: str) -> str:
    return Session.objects.values_list("agent_name", flat=True).get(pk=session_id)


def readable_error(error: BaseException) -> str:
    """What the page says about a failed turn: plain words, no internals."""
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


# -- live events ------------------------------------------------------------------------------
async def broadcast(session_id: str, event_type: str, payload: dict[str, Any]) -> None:
    """Send a transient event to the session's pages; a failure never stops the turn."""
    from gloveapp.live.transient import broadcast_transient

    try:
        await broadcast_transient(session_id, event_type, payload)
    except Exception:
        logger.exception("could not broadcast %s to session %s", event_type, session_id)


async def _announce_stack(run: _SessionRun, stack: list[Slot]) -> None:
    current = {slot.id: slot for slot in stack}
    pushed = [slot for slot_id, slot in current.items() if slot_id not in run.announced]
    gone = [slot for slot_id, slot in run.announced.items() if slot_id not in current]
    # Recorded before the first await: an answer that lands while we broadcast runs this
    # again, and must diff against the stack we are announcing, not the one before it.
    run.announced = current
    for slot in pushed:
        await broadcast(run.session_id, "slot.pushed", {"slot": _slot_view(run, slot).to_dict()})
    for slot in gone:
        await broadcast(
            run.session_id, "slot.resolved", {"slot_id": slot.id, "status": slot.status}
        )


def _slot_view(run: _SessionRun, slot: Slot) -> SlotView:
    if slot.renderer == PERMISSION_RENDERER:
        template = PERMISSION_SLOT_TEMPLATE
    else:
        tool = run.tools.get(slot.tool_name or "")
        own = tool is not None and tool.slot_template and slot.renderer == tool.name
        template = tool.slot_template if own and tool else GENERIC_SLOT_TEMPLATE
    return SlotView(
        id=slot.id,
        renderer=slot.renderer,
        input=slot.input,
        tool_name=slot.tool_name,
        call_id=slot.call_id,
        display_strategy=slot.display_strategy,
        waits_for_answer=slot.waits_for_answer,
        template=template or GENERIC_SLOT_TEMPLATE,
        created_at=slot.created_at,
    )
