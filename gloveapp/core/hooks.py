"""Hooks around model and tool calls (an addition to Glove, whose hooks are `/name` user
directives): small functions an agent's configuration puts around every call.

    glove.add_hook("before_model", fn)  # fn(messages, tools) -> messages | None (replace)
    glove.add_hook("after_model", fn)   # fn(result) -> ModelResult | None (replace)
    glove.add_hook("before_tool", fn)   # fn(call, tool) -> a result | None (the tool is skipped)
    glove.add_hook("after_tool", fn)    # fn(call, result) -> a result | None (replace)

Each may be sync or async; they run in the order added. `before_tool` runs after the
permission check and input validation, just before the tool; its result (a ToolResultData,
or any value wrapped like a tool's return) stands for the tool's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gloveapp.core.types import Message, ModelResult, ToolCall, ToolResultData

HOOK_POINTS = ("before_model", "after_model", "before_tool", "after_tool")


async def _call(hook: Callable[..., Any], *args: Any) -> Any:
    outcome = hook(*args)
    if hasattr(outcome, "__await__"):
        outcome = await outcome
    return outcome


@dataclass(slots=True)
class CallHooks:
    before_model: list[Callable[..., Any]] = field(default_factory=list)
    after_model: list[Callable[..., Any]] = field(default_factory=list)
    before_tool: list[Callable[..., Any]] = field(default_factory=list)
    after_tool: list[Callable[..., Any]] = field(default_factory=list)

    def add(self, point: str, hook: Callable[..., Any]) -> None:
        if point not in HOOK_POINTS:
            raise ValueError(f"hook point must be one of {', '.join(HOOK_POINTS)}, not {point!r}")
        getattr(self, point).append(hook)

    async def run_before_model(self, messages: list[Message], tools: list[Any]) -> list[Message]:
        for hook in self.before_model:
            replaced = await _call(hook, messages, tools)
            if replaced is not None:
                messages = list(replaced)
        return messages

    async def run_after_model(self, result: ModelResult) -> ModelResult:
        for hook in self.after_model:
            replaced = await _call(hook, result)
            if replaced is not None:
                result = replaced
        return result

    async def run_before_tool(self, call: ToolCall, tool: Any) -> Any:
        """The first result a hook gives in place of running the tool, else None."""
        for hook in self.before_tool:
            outcome = await _call(hook, call, tool)
            if outcome is not None:
                return outcome
        return None

    async def run_after_tool(self, call: ToolCall, result: ToolResultData) -> ToolResultData:
        from gloveapp.core.tools import as_tool_result

        for hook in self.after_tool:
            replaced = await _call(hook, call, result)
            if replaced is not None:
                result = as_tool_result(replaced)
        return result
