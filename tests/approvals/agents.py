"""A test agent whose one tool needs a staff approval, and a model that calls it once.

GLOVE_AGENTS = {"orders": {"factory": "tests.approvals.agents.orders_agent",
                           "model": "approvals-test"}} (the `orders_agent` fixture).
"""

from __future__ import annotations

from gloveapp.core import ApprovalPolicy, Message, ScriptedModel, ToolCall, tool
from gloveapp.core.providers.registry import register_model_provider
from gloveapp.core.tools import CallSummary

ORDER = {"product": "Yirgacheffe", "quantity": 12}
# What the tool ran with, in this process (the test's worker runs in the test's loop).
RAN: list[dict] = []


def order_summary(args: dict) -> CallSummary:
    quantity, product = args["quantity"], args["product"]
    return CallSummary(f"Wholesale: {quantity} bags of {product}", total=f"${quantity * 10}.00")


@tool(
    description="Place a wholesale order.",
    summary=order_summary,
    approval=ApprovalPolicy(
        decisions=("approve", "edit", "reject", "respond"),
        assignee_group="baristas",
        escalate_to_group="managers",
    ),
)
async def place_order(product: str, quantity: int) -> dict:
    RAN.append({"product": product, "quantity": quantity})
    return {"ordered": quantity, "product": product}


def orders_agent() -> dict:
    return {"title": "Orders", "system_prompt": "You place orders.", "tools": [place_order]}


def _model(model: str = "", **kwargs) -> ScriptedModel:
    call = Message(
        sender="agent",
        text="",
        tool_calls=[ToolCall(tool_name="place_order", input_args=dict(ORDER))],
    )
    return ScriptedModel([call, "Your order is placed."])


def register() -> None:
    register_model_provider("approvals-test", _model, replace=True)
