"""The model adapter protocol: one small class per provider."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gloveapp.core.abort import AbortSignal
from gloveapp.core.types import Message, ModelResult

# notify(event_type, payload): how adapters report `text_delta`, `tool_use`,
# `model_response` (non-streaming) or `model_response_complete` (streaming).
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]


@dataclass(slots=True)
class ToolSpec:
    """A tool as the model sees it."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class ModelAdapter(Protocol):
    name: str

    def set_system_prompt(self, text: str) -> None: ...

    async def prompt(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None,
        notify: Notify,
        abort: AbortSignal | None = None,
    ) -> ModelResult: ...


async def no_notify(event_type: str, payload: dict[str, Any]) -> None:
    return None
