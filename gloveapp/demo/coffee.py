"""Brew, the seed's coffee-shop agent: a catalogue, a cart, an out-of-stock Yirgacheffe with a
restock watch through the inbox, and a checkout that asks for confirmation in the page.

Each tool names its colocated renderers beside its logic (Glove's `render`/`renderResult`):
`result_template` draws a finished call from its `render_data`, so a reloaded page shows past
results as they first appeared; `checkout` also has a `slot_template`, the Confirm/Cancel
prompt it pushes while it waits. Paying with the saved card `requires_permission`, so the
permission prompt (allow once / always / deny) shows in the demo; paying at pickup does not.

The tools are thin: state lives in the database (`shop.py`), keyed by the conversation's
session id (`ctx.store.identifier`), so it survives reloads, restarts and other processes.
"""

from __future__ import annotations

from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from pydantic import BaseModel, Field

from gloveapp.agents.config import AgentSpec
from gloveapp.core.approvals.policy import ApprovalPolicy
from gloveapp.core.tools import CallSummary, ToolContext, tool
from gloveapp.core.types import ToolResultData
from gloveapp.demo import shop
from gloveapp.demo.catalogue import CATALOGUE, find_entry

TEMPLATES = "tools/coffee"
CONFIRM_ANSWERS = frozenset({"confirm", "confirmed", "yes", "true", "ok"})

SYSTEM_PROMPT = """\
You are Brew, the friendly assistant of a small specialty coffee shop. You help customers
browse the coffees, check stock, fill their cart and check out.

## Tools
- get_catalogue lists every coffee with its price and stock; check_stock looks at one.
- add_to_cart and view_cart manage the customer's cart. Never add a coffee that is out of stock.
- checkout shows the customer the order to confirm; it places the order only if they confirm.
  Paying with the saved card asks the customer's permission first; "pickup" pays in the shop.
  Pass `lines` (every coffee and quantity in the cart): orders of many bags wait for a
  barista's approval, who may change the quantities; tell the customer what was approved.

## Async Notifications
- Some requests can't be fulfilled immediately (out of stock, pending approval, etc.)
- Use glove_post_to_inbox to track these for the customer
- Use a descriptive tag (e.g. "restock_watch", "approval_pending")
- Describe what the customer wants in natural language in the request field
- Set blocking=false unless the customer literally cannot proceed without the result
- When an inbox item is resolved, you'll see the response — inform the customer

For example, when a coffee is out of stock, offer to watch for it; if the customer agrees,
call glove_post_to_inbox with tag "restock_watch" and a request such as
"Notify when Yirgacheffe is back in stock". Check the stock first: never watch for a coffee
that is in stock. When a watch is answered, check the stock again before offering a bag; if the
shelf is still empty, say so and offer to keep watching.

Keep answers short and warm. Prices are in US dollars.
"""

COMPACTION_INSTRUCTIONS = (
    "Summarize the conversation. Preserve the customer's cart, orders placed, coffees they "
    "asked about and any restock watches."
)


def _session_id(ctx: ToolContext) -> str:
    return str(ctx.store.identifier)


def _refusal(error: shop.ShopError) -> ToolResultData:
    data: dict[str, Any] = {"reason": type(error).__name__}
    if isinstance(error, shop.OutOfStock):
        data = {"reason": "out_of_stock", "coffee": error.coffee.name, "bags": error.coffee.stock}
    return ToolResultData(status="error", message=str(error), data=data, render_data=data)


@tool(result_template=f"{TEMPLATES}/catalogue_result.html")
async def get_catalogue() -> ToolResultData:
    """List every coffee Brew sells, with its origin, tasting notes, price and stock."""
    coffees = [shop.coffee_data(c) for c in await sync_to_async(shop.coffee_list)()]
    return ToolResultData.success({"coffees": coffees}, render_data={"coffees": coffees})


@tool(result_template=f"{TEMPLATES}/stock_result.html")
async def check_stock(coffee: str) -> ToolResultData:
    """Check whether one coffee is in stock and how many bags are left.

    `coffee` is its name, e.g. "Ethiopia Yirgacheffe" or "Kenya AA"."""
    try:
        found = await sync_to_async(shop.coffee_find)(coffee)
    except shop.ShopError as error:
        return _refusal(error)
    data = shop.coffee_data(found)
    return ToolResultData.success(data, render_data=data)


@tool(result_template=f"{TEMPLATES}/cart_result.html")
async def add_to_cart(ctx: ToolContext, coffee: str, quantity: int = 1) -> ToolResultData:
    """Add bags of a coffee to the customer's cart. Fails when the coffee is out of stock."""
    try:
        data = await sync_to_async(shop.cart_add)(
            session_id=_session_id(ctx), coffee_name=coffee, quantity=quantity
        )
    except shop.ShopError as error:
        return _refusal(error)
    return ToolResultData.success(data, render_data=data["cart"] | {"added": data["added"]})


@tool(result_template=f"{TEMPLATES}/cart_result.html")
async def view_cart(ctx: ToolContext) -> ToolResultData:
    """Show what is in the customer's cart and its total."""
    cart = await sync_to_async(shop.cart_summary)(session_id=_session_id(ctx))
    return ToolResultData.success(cart, render_data=cart)


def _pays_with_saved_card(tool_input: Any) -> bool:
    payment = tool_input.get("payment", "saved_card") if isinstance(tool_input, dict) else None
    return payment in (None, "saved_card")


def is_confirmation(answer: Any) -> bool:
    """What the Confirm button (or an API client) may send back for "yes"."""
    if isinstance(answer, dict):
        answer = answer.get("confirmed", answer.get("value"))
    if isinstance(answer, bool):
        return answer
    return isinstance(answer, str) and answer.strip().lower() in CONFIRM_ANSWERS


class CheckoutLine(BaseModel):
    # The enum is for the people who edit an order (a select on /approvals/); the model's
    # word for a coffee ("Colombia") is still accepted and matched by the shop.
    coffee: str = Field(json_schema_extra={"enum": [entry.name for entry in CATALOGUE]})
    quantity: int = Field(ge=1, le=99)


PAYMENT_WORDS = {"saved_card": "pay with the saved card", "pickup": "pay at pickup"}


def checkout_summary(args: dict[str, Any]) -> CallSummary:
    """ "Checkout: 6 x Colombia Huila, $96.00, pay at pickup": what the customer and the
    barista read of a pending checkout (prices from the catalogue, no database read)."""
    parts, total_cents, priced = [], 0, True
    for line in args.get("lines") or []:
        if not isinstance(line, dict):
            continue
        quantity, name = line.get("quantity"), str(line.get("coffee") or "a coffee")
        entry = find_entry(name)
        parts.append(f"{quantity} \u00d7 {entry.name if entry else name}")
        if entry is not None and isinstance(quantity, int):
            total_cents += quantity * entry.price_cents
        else:
            priced = False
    total = shop.money(total_cents) if parts and priced else None
    payment = PAYMENT_WORDS.get(str(args.get("payment") or "saved_card"), "")
    text = "Checkout: " + ", ".join(part for part in (", ".join(parts), total, payment) if part)
    return CallSummary(text=text, total=total)


def approval_bags() -> int:
    return int(getattr(settings, "GLOVE_DEMO_APPROVAL_BAGS", 0) or 0)


def _bags(tool_input: Any) -> int:
    lines = tool_input.get("lines") if isinstance(tool_input, dict) else None
    if not isinstance(lines, list):
        return 0
    quantities = [line.get("quantity") for line in lines if isinstance(line, dict)]
    return sum(q for q in quantities if isinstance(q, int) and not isinstance(q, bool))


def _over_threshold(tool_input: Any) -> bool:
    threshold = approval_bags()
    return bool(threshold) and _bags(tool_input) > threshold


# A large order waits for the shop: a barista checks the quantities (and may change them),
# a manager takes over after two minutes; nobody deciding within 15 minutes cancels it.
LARGE_ORDER = ApprovalPolicy(
    decisions=("approve", "edit", "reject"),
    assignee_group="baristas",
    escalate_to_group="managers",
    escalate_after=120,
    expire_after=900,
    on_expire="reject",
    when=_over_threshold,
)


@tool(
    label="Checkout",
    summary=checkout_summary,
    requires_permission=_pays_with_saved_card,
    approval=LARGE_ORDER,
    display_strategy="hide-on-complete",
    slot_template=f"{TEMPLATES}/checkout_slot.html",
    result_template=f"{TEMPLATES}/checkout_result.html",
    # What the Confirm / Cancel buttons send; an API client sends the same.
    slot_answer_schema={
        "type": "object",
        "properties": {"confirmed": {"type": "boolean"}},
        "required": ["confirmed"],
    },
)
async def checkout(
    ctx: ToolContext,
    payment: Literal["saved_card", "pickup"] = "saved_card",
    lines: list[CheckoutLine] | None = None,
) -> ToolResultData:
    """Check out the customer's cart. Shows them the order with Confirm / Cancel buttons and
    places it only when they confirm. `payment`: "saved_card" (charges the card on file,
    asks the customer's permission) or "pickup" (pay in the shop). `lines`: the cart's
    coffees and quantities as the customer confirmed them; required for an order of more
    bags than the shop's threshold, which a barista approves (and may change) first."""
    session_id = _session_id(ctx)
    if lines:
        try:
            await sync_to_async(shop.cart_set_quantities)(
                session_id=session_id, lines=[line.model_dump() for line in lines]
            )
        except shop.ShopError as error:
            return _refusal(error)
    cart = await sync_to_async(shop.cart_summary)(session_id=session_id)
    if not cart["lines"]:
        return _refusal(shop.EmptyCart())
    threshold = approval_bags()
    if (
        threshold
        and cart["count"] > threshold
        and _bags({"lines": _as_lines(lines)}) != cart["count"]
    ):
        # Only a call naming every bag went past the approval gate: ask for one that does.
        return ToolResultData.error(
            f"Orders of more than {threshold} bags need a staff approval: call checkout again "
            "with `lines` naming every coffee and quantity in the cart."
        )
    answer = await ctx.display.push_and_wait(input={**cart, "payment": payment})
    if not is_confirmation(answer):
        data = {"status": "cancelled", "total_cents": cart["total_cents"], "total": cart["total"]}
        return ToolResultData.success(data, render_data=data)
    try:
        order = await sync_to_async(shop.order_place)(session_id=session_id, payment=payment)
    except shop.ShopError as error:
        return _refusal(error)
    data = shop.order_data(order)
    return ToolResultData.success(data, render_data=data)


def _as_lines(lines: list[CheckoutLine] | None) -> list[dict[str, Any]]:
    return [line.model_dump() for line in lines or []]


def build_agent() -> AgentSpec:
    """The factory `GLOVE_AGENTS["coffee"]` names."""
    return AgentSpec(
        name="coffee",
        title="Brew coffee shop",
        system_prompt=SYSTEM_PROMPT,
        tools=[get_catalogue, check_stock, add_to_cart, view_cart, checkout],
        compaction_instructions=COMPACTION_INSTRUCTIONS,
    )
