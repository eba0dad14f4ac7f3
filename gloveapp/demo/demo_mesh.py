"""The offline demo model's two mesh rules (Django-free, like the model itself).

The roastery agent answers stock questions that reach it over the mesh:
1. a resolved `mesh:from:<sender>` item asks about a coffee -> call `check_stock` for it;
2. that stock result -> reply with `glove_mesh_send_message`, `in_reply_to` the question, which
   also unblocks the sender if it was waiting (reply implies ack).
The sender's side needs no rule: the reply arrives as an ordinary resolved inbox item, and the
model relays it like any other news.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

from gloveapp.core.types import Message, ToolCall, ToolResult
from gloveapp.demo.catalogue import CatalogueEntry

SEND_TOOL = "glove_mesh_send_message"
_QUESTION = re.compile(r"\((?P<sender>[^()\s]+)\) \[message id: (?P<message_id>[^\]]+)\]$")
_CHECKING = re.compile(r"for (?P<sender>\S+) \(message (?P<message_id>\S+)\)\.$")


def call_message(tool_name: str, tool_input: dict[str, Any], text: str) -> Message:
    """The demo model's reply that calls one tool, with `text` shown beside the call."""
    call = ToolCall(
        tool_name=tool_name, input_args=tool_input, id=f"toolu_demo_{uuid.uuid4().hex[:16]}"
    )
    return Message(sender="agent", text=text, tool_calls=[call])


def answer_mesh_question(
    news: list[dict[str, str]],
    tools: set[str],
    find: Callable[[str], CatalogueEntry | None],
) -> Message | None:
    """Step 1: a stock question from another agent -> look the coffee up."""
    if SEND_TOOL not in tools or "check_stock" not in tools:
        return None
    for item in news:
        question = _QUESTION.search(item["request"])
        coffee = find(item["response"])
        if item["tag"].startswith("mesh:from:") and question and coffee is not None:
            return call_message(
                "check_stock",
                {"coffee": coffee.name},
                f"Checking {coffee.name} for {question['sender']} "
                f"(message {question['message_id']}).",
            )
    return None


def reply_with_stock(
    results: list[ToolResult], context: list[Message], tools: set[str]
) -> Message | None:
    """Step 2: the stock result of step 1 -> answer the agent that asked."""
    if SEND_TOOL not in tools:
        return None
    asked_by = {
        call.id: match
        for message in context
        if message.sender == "agent" and (match := _CHECKING.search(message.text))
        for call in message.tool_calls or []
    }
    for result in results:
        match = asked_by.get(result.call_id)
        data = result.result.data if isinstance(result.result.data, dict) else {}
        if match is None or result.tool_name != "check_stock":
            continue
        name = data.get("name") or data.get("coffee") or "that coffee"
        if data.get("in_stock"):
            answer = f"Roastery here: {data.get('bags')} bags of {name} are in stock."
        else:
            answer = f"Roastery here: {name} is out of stock; it is on the next roast."
        return call_message(
            SEND_TOOL,
            {"to": match["sender"], "content": answer, "in_reply_to": match["message_id"]},
            f"Answering {match['sender']}.",
        )
    return None


ROASTERY = "roastery"
_ASK_ROASTERY = re.compile(r"\broast(ery|er)\b")


def ask_roastery(
    text: str, tools: set[str], find: Callable[[str], CatalogueEntry | None]
) -> Message | None:
    """The shop's side: "ask the roastery about Kenya AA" -> a blocking mesh message."""
    coffee = find(text)
    if SEND_TOOL not in tools or coffee is None or not _ASK_ROASTERY.search(text.lower()):
        return None
    return call_message(
        SEND_TOOL,
        {"to": ROASTERY, "content": f"How many bags of {coffee.name} are left?", "blocking": True},
        f"I'll ask the roastery about {coffee.name}.",
    )


def without_echoes(news: list[dict[str, str]]) -> list[dict[str, str]]:
    """A reply also resolves the wait it answers, with the same text: say it once."""
    replies = {item["response"] for item in news if not item["tag"].startswith("mesh:waiting:")}
    return [
        item
        for item in news
        if not (item["tag"].startswith("mesh:waiting:") and item["response"] in replies)
    ]


def describe_sent(data: dict[str, Any], tool_input: dict[str, Any]) -> str:
    if tool_input.get("in_reply_to"):
        return f"Sent my answer to {tool_input.get('to', 'the other agent')}."
    return (
        f"I've asked the {tool_input.get('to', 'other agent')}. Their answer will appear in "
        "the inbox here, and I'll pass it on when you next write."
    )
