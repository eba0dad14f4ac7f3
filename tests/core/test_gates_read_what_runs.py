"""Approval policies, permission gates and edits see the arguments as the tool receives them;
a gate that raises asks a person; an edit is bounded and checked against the tool's schema;
an edit of what the customer consented to asks the customer again."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from gloveapp.core import tool
from gloveapp.core.approvals.decisions import DecisionRefused
from gloveapp.core.approvals.edits import MAX_EDIT_BYTES, MAX_EDIT_DEPTH, validate_edit
from gloveapp.core.approvals.policy import APPROVAL_RENDERER, ApprovalPolicy
from gloveapp.core.display import PERMISSION_RENDERER
from tests.core.support import calls, make_glove


def ordering(ran: list, *, when=None, requires_permission: Any = False):
    @tool(
        description="Place an order.",
        approval=ApprovalPolicy(when=when),
        requires_permission=requires_permission,
    )
    async def place_order(product: str, quantity: int, payment: str = "pickup") -> dict:
        ran.append({"product": product, "quantity": quantity, "payment": payment})
        return {"ordered": quantity}

    return place_order


class Conversation:
    """One call of a tool, answered prompt by prompt."""

    def __init__(self, tool_, args: dict[str, Any]) -> None:
        self.glove, _, self.store = make_glove([calls((tool_.name, args)), "done"], tools=[tool_])
        self.task = asyncio.create_task(self.glove.process_request("order"))

    async def prompt(self):
        for _ in range(2000):
            if self.glove.display_manager.stack or self.task.done():
                break
            await asyncio.sleep(0)
        stack = self.glove.display_manager.stack
        return stack[-1] if stack else None

    async def answer(self, value_for) -> None:
        slot = await self.prompt()
        assert slot is not None, "no prompt was shown"
        self.glove.display_manager.resolve(slot.id, value_for(slot.input))
        await asyncio.sleep(0)

    async def result(self):
        await self.task
        [message] = [m for m in await self.store.get_messages() if m.tool_results]
        return message.tool_results[0].result


def approve(prompt):
    return {"decision": "approve", "fingerprint": prompt["fingerprint"]}


async def test_the_docs_policy_sees_the_number_the_tool_gets_from_a_string():
    ran: list = []
    talk = Conversation(
        ordering(ran, when=lambda args: args["quantity"] > 5),
        {"product": "AA", "quantity": "6"},
    )

    prompt = await talk.prompt()

    assert prompt.renderer == APPROVAL_RENDERER
    assert prompt.input["toolInput"]["quantity"] == 6
    await talk.answer(approve)
    assert (await talk.result()).status == "success"
    assert ran == [{"product": "AA", "quantity": 6, "payment": "pickup"}]


async def test_a_policy_that_raises_asks_a_person_and_says_why(caplog):
    ran: list = []
    talk = Conversation(
        ordering(ran, when=lambda args: args["no such key"] > 5), {"product": "AA", "quantity": 1}
    )

    with caplog.at_level(logging.WARNING, logger="gloveapp.core"):
        prompt = await talk.prompt()

    assert prompt.renderer == APPROVAL_RENDERER  # fails closed: a person decides
    assert "approval policy of place_order raised KeyError" in caplog.text
    await talk.answer(approve)
    assert (await talk.result()).status == "success"  # the turn goes on


async def test_a_permission_gate_that_raises_asks_the_customer(caplog):
    ran: list = []

    @tool(description="Charge.", requires_permission=lambda args: args["card"].startswith("x"))
    async def charge(amount: int) -> dict:
        ran.append(amount)
        return {"charged": amount}

    talk = Conversation(charge, {"amount": "5"})
    with caplog.at_level(logging.WARNING, logger="gloveapp.core"):
        prompt = await talk.prompt()

    assert prompt.renderer == PERMISSION_RENDERER
    assert "permission gate of charge raised KeyError" in caplog.text
    await talk.answer(lambda _: "once")
    await talk.result()
    assert ran == [5]


async def test_an_edit_to_what_the_customer_consented_to_asks_the_customer_again():
    ran: list = []
    on_card = ordering(ran, requires_permission=lambda args: args["payment"] == "saved_card")
    talk = Conversation(on_card, {"product": "AA", "quantity": 6, "payment": "pickup"})

    first = await talk.prompt()
    assert first.renderer == APPROVAL_RENDERER  # pickup: no card, no permission prompt
    await talk.answer(
        lambda prompt: {
            "decision": "edit",
            "fingerprint": prompt["fingerprint"],
            "args": {"product": "AA", "quantity": 6, "payment": "saved_card"},
        }
    )
    second = await talk.prompt()

    assert second.renderer == PERMISSION_RENDERER
    assert second.input["toolInput"]["payment"] == "saved_card"
    assert ran == []
    await talk.answer(lambda _: "deny_once")
    result = await talk.result()
    assert result.status == "error" and "Permission denied" in result.message
    assert ran == []


async def test_an_edit_the_customer_already_allows_runs_at_once():
    ran: list = []
    on_card = ordering(ran, requires_permission=lambda args: args["payment"] == "saved_card")
    talk = Conversation(on_card, {"product": "AA", "quantity": 6, "payment": "pickup"})

    await talk.answer(
        lambda prompt: {
            "decision": "edit",
            "fingerprint": prompt["fingerprint"],
            "args": {"product": "AA", "quantity": 4, "payment": "pickup"},
        }
    )

    assert (await talk.result()).status == "success"
    assert ran == [{"product": "AA", "quantity": 4, "payment": "pickup"}]


def test_an_edit_with_a_key_the_schema_does_not_name_is_refused():
    place_order = ordering([])

    with pytest.raises(DecisionRefused) as refused:
        validate_edit(place_order, {"product": "AA", "quantity": 2, "discount": 100})

    assert refused.value.field == "args.discount"


class Line(BaseModel):
    coffee: str
    quantity: int


def test_an_edit_nested_in_a_list_of_objects_is_checked_key_by_key():
    @tool(description="Order lines.")
    async def order_lines(lines: list[Line] | None = None) -> dict:
        return {}

    validate_edit(order_lines, {"lines": [{"coffee": "AA", "quantity": 1}]})
    with pytest.raises(DecisionRefused) as refused:
        validate_edit(order_lines, {"lines": [{"coffee": "AA", "quantity": 1, "price": 0}]})
    assert refused.value.field == "args.lines.0.price"


def test_a_schema_that_allows_more_keys_takes_them():
    @tool(description="Free-form.")
    async def tag(labels: dict[str, str]) -> dict:
        return {}

    validate_edit(tag, {"labels": {"any": "key", "goes": "here"}})


def test_an_edit_past_the_stores_json_bounds_is_refused():
    place_order = ordering([])
    deep: Any = "bottom"
    for _ in range(900):
        deep = {"a": deep}

    with pytest.raises(DecisionRefused, match=f"deeper than {MAX_EDIT_DEPTH}"):
        validate_edit(place_order, {"product": deep, "quantity": 1})
    with pytest.raises(DecisionRefused, match=f"at most {MAX_EDIT_BYTES}"):
        validate_edit(place_order, {"product": "x" * (MAX_EDIT_BYTES + 1), "quantity": 1})
