"""A test agent whose model reports real token counts, for the budget tests.

GLOVE_AGENTS = {"spender": {"factory": "tests.budgets.agent.spender_agent",
                            "model": "budget-test"}} (`register()` first). The model is
`scripted:budget` with `max_tokens` = MAX_TOKENS: a call's worst case is its input (as the
reservation estimates it) at the input price plus MAX_TOKENS at the output price. It counts
its input as the prompt's characters (tools included) / 4 (fewer than the reservation's estimate, as a real
tokenizer's count is) and its output as the reply's words. A message starting "loop" calls
the `again` tool until LOOPS calls (a runaway agent); "slow" sleeps SLOW_SECONDS in the call
(a worker killed mid-call); "ask" calls the `helper` subagent; "midway" (agent
`spender-midway`) calls the `midway` tool once, which runs MIDWAY's steps: what a test does
between a turn's first model call and its next.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from gloveapp.core import Message, ScriptedModel, ToolCall, tool
from gloveapp.core.providers.registry import register_model_provider
from gloveapp.core.providers.scripted import ScriptedTurn

MAX_TOKENS = 200
MODEL = "scripted:budget"
# Dollars per million tokens: a worst case of about $0.063 a call, an actual cost of about
# $0.026 (dear, so a dollar goes in a few dozen calls).
PRICES = {MODEL: {"input": 30, "output": 150}}
LOOPS = 50
SLOW_SECONDS = float(os.environ.get("GLOVE_TEST_SLOW_SECONDS", "5"))
CALLS: list[str] = []
MIDWAY: list[Callable[[], Any]] = []


@tool(description="Do it again.")
async def again(times: int) -> dict:
    return {"again": times}


@tool(description="Something happens midway.")
async def midway() -> dict:
    for step in MIDWAY:
        await sync_to_async(step)()
    return {"done": True}


def _counted(messages: list[Message], tools: Any, reply: str | Message) -> ScriptedTurn:
    # What a provider counts: the tools' schemas and the conversation.
    chars = len(repr(tools or ""))
    chars += sum(len(m.text or "") + len(repr(m.tool_results or "")) for m in messages)
    words = len((reply.text if isinstance(reply, Message) else reply).split()) + 5
    return ScriptedTurn(reply=reply, tokens_in=max(math.ceil(chars / 4), 1), tokens_out=words)


async def _respond(messages: list[Message], tools: Any) -> ScriptedTurn:
    # The request this turn answers: the newest user message that is no tool results.
    asked = next((m for m in reversed(messages) if m.sender == "user" and not m.tool_results), None)
    last = messages[-1]
    request = (asked.text if asked else "") or ""
    CALLS.append(request)
    if request.startswith("slow"):
        await asyncio.sleep(SLOW_SECONDS)
    if request.startswith("loop") and last.tool_results:
        done = sum(1 for m in messages[messages.index(asked) :] if m.tool_results)
        if done >= LOOPS:
            return _counted(messages, tools, "Done looping.")
    if request.startswith("loop"):
        call = ToolCall(tool_name="again", input_args={"times": len(messages)})
        return _counted(messages, tools, Message(sender="agent", text="", tool_calls=[call]))
    if request.startswith("midway") and not last.tool_results:
        call = ToolCall(tool_name="midway", input_args={})
        return _counted(messages, tools, Message(sender="agent", text="", tool_calls=[call]))
    if request.startswith("ask") and not last.tool_results:
        call = ToolCall(
            tool_name="glove_invoke_subagent", input_args={"name": "helper", "prompt": "help me"}
        )
        return _counted(messages, tools, Message(sender="agent", text="", tool_calls=[call]))
    return _counted(messages, tools, f"Answered: {request[:40]}")


class BudgetModel(ScriptedModel):
    max_tokens = MAX_TOKENS


def _model(model: str = "", **kwargs: Any) -> ScriptedModel:
    return BudgetModel(respond=_respond, label="budget")


def register() -> None:
    register_model_provider("budget-test", _model, replace=True)


def spender_agent() -> dict:
    return {
        "title": "Spender",
        "system_prompt": "You spend.",
        "tools": [again],
    }


def midway_agent() -> dict:
    return {"title": "Spender midway", "system_prompt": "You spend.", "tools": [midway]}


def helper_agent() -> dict:
    return {"title": "Helper", "system_prompt": "You help.", "tools": []}


AGENTS = {
    "spender": {
        "factory": "tests.budgets.agent.spender_agent",
        "model": "budget-test",
        "subagents": [{"name": "helper", "agent": "spender-helper", "description": "Helps."}],
    },
    "spender-midway": {"factory": "tests.budgets.agent.midway_agent", "model": "budget-test"},
    "spender-helper": {
        "factory": "tests.budgets.agent.helper_agent",
        "model": "budget-test",
        "open_to": "mesh",
    },
}
