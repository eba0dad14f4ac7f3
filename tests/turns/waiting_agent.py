"""A test agent whose tools wait on people: a staff approval, a permission prompt, a slot.

GLOVE_AGENTS = {"waiter": {"factory": "tests.turns.waiting_agent.waiter_agent",
                           "model": "waiter-test"}} (the `waiter` fixture). The model is
stateless: it answers from the conversation (a request calls the tool its words name, tool
results get a closing reply), so a turn continued on another worker asks it only for what is
still to say; MODEL_CALLS counts its prompts.
"""

from __future__ import annotations

from typing import Any

from gloveapp.core import ApprovalPolicy, Message, ScriptedModel, ToolCall, tool
from gloveapp.core.providers.registry import register_model_provider
from gloveapp.core.tools import ToolContext

ORDER = {"product": "Yirgacheffe", "quantity": 12}
RAN: list[tuple[str, Any]] = []
MODEL_CALLS: list[str] = []


@tool(
    description="Place a wholesale order.",
    approval=ApprovalPolicy(decisions=("approve", "edit", "reject"), assignee_group="baristas"),
    retry_safe=False,
)
async def place_order(product: str, quantity: int) -> dict:
    RAN.append(("place_order", {"product": product, "quantity": quantity}))
    return {"ordered": quantity, "product": product}


@tool(description="Charge the card on file.", requires_permission=True, retry_safe=False)
async def charge_card(amount: int) -> dict:
    RAN.append(("charge_card", amount))
    return {"charged": amount}


@tool(description="Ask the customer to confirm the order.", retry_safe=False)
async def confirm_order(ctx: ToolContext, total: int) -> dict:
    answer = await ctx.display.push_and_wait(input={"total": total})
    RAN.append(("confirm_order", answer))
    return {"confirmed": answer == "confirm"}


CALLS = {
    "order": ("place_order", ORDER),
    "charge": ("charge_card", {"amount": 42}),
    "confirm": ("confirm_order", {"total": 42}),
}


def waiter_agent() -> dict:
    return {
        "title": "Waiter",
        "system_prompt": "You wait on people.",
        "tools": [place_order, charge_card, confirm_order],
    }


def _respond(messages: list[Message], tools: Any) -> Message | str:
    last = messages[-1]
    MODEL_CALLS.append(last.text)
    if last.tool_results:
        return "All done."
    word = (last.text or "").split()[0] if last.text else ""
    name, args = CALLS.get(word, (None, None))
    if name is None:
        return f"Hello: {last.text}"
    return Message(sender="agent", text="", tool_calls=[ToolCall(tool_name=name, input_args=args)])


def _model(model: str = "", **kwargs: Any) -> ScriptedModel:
    return ScriptedModel(respond=_respond)


def register() -> None:
    register_model_provider("waiter-test", _model, replace=True)
