"""`Glove`: configure an agent (store, model, tools, subscribers), build it, send it requests.

    glove = Glove(
        store=MemoryStore("session_1"),
        model=ScriptedModel(["Hello!"]),
        system_prompt="You are Brew, the assistant of a small coffee shop.",
        compaction_config=CompactionConfig("Summarize the conversation."),
    )
    glove.fold(check_stock).add_subscriber(print)
    agent = glove.build()
    result = await agent.process_request("Hi")

When the store can hold them, `glove_update_tasks` and `glove_post_to_inbox` are registered
first, automatically (Decision 1: the documented behaviour, which glove-core 3.x+ dropped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from gloveapp.core.abort import AbortSignal
from gloveapp.core.agent import Agent
from gloveapp.core.builtin_tools import create_inbox_tool, create_task_tool
from gloveapp.core.compaction import CompactionConfig, Compactor
from gloveapp.core.display import GENERIC_RENDERER, DisplayManager
from gloveapp.core.events import EventBus, Subscriber
from gloveapp.core.executor import ToolExecutor
from gloveapp.core.extensions import (
    HOOK_INVOKED,
    SKILL_INVOKED,
    AgentControls,
    HookContext,
    HookHandler,
    HookResult,
    RegisteredSkill,
    RegisteredSubAgent,
    SkillContext,
    SkillHandler,
    SubAgentFactory,
    create_skill_invoke_tool,
    create_subagent_invoke_tool,
    format_skill_message,
    maybe_await,
    parse_tokens,
    render_skill_tool_description,
    render_subagent_tool_description,
)
from gloveapp.core.hooks import CallHooks
from gloveapp.core.providers.base import ModelAdapter
from gloveapp.core.results import MAX_TOOL_RESULT_BYTES
from gloveapp.core.store import MemoryStore, StoreAdapter, supports_inbox, supports_tasks
from gloveapp.core.tools import Tool
from gloveapp.core.tools import tool as make_tool
from gloveapp.core.types import ContentPart, Message, ModelResult

NOT_BUILT_MESSAGE = "Call build before process_request"
MULTIMODAL_PLACEHOLDER = "[multimodal message]"

Request = str | Sequence[ContentPart | dict[str, Any]]


class GloveNotBuiltError(RuntimeError):
    def __init__(self) -> None:
        super().__init__(NOT_BUILT_MESSAGE)


class Glove:
    """An agent's configuration and its runnable form (after `build()`)."""

    def __init__(
        self,
        *,
        model: ModelAdapter,
        compaction_config: CompactionConfig,
        store: StoreAdapter | None = None,
        display_manager: DisplayManager | None = None,
        system_prompt: str = "",
        max_retries: int = 3,
        max_tool_result_bytes: int = MAX_TOOL_RESULT_BYTES,
    ) -> None:
        self._store = store if store is not None else MemoryStore()
        self._display_manager = display_manager or DisplayManager()
        self._model = model
        self._system_prompt = system_prompt
        self._events = EventBus()
        self._subscribers: list[Subscriber] = []
        self._tools: list[Tool] = []
        self.hooks: dict[str, HookHandler] = {}
        self.skills: dict[str, RegisteredSkill] = {}
        self.subagents: dict[str, RegisteredSubAgent] = {}
        self._skill_tool: Tool | None = None
        self.call_hooks = CallHooks()
        self._subagent_tool: Tool | None = None
        self._built = False
        # One ask at a time per Glove: two concurrent asks would interleave their messages.
        self._ask_lock = asyncio.Lock()
        model.set_system_prompt(system_prompt)
        if supports_tasks(self._store):
            self._tools.append(create_task_tool())
        if supports_inbox(self._store):
            self._tools.append(create_inbox_tool())
        self._executor = ToolExecutor(
            tools=self._tools,
            store=self._store,
            events=self._events,
            display_manager=lambda: self._display_manager,
            max_retries=max_retries,
            hooks=self.call_hooks,
            max_result_bytes=max_tool_result_bytes,
        )
        self._compactor = Compactor(
            store=self._store, model=model, events=self._events, config=compaction_config
        )
        self._agent = Agent(
            store=self._store,
            model=model,
            executor=self._executor,
            compactor=self._compactor,
            events=self._events,
        )

    # -- building -------------------------------------------------------------------------
    def fold(self, tool: Tool | Any) -> Glove:
        """Register a tool: a `Tool`, or an async function (turned into one by `@tool`)."""
        if not isinstance(tool, Tool):
            tool = make_tool(tool)
        self._tools.append(tool)
        return self

    def tool_names(self) -> frozenset[str]:
        """The names of the tools registered now (the built-in ones and plug-ins' too)."""
        return frozenset(tool.name for tool in self._tools)

    def unfold(self, name: str) -> bool:
        """Remove the tool called `name` (for plug-ins that can be taken off, like the mesh)."""
        for index, registered in enumerate(self._tools):
            if registered.name == name:
                # In place: the executor holds this same list.
                del self._tools[index]
                return True
        return False

    def add_subscriber(self, subscriber: Subscriber) -> Glove:
        self._events.add(subscriber)
        self._subscribers.append(subscriber)
        return self

    def remove_subscriber(self, subscriber: Subscriber) -> Glove:
        self._events.remove(subscriber)
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)
        return self

    # -- extensions (glove-core's defineHook / defineSkill / defineSubAgent) -------------
    def define_hook(self, name: str, handler: HookHandler) -> Glove:
        """Run `handler` when a user message says `/name` (before the agent loop)."""
        self.hooks[name] = handler
        return self

    def define_skill(
        self,
        name: str,
        handler: SkillHandler | str,
        *,
        description: str | None = None,
        expose_to_agent: bool = False,
    ) -> Glove:
        """`/name` in a user message stores the skill's content as a user message marked
        `is_skill_injection`; exposed ones the agent pulls in with `glove_invoke_skill`.
        A string is a skill whose content is that text."""
        if isinstance(handler, str):
            content = handler

            def handler(_context: SkillContext, _content: str = content) -> str:
                return _content

        self.skills[name] = RegisteredSkill(handler, description, expose_to_agent)
        if any(skill.expose_to_agent for skill in self.skills.values()):
            if self._skill_tool is None:
                self._skill_tool = create_skill_invoke_tool(self)
                self._tools.append(self._skill_tool)
            else:
                self._skill_tool.description = render_skill_tool_description(self.skills)
        return self

    def define_subagent(
        self, name: str, factory: SubAgentFactory, *, description: str | None = None
    ) -> Glove:
        """Let the agent delegate to `name` with `glove_invoke_subagent`: `factory(context)`
        returns a built child (anything with `process_request`, `add_subscriber` and
        `remove_subscriber`), run with the parent's prompt; its final text is the result."""
        self.subagents[name] = RegisteredSubAgent(factory, description)
        if self._subagent_tool is None:
            self._subagent_tool = create_subagent_invoke_tool(self)
            self._tools.append(self._subagent_tool)
        else:
            self._subagent_tool.description = render_subagent_tool_description(self.subagents)
        return self

    def add_hook(self, point: str, hook: Any) -> Glove:
        """A hook around every model or tool call (`gloveapp.core.hooks`): before_model,
        after_model, before_tool or after_tool."""
        self.call_hooks.add(point, hook)
        return self

    def controls(self) -> AgentControls:
        return AgentControls(glove=self, store=self._store, display_manager=self._display_manager)

    async def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        await self._events.emit(event_type, payload)

    @property
    def subscribers(self) -> list[Subscriber]:
        return list(self._subscribers)

    def set_display_manager(self, display_manager: DisplayManager) -> Glove:
        """Swap the display stack; applies to every tool, folded before or after."""
        self._display_manager = display_manager
        return self

    def build(self) -> Glove:
        self._built = True
        return self

    # -- running --------------------------------------------------------------------------
    async def process_request(
        self, request: Request, abort: AbortSignal | None = None
    ) -> ModelResult | Message:
        """Answer one user request; raises `AbortError` if `abort` fires.

        Requests to one Glove run one after the other: a second call waits until the first
        has finished, so their messages never interleave in the store. The lock lives in this
        process only; across processes the Django runner queues requests per session.
        """
        if not self._built:
            raise GloveNotBuiltError()
        async with self._ask_lock:
            if not self.hooks and not self.skills:
                message = build_user_message(request)
                return await self._agent.ask(message, hand_over=self._hand_over, abort=abort)
            return await self._process_directives(request, abort)

    async def _process_directives(
        self, request: Request, abort: AbortSignal | None
    ) -> ModelResult | Message:
        """Glove's processRequest with `/hook` and `/skill` directives: hooks run in order
        (may rewrite the text or end the request), then each skill's content is stored as a
        user message before the user's own."""
        first = build_user_message(request)
        raw_text = (
            request
            if isinstance(request, str)
            else "\n".join(p.text for p in (first.content or []) if p.type == "text" and p.text)
        )
        parsed = parse_tokens(raw_text, hooks=self.hooks, skills=self.skills)
        text = parsed.replaced
        controls = self.controls()
        for name in parsed.hooks:
            await self._events.emit(HOOK_INVOKED, {"name": name})
            outcome = await maybe_await(
                self.hooks[name](
                    HookContext(
                        name=name,
                        raw_text=raw_text,
                        parsed_text=text,
                        controls=controls,
                        abort=abort,
                    )
                )
            )
            if not isinstance(outcome, HookResult):
                continue
            if outcome.rewrite_text is not None:
                text = outcome.rewrite_text
            if outcome.short_circuit is not None:
                await self._store.append_messages([_with_text(request, text)])
                ended = outcome.short_circuit
                replies = [ended] if isinstance(ended, Message) else list(ended.messages)
                await self._store.append_messages(replies)
                return ended
        for name in parsed.skills:
            await self._events.emit(SKILL_INVOKED, {"name": name, "source": "user"})
            injection = await maybe_await(
                self.skills[name].handler(
                    SkillContext(name=name, parsed_text=text, source="user", controls=controls)
                )
            )
            await self._store.append_messages([format_skill_message(name, injection)])
        return await self._agent.ask(
            _with_text(request, text), hand_over=self._hand_over, abort=abort
        )

    async def resume_request(
        self, abort: AbortSignal | None = None, *, rerun: frozenset[str] = frozenset()
    ) -> ModelResult:
        """Continue the stored conversation without a new request: a turn retried after its
        worker stopped, or continued after a wait on a person (its request is stored
        already; unfinished tool calls are settled, those in `rerun` by running again)."""
        if not self._built:
            raise GloveNotBuiltError()
        async with self._ask_lock:
            return await self._agent.ask(None, hand_over=self._hand_over, abort=abort, rerun=rerun)

    async def force_compaction(self) -> Message:
        """Compact now, whatever the token count (Glove's `controls.forceCompaction`)."""
        return await self._compactor.run_now()

    async def _hand_over(
        self, input: dict[str, Any], tool_name: str | None = None, call_id: str | None = None
    ) -> Any:
        renderer = input.get("renderer") if isinstance(input, dict) else None
        return await self._display_manager.push_and_wait(
            renderer=renderer if isinstance(renderer, str) else GENERIC_RENDERER,
            input=input,
            tool_name=tool_name,
            call_id=call_id,
        )

    # -- introspection --------------------------------------------------------------------
    @property
    def built(self) -> bool:
        return self._built

    @property
    def store(self) -> Any:
        return self._store

    @property
    def model(self) -> ModelAdapter:
        return self._model

    @property
    def system_prompt(self) -> str:
        return self._system_prompt

    @property
    def display_manager(self) -> DisplayManager:
        return self._display_manager

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The registered tools, in registration order (built-ins first)."""
        return tuple(self._tools)

    @property
    def compaction_config(self) -> CompactionConfig:
        return self._compactor.config


def _with_text(request: Request, text: str) -> Message:
    """The user message of `request` with its text replaced (directives substituted)."""
    if isinstance(request, str):
        return Message(sender="user", text=text)
    media = [p for p in build_user_message(request).content or [] if p.type != "text"]
    if not media:
        return Message(sender="user", text=text)
    content = ([ContentPart(type="text", text=text)] if text else []) + media
    return Message(sender="user", text=text or MULTIMODAL_PLACEHOLDER, content=content)


def build_user_message(request: Request) -> Message:
    """A string becomes a text message; content parts become a multimodal message."""
    if isinstance(request, str):
        return Message(sender="user", text=request)
    parts = [p if isinstance(p, ContentPart) else ContentPart.from_dict(p) for p in request]
    text = "\n".join(p.text for p in parts if p.type == "text" and p.text)
    media = [p for p in parts if p.type != "text"]
    content = ([ContentPart(type="text", text=text)] if text else []) + media
    return Message(sender="user", text=text or MULTIMODAL_PLACEHOLDER, content=content)
