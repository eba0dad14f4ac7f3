"""A test agent whose model calls tools it does not have: three made-up names, then the
menu tool it has, then a reply. Registered by `register()` as the `inventor-test` model."""

from __future__ import annotations

from typing import Any

from gloveapp.core import Message, ScriptedModel, ToolCall, tool
from gloveapp.core.providers.registry import register_model_provider

MADE_UP = ("customer_secret_tool", "drop_tables", "Ünïcode tool")


@tool(description="The menu.")
async def get_menu() -> dict:
    return {"menu": ["flat white"]}


def inventor_agent() -> dict:
    return {"title": "Inventor", "system_prompt": "You make tools up.", "tools": [get_menu]}


def _respond(messages: list[Message], tools: Any) -> Message | str:
    last = messages[-1]
    if last.tool_results:
        return "Done."
    calls = [ToolCall(tool_name=name, input_args={}) for name in (*MADE_UP, "GET_MENU")]
    return Message(sender="agent", text="", tool_calls=calls)


def register() -> None:
    register_model_provider(
        "inventor-test", lambda model="", **kwargs: ScriptedModel(respond=_respond), replace=True
    )
