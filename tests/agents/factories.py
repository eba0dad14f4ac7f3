"""Agent factories for the GLOVE_AGENTS tests (settings name them by dotted path)."""

from __future__ import annotations

from gloveapp.core.tools import tool


@tool
async def ping() -> str:
    "Answer pong."
    return "pong"


def mapping_agent() -> dict:
    return {"title": "Ping", "system_prompt": "You answer pings.", "tools": [ping]}


def prompt_less_agent() -> dict:
    return {"title": "Mute", "tools": []}


def not_an_agent() -> str:
    return "hello"


NOT_CALLABLE = 42


def plain_agent() -> dict:
    """An agent with no tools of its own (settings add its MCP servers, subagents...)."""
    return {"title": "Plain", "system_prompt": "You use the tools you are given."}


async def closed_hook(ctx):
    """A `/closed` hook: answers for the agent, without a model call."""
    from gloveapp.core import Message
    from gloveapp.core.extensions import HookResult

    return HookResult(short_circuit=Message(sender="agent", text="We are closed today."))


def no_refunds(call, tool):
    """A before_tool hook: refunds are never run."""
    from gloveapp.core.types import ToolResultData

    if tool.name == "ping" and call.input_args.get("refund"):
        return ToolResultData.error("Refunds are handled at the counter.")
    return None


def ping_agent() -> dict:
    return {"title": "Ping", "system_prompt": "You answer pings.", "tools": [ping]}
