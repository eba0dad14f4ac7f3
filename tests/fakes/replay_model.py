"""A scripted shop assistant whose answers follow its system prompt, for replays.

    GLOVE_AGENTS = {"shop": {"factory": "tests.fakes.replay_model.shop_agent",
                             "model": "replay-test"}}

A customer message with "stock" in it asks `check_stock` about its last word, and the reply
reads the tool's result; any other message is echoed. A line of the system prompt such as
`when "refund" reply "Refunds take 5 days."` answers every message containing that word with
that text instead (no tool call), and `ask about "peru"` makes every stock question ask
about peru (a call no recording has), and `reserve on stock` makes it call `reserve` (which
writes a row) instead: a prompt change affects exactly the conversations that
mention the word. `record` runs the agent on customer messages and stores what it said, as
a turn worker would (the recordings replays read). The `judge-test` provider is a judge
(`gloveapp.versions.judge`) that passes a replayed reply about refunds and fails any other.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from gloveapp.core import Message, ScriptedModel, ToolCall
from gloveapp.core.compaction import CompactionConfig
from gloveapp.core.glove import Glove
from gloveapp.core.providers.registry import register_model_provider
from gloveapp.core.store import MemoryStore
from gloveapp.core.tools import tool

PROVIDER = "replay-test"
PROMPT = "You are the shop's assistant."
RULE = re.compile(r'^when "([^"]+)" reply "([^"]+)"$', re.MULTILINE)
# `ask about "peru"`: every stock question asks about that product (calls never recorded).
ASK = re.compile(r'^ask about "([^"]+)"$', re.MULTILINE)
OUT_OF_STOCK = {"kenya", "panama"}
# A line of its own: every stock question reserves the product instead (`reserve` writes a
# row; no recording has the call).
RESERVE = "reserve on stock"


@tool(description="Whether a product is in stock.")
async def check_stock(product: str) -> dict[str, Any]:
    return {"product": product, "in_stock": product.lower() not in OUT_OF_STOCK}


@tool(description="Reserve a product for the customer.")
async def reserve(product: str) -> dict[str, Any]:
    """Writes a row (a group named after the product): what a sandboxed replay undoes."""
    from django.contrib.auth.models import Group

    await Group.objects.acreate(name=f"reserved:{product}")
    return {
        "product": product,
        "reserved": await Group.objects.filter(name__startswith="reserved:").acount(),
    }


@tool(description="Refund an order.")
async def refund(order: str) -> dict[str, Any]:
    return {"order": order, "refunded": True}


def shop_agent() -> dict:
    return {"title": "Shop", "system_prompt": PROMPT, "tools": [check_stock, refund, reserve]}


def _respond(system_prompt: str, messages: list[Message]) -> Message | str:
    last = messages[-1]
    if last.is_compaction_request:
        return "The chat so far."
    if last.tool_results:
        data = last.tool_results[0].result.data or {}
        if "reserved" in data:
            return f"{data['product']} reserved ({data['reserved']} now)."
        if "in_stock" in data:
            where = "in" if data["in_stock"] else "out of"
            return f"{data['product']} is {where} stock."
        return "Done."
    text = last.text or ""
    for word, reply in RULE.findall(system_prompt or ""):
        if word.lower() in text.lower():
            return reply
    if "stock" in text.lower():
        asked = ASK.findall(system_prompt or "")
        product = asked[0] if asked else text.rstrip("?.! ").split()[-1]
        name = "reserve" if RESERVE in (system_prompt or "") else "check_stock"
        return Message(
            sender="agent",
            text="",
            tool_calls=[ToolCall(tool_name=name, input_args={"product": product})],
        )
    return f"You said: {text}"


class _SlowModel(ScriptedModel):
    """The scripted model taking `delay` seconds a call (a replay long enough to kill its
    worker in the middle of)."""

    delay = 0.0

    async def prompt(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await super().prompt(*args, **kwargs)


def _model(model: str = "", **kwargs: Any) -> ScriptedModel:
    scripted = (_SlowModel if kwargs.get("delay") else ScriptedModel)(
        respond=lambda messages, tools: _respond(scripted.system_prompt or "", messages),
        record_messages=False,
        label="replay",
        **{key: value for key, value in kwargs.items() if key in ("tokens_in", "tokens_out")},
    )
    if isinstance(scripted, _SlowModel):
        scripted.delay = float(kwargs["delay"])
    return scripted


JUDGE_PROVIDER = "judge-test"


def _verdict(question: str) -> str:
    """The scripted judge: a replayed reply about refunds passes, any other change fails."""
    replayed = question.partition("Replayed reply:\n")[2]
    if "Refunds" in replayed:
        return json.dumps({"verdict": "pass", "reason": "It explains the refund."})
    return json.dumps({"verdict": "fail", "reason": "It no longer answers the question."})


def _judge(model: str = "", **kwargs: Any) -> ScriptedModel:
    return ScriptedModel(
        respond=lambda messages, tools: _verdict(messages[-1].text or ""),
        record_messages=False,
        label="judge",
    )


def register() -> None:
    register_model_provider(PROVIDER, _model, replace=True)
    register_model_provider(JUDGE_PROVIDER, _judge, replace=True)


async def _answered(texts: list[str], system_prompt: str) -> list[Message]:
    store = MemoryStore()
    glove = Glove(
        store=store,
        model=_model(),
        system_prompt=system_prompt,
        compaction_config=CompactionConfig(compaction_instructions="Summarize."),
    )
    glove.fold(check_stock).fold(refund).build()
    for text in texts:
        await glove.process_request(text)
    return await store.get_messages()


def record(session_id: str, texts: list[str], *, system_prompt: str = PROMPT) -> None:
    """Store what the agent answers to `texts` in the session, as its turns would have."""
    from gloveapp.conversations.services import messages_append

    messages_append(session_id=session_id, messages=asyncio.run(_answered(texts, system_prompt)))
