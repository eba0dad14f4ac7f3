"""A scripted test model that OBEYS ITS CONTEXT about who answers the chat.

It reads the handoff markers in what it is sent (`conversations.handoff`): while the last
one says a human stretch started ("[Handoff started] ... the agent stays silent") it says
nothing; once a later "[Handoff ended]" note closes the stretch it answers again. So a
hand-back that left no end marker in the context (or a compaction that lost it) shows as an
agent that stays silent, which an always-reply fake could never show. It asks for a person
with `glove_request_human` when the customer does ("a person", "a human"), and its
compaction summary keeps the start markers and drops the end ones, as a careless summary
would: only notes carried across compaction keep the agent answering.

    GLOVE_AGENTS = {"obedient": {"factory": "tests.fakes.obedient_model.obedient_agent",
                                 "model": "obedient-test", "handoff": {"group": "baristas"}}}

A request starting with "slow" waits for `RELEASE` (set by the test) before its reply, so
a test can take the chat over while the turn runs; `STARTED` is set when it begins waiting.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gloveapp.conversations.handoff import HANDOFF_ENDED, HANDOFF_STARTED
from gloveapp.core import Message, ScriptedModel, ToolCall
from gloveapp.core.builtin_tools import REQUEST_HUMAN_TOOL_NAME
from gloveapp.core.providers.registry import register_model_provider

PROVIDER = "obedient-test"
SILENT = ""
ASKED_REPLY = "I have asked for a person; they will answer you here."
CALLS: list[str] = []
STARTED: asyncio.Event | None = None
RELEASE: asyncio.Event | None = None


def obedient_agent() -> dict:
    return {"title": "Obedient", "system_prompt": "You answer unless a person does."}


def _texts(message: Message) -> list[str]:
    found = [message.text or ""]
    for result in message.tool_results or []:
        found.append(str(result.result.data))
    return found


def human_stretch_open(messages: list[Message]) -> bool:
    """Does the last handoff marker in the context say a person answers now?"""
    for message in reversed(messages):
        for text in reversed(_texts(message)):
            started, ended = text.rfind(HANDOFF_STARTED), text.rfind(HANDOFF_ENDED)
            if started >= 0 or ended >= 0:
                return started > ended
    return False


def _summary(messages: list[Message]) -> str:
    # Lossy on purpose: keeps what said a person answers, drops what ended it.
    kept = [
        line
        for message in messages
        for text in _texts(message)
        for line in text.splitlines()
        if HANDOFF_STARTED in line and HANDOFF_ENDED not in line
    ]
    return "\n".join([f"The chat had {len(messages)} messages.", *kept])


async def _respond(messages: list[Message], tools: Any) -> Message | str:
    last = messages[-1]
    if last.is_compaction_request:
        return _summary(messages[:-1])
    CALLS.append(last.text)
    names = {tool.name for tool in tools or []}
    if last.tool_results:
        if any(r.tool_name == REQUEST_HUMAN_TOOL_NAME for r in last.tool_results):
            return ASKED_REPLY  # its own closing words after asking, then silence
        return "Done."
    if human_stretch_open(messages):
        return SILENT
    text = last.text or ""
    if text.startswith("slow") and RELEASE is not None:
        if STARTED is not None:
            STARTED.set()
        await RELEASE.wait()
    lowered = text.lower()
    if ("a person" in lowered or "a human" in lowered) and REQUEST_HUMAN_TOOL_NAME in names:
        return Message(
            sender="agent",
            text="",
            tool_calls=[
                ToolCall(
                    tool_name=REQUEST_HUMAN_TOOL_NAME,
                    input_args={"reason": "the customer asked for a person"},
                )
            ],
        )
    return f"Agent: {text}"


def _model(model: str = "", **kwargs: Any) -> ScriptedModel:
    return ScriptedModel(respond=_respond, record_messages=False, label="obedient")


def register() -> None:
    register_model_provider(PROVIDER, _model, replace=True)
