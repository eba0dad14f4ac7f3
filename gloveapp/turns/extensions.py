"""What an agent's extensions add to one turn: its MCP servers' tools (one client session
per server for the turn, closed at its end), its subagents, skills and hooks.

    async with mount_extensions(glove, turn=turn, spec=spec, tools=tools) as mounted:
        result = await glove.process_request(...)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from gloveapp.agents.config import AgentSpec, configured_model, get_agent_spec, model_spec
from gloveapp.agents.extensions import apply_skills_and_hooks
from gloveapp.conversations.selectors import session_depth
from gloveapp.conversations.services import session_child
from gloveapp.core.abort import AbortController, AbortSignal
from gloveapp.core.compaction import CompactionConfig
from gloveapp.core.events import TOKEN_CONSUMPTION, Subscriber
from gloveapp.core.extensions import SubAgentFactoryContext
from gloveapp.core.glove import Glove
from gloveapp.core.mcp import TOOL_LISTS, McpConfigError, McpServerConfig, McpToolbox
from gloveapp.core.tools import Tool
from gloveapp.core.types import AbortError, Message, ModelResult
from gloveapp.observe import tracing
from gloveapp.ormstore.store import DjangoStore
from gloveapp.turns import lifecycle, slots, submit
from gloveapp.turns.models import Turn
from gloveapp.turns.observe_turn import TurnObserver

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class MountedExtensions:
    toolbox: McpToolbox | None = None
    notices: list[str] = field(default_factory=list)


def mcp_servers_of(spec: AgentSpec) -> list[McpServerConfig]:
    """The agent's MCP servers, validated (ImproperlyConfigured names the field)."""
    try:
        servers = [
            McpServerConfig.from_mapping(raw, where=f"GLOVE_AGENTS[{spec.name!r}].mcp_servers")
            for raw in spec.mcp_servers
        ]
    except McpConfigError as error:
        raise ImproperlyConfigured(str(error)) from None
    names = [server.name for server in servers]
    if len(set(names)) != len(names):
        raise ImproperlyConfigured(
            f"GLOVE_AGENTS[{spec.name!r}].mcp_servers: two servers share a name"
        )
    return servers


@dataclass(frozen=True, slots=True)
class SubagentEntry:
    name: str  # what the parent's model calls it
    agent: str  # the GLOVE_AGENTS entry it runs as
    description: str | None = None


def subagents_of(spec: AgentSpec) -> list[SubagentEntry]:
    """The agent's subagents: "agent-name", or {"name", "agent", "description"}."""
    where = f"GLOVE_AGENTS[{spec.name!r}].subagents"
    entries = []
    for raw in spec.subagents:
        if isinstance(raw, str):
            raw = {"name": raw, "agent": raw}
        if not isinstance(raw, Mapping) or not isinstance(raw.get("agent", raw.get("name")), str):
            raise ImproperlyConfigured(f"{where}: each is an agent name or a dict with 'agent'")
        unknown = sorted(set(raw) - {"name", "agent", "description"})
        if unknown:
            raise ImproperlyConfigured(f"{where}: unknown field(s) {', '.join(unknown)}")
        agent = raw.get("agent") or raw["name"]
        entries.append(SubagentEntry(raw.get("name") or agent, agent, raw.get("description")))
    return entries


@contextlib.asynccontextmanager
async def mount_extensions(
    glove: Glove,
    *,
    turn: Turn,
    worker_id: str,
    spec: AgentSpec,
    tools: dict[str, Tool],
    session_id: str | None = None,
    depth: int | None = None,
    inbox_ttl: timedelta | None = None,
) -> AsyncIterator[MountedExtensions]:
    """`session_id` / `depth`: a subagent's own session and nesting (default: the turn's)."""
    mounted = MountedExtensions()
    servers = mcp_servers_of(spec)
    apply_skills_and_hooks(glove, spec)
    session_id = session_id or turn.session_id
    if depth is None:
        depth = await sync_to_async(session_depth)(session_id)
    if depth < settings.GLOVE_SUBAGENT_MAX_DEPTH:
        for entry in subagents_of(spec):
            glove.define_subagent(
                entry.name,
                _child_factory(
                    entry,
                    turn=turn,
                    worker_id=worker_id,
                    parent=session_id,
                    depth=depth,
                    inbox_ttl=inbox_ttl,
                ),
                description=entry.description,
            )
    try:
        if servers:
            TOOL_LISTS.ttl = settings.GLOVE_MCP_TOOLS_TTL_SECONDS
            mounted.toolbox = await McpToolbox(
                servers, server_mode=turn.source == submit.MESH_SOURCE
            ).start()
            for tool in mounted.toolbox.tools:
                glove.fold(tool)
                tools[tool.name] = tool
            for down in mounted.toolbox.unavailable:
                logger.warning("turn %s: %s", turn.pk, down.notice())
                mounted.notices.append(down.notice())
        for notice in mounted.notices:
            await sync_to_async(lifecycle.turn_note)(
                turn_id=turn.pk, worker_id=worker_id, text=notice
            )
        yield mounted
    finally:
        if mounted.toolbox is not None:
            await mounted.toolbox.close()


def _child_factory(
    entry: SubagentEntry,
    *,
    turn: Turn,
    worker_id: str,
    parent: str,
    depth: int,
    inbox_ttl: timedelta | None,
) -> Any:
    async def factory(context: SubAgentFactoryContext) -> DurableSubagent:
        child_spec = await sync_to_async(get_agent_spec)(entry.agent)
        # Glove's calls always carry an id; one without (a hand-made message) gets its own child.
        call_id = context.call_id or f"call_{secrets.token_hex(8)}"
        child, _ = await sync_to_async(session_child)(
            parent_id=parent,
            call_id=call_id,
            agent_name=entry.agent,
            title=f"{entry.name}: {context.prompt}",
        )
        return DurableSubagent(
            name=entry.name,
            session_id=child.pk,
            spec=child_spec,
            display=context.parent_controls.display_manager,
            turn=turn,
            worker_id=worker_id,
            depth=depth + 1,
            inbox_ttl=inbox_ttl,
        )

    return factory


class SubagentBudgetExceeded(Exception):
    pass


class DurableSubagent:
    """A subagent run whose conversation is its own session, linked to the parent's.

    Run on the parent's turn (its lease, its prompts, its stop button). Run again after the
    worker stopped, it picks the child's conversation up where it was stored: a finished
    child answers with its stored reply without running, an unfinished one resumes, so the
    parent's call gets exactly one answer.
    """

    def __init__(
        self,
        *,
        name: str,
        session_id: str,
        spec: AgentSpec,
        display: Any,
        turn: Turn,
        worker_id: str,
        depth: int,
        inbox_ttl: timedelta | None = None,
    ) -> None:
        self.name = name
        self.inbox_ttl = inbox_ttl
        self.session_id = session_id
        self.spec = spec
        self.display = display
        self.turn = turn
        self.worker_id = worker_id
        self.depth = depth
        self._subscribers: list[Subscriber] = []

    def add_subscriber(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def remove_subscriber(self, subscriber: Subscriber) -> None:
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)

    async def process_request(self, prompt: str, abort: AbortSignal | None = None) -> ModelResult:
        store = DjangoStore(self.session_id, inbox_ttl=self.inbox_ttl)
        stored = await store.get_messages()
        finished = _finished_reply(stored)
        if finished is not None:
            return ModelResult(messages=[finished], tokens_in=0, tokens_out=0)
        # The subagent's model and tool calls count under its own agent in the metrics, are
        # steps of the parent turn's timeline and spans under its `invoke_agent`.
        observer = TurnObserver(
            self.turn, agent=self.spec.name, provider=model_provider_of(self.spec)
        )
        glove = Glove(
            store=store,
            model=observer.observe_model(
                configured_model(
                    agent=self.spec.name,
                    spec=self.spec.model,
                    model_settings=self.spec.model_settings,
                )
            ),
            display_manager=self.display,
            system_prompt=self.spec.system_prompt,
            compaction_config=CompactionConfig(
                compaction_instructions=self.spec.compaction_instructions,
                max_turns=settings.GLOVE_SUBAGENT_MAX_TURNS,
            ),
            max_tool_result_bytes=settings.GLOVE_TOOL_RESULT_MAX_BYTES,
        )
        for tool in self.spec.tools:
            glove.fold(tool)
        for subscriber in self._subscribers:
            glove.add_subscriber(subscriber)
        observer.tool_names = glove.tool_names
        glove.add_subscriber(observer.on_event)
        child_abort = AbortController()
        budget = settings.GLOVE_SUBAGENT_MAX_TOKENS
        spent = 0

        def count(event_type: str, payload: dict[str, Any]) -> None:
            nonlocal spent
            if event_type != TOKEN_CONSUMPTION:
                return
            usage = payload.get("consumption") or {}
            spent += int(usage.get("tokens_in") or 0) + int(usage.get("tokens_out") or 0)
            if spent > budget:
                child_abort.abort("budget")

        glove.add_subscriber(count).build()
        follow = asyncio.ensure_future(_follow(abort, child_abort))
        try:
            with tracing.child_span(
                f"invoke_agent {self.spec.name}",
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": self.spec.name,
                    "gen_ai.conversation.id": self.session_id,
                    "glove.subagent.depth": self.depth,
                },
            ):
                async with mount_extensions(
                    glove,
                    turn=self.turn,
                    worker_id=self.worker_id,
                    spec=self.spec,
                    tools={},
                    session_id=self.session_id,
                    depth=self.depth,
                    inbox_ttl=self.inbox_ttl,
                ):
                    if stored:
                        # A call of the child that waited on a person runs again and finds
                        # its answer, as the parent's does.
                        kept = (
                            await sync_to_async(slots.turn_slots_kept)(self.turn)
                            if self.turn.continues
                            else []
                        )
                        result = await glove.resume_request(
                            abort=child_abort.signal, rerun=slots.calls_waiting(kept)
                        )
                    else:
                        result = await glove.process_request(prompt, abort=child_abort.signal)
                await observer.flush()
        except AbortError:
            if child_abort.signal.reason == "budget" and not (abort and abort.aborted):
                raise SubagentBudgetExceeded(
                    f"it spent {spent} tokens, over its budget of {budget} "
                    "(GLOVE_SUBAGENT_MAX_TOKENS)"
                ) from None
            raise
        finally:
            follow.cancel()
        return result if isinstance(result, ModelResult) else ModelResult(messages=[result])


async def _follow(parent: AbortSignal | None, child: AbortController) -> None:
    if parent is not None:
        await parent.wait()
        child.abort(parent.reason)


def _finished_reply(stored: list[Message]) -> Message | None:
    """The child's final reply when its conversation is finished (it answered its prompt)."""
    if not stored:
        return None
    last = stored[-1]
    if last.sender == "agent" and not last.tool_calls:
        return last
    return None


def model_provider_of(spec: AgentSpec) -> str:
    """The provider part of the agent's model spec (`anthropic`, `openai`, `demo`...)."""
    return (spec.model.strip() or model_spec()).partition(":")[0].strip().lower()
