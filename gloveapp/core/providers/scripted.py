"""A model that answers from a script: the test fake, the offline demo and the benchmark model.

    model = ScriptedModel([
        Message(sender="agent", text="", tool_calls=[ToolCall("check_stock", {"product": "AA"})]),
        "Kenyan AA is out of stock.",
    ])

Each turn is a final text (`str`), an agent `Message` (usually with tool calls), a
`ScriptedTurn` (a reply with its own token counts), or a callable that receives the prompt's
messages and returns one of those. Every prompt is recorded in `.calls`. Tool calls without an
id get `call_{label}_{call_index}_{i}`, the ids the reference transcript uses.

`respond(messages, tools)` answers every prompt the script has no turn for (a model that never
runs out, like the offline demo's rules); `stream=True` reports each reply as a streaming
adapter does: `text_delta` chunks, a `tool_use` per call, then `model_response_complete`.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gloveapp.core.abort import AbortSignal
from gloveapp.core.providers.base import Notify, ToolSpec
from gloveapp.core.types import Message, ModelResult, ToolCall


@dataclass(slots=True)
class ScriptedTurn:
    """One scripted reply with its own token counts (the model's defaults when None)."""

    reply: str | Message
    tokens_in: int | None = None
    tokens_out: int | None = None
    # Prompt-cache counts, reported only when given (as providers do).
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


TurnFactory = Callable[[list[Message]], str | Message | ScriptedTurn | Awaitable[Any]]
Turn = str | Message | ScriptedTurn | TurnFactory
# Answers a prompt from its messages and the tools offered with it.
Responder = Callable[
    [list[Message], list[ToolSpec] | None], str | Message | ScriptedTurn | Awaitable[Any]
]
# Words per `text_delta` when streaming.
STREAM_WORDS = 6


@dataclass(slots=True)
class ScriptedCall:
    """One prompt the scripted model received, and what it answered."""

    index: int
    messages: list[Message]
    tools: list[ToolSpec] | None
    system_prompt: str | None
    reply: Message
    tokens_in: int
    tokens_out: int
    is_compaction_request: bool = False
    tool_names: list[str] | None = field(default=None)


class ScriptExhaustedError(RuntimeError):
    pass


class ScriptedModel:
    """A `ModelAdapter` that replies from a list of turns and records every prompt."""

    def __init__(
        self,
        script: Sequence[Turn] = (),
        *,
        respond: Responder | None = None,
        stream: bool = False,
        compaction_script: Sequence[Turn] | None = None,
        tokens_in: int = 100,
        tokens_out: int = 20,
        label: str = "scripted",
        record_messages: bool = True,
    ) -> None:
        self.name = f"scripted:{label}"
        self.label = label
        self._script = list(script)
        self._respond = respond
        self.stream = stream
        # Compaction summary requests are answered from here when given, so a script for the
        # conversation does not have to know when compaction happens.
        self._compaction_script = list(compaction_script) if compaction_script is not None else None
        self.tokens_in = tokens_in
        self.tokens_out = tokens_out
        self.record_messages = record_messages
        self.system_prompt: str | None = None
        self.calls: list[ScriptedCall] = []

    @property
    def remaining(self) -> int:
        return len(self._script)

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text

    async def prompt(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None,
        notify: Notify,
        abort: AbortSignal | None = None,
    ) -> ModelResult:
        index = len(self.calls)
        is_compaction = bool(messages) and messages[-1].is_compaction_request
        queue = self._script
        if is_compaction and self._compaction_script is not None:
            queue = self._compaction_script
        if queue:
            turn = await self._materialise(queue.pop(0), messages)
        elif self._respond is not None:
            turn = await self._materialise(self._respond(messages, tools), messages)
        else:
            which = "compaction script" if queue is self._compaction_script else "script"
            raise ScriptExhaustedError(
                f"ScriptedModel {self.label!r}: the {which} ran out at model call #{index} "
                f"({len(self.calls)} call(s) answered so far)."
            )
        reply = self._as_agent_message(turn.reply, index)
        tokens_in = self.tokens_in if turn.tokens_in is None else turn.tokens_in
        tokens_out = self.tokens_out if turn.tokens_out is None else turn.tokens_out
        stop_reason = "tool_use" if reply.tool_calls else "end_turn"
        self.calls.append(
            ScriptedCall(
                index=index,
                messages=copy.deepcopy(messages) if self.record_messages else [],
                tools=list(tools) if tools is not None else None,
                tool_names=[t.name for t in tools] if tools is not None else None,
                system_prompt=self.system_prompt,
                reply=reply,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                is_compaction_request=is_compaction,
            )
        )
        payload: dict[str, Any] = {"text": reply.text}
        if reply.tool_calls:
            payload["tool_calls"] = [call.to_dict() for call in reply.tool_calls]
        payload.update(stop_reason=stop_reason, tokens_in=tokens_in, tokens_out=tokens_out)
        if self.stream:
            for chunk in _chunks(reply.text):
                await notify("text_delta", {"text": chunk})
            for call in reply.tool_calls or []:
                await notify(
                    "tool_use", {"id": call.id, "name": call.tool_name, "input": call.input_args}
                )
            await notify("model_response_complete", payload)
        else:
            await notify("model_response", payload)
        return ModelResult(
            messages=[reply],
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cache_creation_input_tokens=turn.cache_creation_input_tokens,
            cache_read_input_tokens=turn.cache_read_input_tokens,
            stop_reason=stop_reason,
        )

    async def _materialise(self, turn: Any, messages: list[Message]) -> ScriptedTurn:
        if inspect.isawaitable(turn):
            turn = await turn
        if callable(turn) and not isinstance(turn, Message | ScriptedTurn):
            produced = turn(messages)
            if inspect.isawaitable(produced):
                produced = await produced
            turn = produced
        if isinstance(turn, ScriptedTurn):
            return turn
        if isinstance(turn, str | Message):
            return ScriptedTurn(reply=turn)
        raise TypeError(f"a scripted turn must be a str, Message or ScriptedTurn, got {turn!r}")

    def _as_agent_message(self, reply: str | Message, index: int) -> Message:
        if isinstance(reply, str):
            return Message(sender="agent", text=reply)
        # A fresh Message per call (a script may reuse one), without deep-copying its content.
        message = dataclasses.replace(reply, sender="agent")
        if message.tool_calls:
            message.tool_calls = [
                ToolCall(
                    tool_name=call.tool_name,
                    input_args=call.input_args,
                    id=call.id or f"call_{self.label}_{index}_{position}",
                )
                for position, call in enumerate(message.tool_calls)
            ]
        return message


def _chunks(text: str) -> list[str]:
    words = re.findall(r"\S+\s*", text)
    return ["".join(words[i : i + STREAM_WORDS]) for i in range(0, len(words), STREAM_WORDS)]
