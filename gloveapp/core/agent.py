"""The agent loop: one `ask` = one user message answered (glove-core's `Agent.ask`, §2.2).

inject resolved inbox items (persisted, claimed exactly once)
build the blocking reminder (once per ask)
persist the user message
loop:
    context = messages since the last compaction + the reminder at the very end
    stop at the turn limit
    call the model with every tool
    (compact first if the reply calls tools and the count is >= 90% of the limit)
    persist the reply, count its tokens and the turn
    no tool calls -> compact if the count is >= the limit (Decision 4), return
    run the tools, persist one "tool results" message, compact if >= the limit
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from gloveapp.core.abort import AbortSignal
from gloveapp.core.compaction import Compactor, context_messages
from gloveapp.core.events import TOKEN_CONSUMPTION, EventBus
from gloveapp.core.executor import HandOver, ToolExecutor
from gloveapp.core.inbox_context import build_blocking_reminder, inject_resolved_items
from gloveapp.core.providers.base import ModelAdapter, ToolSpec
from gloveapp.core.store import StoreAdapter, supports_turn_record
from gloveapp.core.tools import Tool, model_json_schema
from gloveapp.core.types import (
    AbortError,
    Message,
    ModelResult,
    TokenUsage,
    ToolCall,
    ToolResult,
    ToolResultData,
)

TOOL_RESULTS_TEXT = "tool results"
INTERRUPTED_CALL_MESSAGE = (
    "This tool call was interrupted when the server running it stopped, and the tool is not "
    "safe to run twice, so it was not run again. Tell the user it may or may not have happened."
)


def turn_limit_text(max_turns: int) -> str:
    return (
        f"Reached the maximum number of turns ({max_turns}) for this request. "
        "Please send a new message to continue."
    )


@lru_cache(maxsize=1024)
def _input_model_schema(model: type[BaseModel]) -> dict[str, Any]:
    # Generating a pydantic JSON schema takes milliseconds, and every model call offers every
    # tool; input models are classes, so their schema can be built once per process.
    return model_json_schema(model)


def tool_specs(tools: list[Tool]) -> list[ToolSpec]:
    """The tools as the model sees them (`Tool.spec()`, with input-model schemas cached)."""
    specs = []
    for tool in tools:
        if tool.json_schema is None and tool.input_model is not None:
            schema = _input_model_schema(tool.input_model)
            specs.append(
                ToolSpec(name=tool.name, description=tool.description, input_schema=schema)
            )
        else:
            specs.append(tool.spec())
    return specs


def _raise_if_aborted(abort: AbortSignal | None) -> None:
    if abort is not None and abort.aborted:
        raise AbortError()


class Agent:
    def __init__(
        self,
        *,
        store: StoreAdapter,
        model: ModelAdapter,
        executor: ToolExecutor,
        compactor: Compactor,
        events: EventBus,
    ) -> None:
        self.store = store
        self.model = model
        self.executor = executor
        self.compactor = compactor
        self.events = events

    @property
    def max_turns(self) -> int:
        return self.compactor.config.max_turns

    async def ask(
        self,
        message: Message | None,
        *,
        hand_over: HandOver,
        abort: AbortSignal | None = None,
        rerun: frozenset[str] = frozenset(),
    ) -> ModelResult:
        """Answer `message`; with None, resume from the stored conversation instead (a turn
        whose worker stopped after storing its request: nothing stored is appended twice).
        `rerun`: ids of unfinished calls that run again although their tool is not
        `retry_safe` (they were waiting on a person, not interrupted halfway)."""
        if message is not None:
            await inject_resolved_items(self.store)
        # Computed once: an item resolved during this ask is injected by the next one.
        reminder = await build_blocking_reminder(self.store)
        if message is not None:
            await self.store.append_messages([message])
        else:
            await self._finish_interrupted_calls(hand_over=hand_over, abort=abort, rerun=rerun)

        request_turns = 0
        while True:
            _raise_if_aborted(abort)
            prompt = await context_messages(self.store)
            if reminder is not None:
                # At the very end (Decision 2): never between a tool call and its results.
                prompt.append(reminder)

            if request_turns >= self.max_turns:
                limit_message = Message(sender="agent", text=turn_limit_text(self.max_turns))
                await self.store.append_messages([limit_message])
                return ModelResult(messages=[limit_message], tokens_in=0, tokens_out=0)

            specs = tool_specs(self.executor.tools)
            hooks = self.executor.hooks
            if hooks.before_model:
                prompt = await hooks.run_before_model(prompt, specs)
            result = await self.model.prompt(prompt, specs, self.events.emit, abort)
            _raise_if_aborted(abort)
            if hooks.after_model:
                result = await hooks.run_after_model(result)

            calls: list[ToolCall] = [
                call for reply in result.messages for call in (reply.tool_calls or [])
            ]
            if calls and await self.compactor.is_imminent():
                # Before persisting the reply, so its tool calls and their results land after
                # the summary and stay visible to the model.
                await self.compactor.run_now()
            await self._record_reply(result)
            request_turns += 1

            if not calls:
                # Glove only compacts on tool-calling iterations; a chat that never calls
                # tools would otherwise grow without bound (Decision 4).
                await self.compactor.try_compaction()
                return result

            tool_results = await self.executor.execute(calls, hand_over=hand_over, abort=abort)
            _raise_if_aborted(abort)
            await self.store.append_messages(
                [Message(sender="user", text=TOOL_RESULTS_TEXT, tool_results=tool_results)]
            )
            await self.compactor.try_compaction()

    async def _finish_interrupted_calls(
        self,
        *,
        hand_over: HandOver,
        abort: AbortSignal | None,
        rerun: frozenset[str] = frozenset(),
    ) -> None:
        """Give the calls of a stored reply that has no results yet their results.

        The worker stopped between storing the reply and storing its results, so a call may
        have run already: a `retry_safe` tool runs again, any other gets an error result."""
        stored = await context_messages(self.store)
        last = stored[-1] if stored else None
        if last is None or last.sender != "agent" or not last.tool_calls:
            return
        safe_by_name = {tool.name: tool.retry_safe for tool in self.executor.tools}
        # A call that waited on a person runs again and finds its answer (`rerun`).
        safe = [
            call
            for call in last.tool_calls
            if call.id in rerun or safe_by_name.get(call.tool_name, True)
        ]
        ran = await self.executor.execute(safe, hand_over=hand_over, abort=abort) if safe else []
        _raise_if_aborted(abort)
        by_call = {id(call): result for call, result in zip(safe, ran, strict=False)}
        safe_ids = {id(call) for call in safe}
        results = [
            by_call.get(id(call))
            or ToolResult(
                tool_name=call.tool_name,
                call_id=call.id,
                result=ToolResultData(status="error", message=INTERRUPTED_CALL_MESSAGE),
            )
            for call in last.tool_calls
            if id(call) in by_call or id(call) not in safe_ids
        ]
        await self.store.append_messages(
            [Message(sender="user", text=TOOL_RESULTS_TEXT, tool_results=results)]
        )

    async def _record_reply(self, result: ModelResult) -> None:
        """Persist the reply, its token usage and the turn: one write where the store can."""
        usage = TokenUsage(
            tokens_in=result.tokens_in or 0,
            tokens_out=result.tokens_out or 0,
            cache_creation_input_tokens=result.cache_creation_input_tokens,
            cache_read_input_tokens=result.cache_read_input_tokens,
        )
        if supports_turn_record(self.store):
            await self.store.record_turn(result.messages, usage)
            await self.events.emit(TOKEN_CONSUMPTION, {"consumption": usage.to_dict()})
            return
        await self.store.append_messages(result.messages)
        await self.store.add_tokens(usage)
        await self.events.emit(TOKEN_CONSUMPTION, {"consumption": usage.to_dict()})
        await self.store.increment_turn()
