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
