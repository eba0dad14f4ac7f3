"""The offline demo model's restock story (Django-free, like the model itself).

Words about stock are not stock: a watch request, or the answer to a watch, may disagree with
the shelf (staff can answer a watch in the admin without restocking; bags can arrive while
the customer reads an offer). So the model looks at the shelf before each step of the story:
1. "watch for X" (or yes to a watch offer) -> `check_stock(X)`; its result -> in stock: say so
   and offer a bag, no watch; out of stock -> `glove_post_to_inbox`, the restock watch.
2. a resolved restock watch -> `check_stock(X)`; its result -> in stock: offer a bag; still
   out of stock: the answer came, but the coffee is not in stock yet; offer to keep watching.
Which step a stock result belongs to is read from the text of the call that asked for it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from gloveapp.core.types import Message, ToolCall, ToolResult
from gloveapp.demo.catalogue import RESTOCK_TAG, CatalogueEntry

STOCK_TOOL = "check_stock"
WATCH_TOOL = "glove_post_to_inbox"
WATCH_OFFER = "Shall I watch for {name} and tell you when it is back in stock?"
KEEP_WATCHING_OFFER = "Shall I keep watching for {name} and tell you when it is back in stock?"
ADD_OFFER = "Shall I add a bag of {name} to your cart?"
# The words of an offer a "yes" accepts as asking for a watch.
WATCH_OFFERS = ("Shall I watch", "Shall I keep watching")
# The calls' texts, which mark their stock results as steps 1 and 2.
_BEFORE_WATCHING = "before I set a watch."
_AFTER_ANSWER = "Let me check the shelf."


def money(cents: int) -> str:
    return f"${cents / 100:.2f}"


def _call(tool_name: str, tool_input: dict[str, Any]) -> ToolCall:
    return ToolCall(
        tool_name=tool_name, input_args=tool_input, id=f"toolu_demo_{uuid.uuid4().hex[:16]}"
    )


def watch_request(entry: CatalogueEntry) -> dict[str, Any]:
    """The restock watch's inbox item, in the seed's words."""
    # "Notify when Yirgacheffe is back in stock", the seed's wording.
    short = entry.aliases[0].capitalize() if entry.sku == "yirgacheffe" else entry.name
    return {
        "tag": RESTOCK_TAG,
        "request": f"Notify when {short} is back in stock",
        "blocking": False,
    }


def check_before_watching(entry: CatalogueEntry) -> tuple[str, dict[str, Any], str]:
    """Step 1's call, as the model's (tool name, input, text) intent."""
    return (STOCK_TOOL, {"coffee": entry.name}, f"Let me check {entry.name} {_BEFORE_WATCHING}")


def check_answered_watches(
    news: list[dict[str, str]],
    tools: set[str],
    find: Callable[[str], CatalogueEntry | None],
) -> Message | None:
    """Step 2's call: relay the news, then look at the shelf for every answered watch."""
    if STOCK_TOOL not in tools:
        return None
    lines, coffees = [], []
    for item in news:
        entry = find(item["request"]) or find(item["response"])
        if item["tag"] == RESTOCK_TAG and entry is not None:
            lines.append(f'Your restock watch for {entry.name} was answered: "{item["response"]}"')
            if entry not in coffees:
                coffees.append(entry)
        else:
            lines.append(f"From the inbox: {item['response']}")
    if not coffees:
        return None
    lines.append(_AFTER_ANSWER)
    calls = [_call(STOCK_TOOL, {"coffee": entry.name}) for entry in coffees]
    return Message(sender="agent", text="\n".join(lines), tool_calls=calls)


def follow_stock_check(
    results: list[ToolResult],
    context: list[Message],
    tools: set[str],
    find: Callable[[str], CatalogueEntry | None],
) -> Message | None:
    """The next step after a stock result of step 1 or 2; None for any other result."""
    asked_in = {
        call.id: message.text
        for message in context
        if message.sender == "agent"
        for call in message.tool_calls or []
    }
    lines: list[str] = []
    calls: list[ToolCall] = []
    for result in results:
        text = asked_in.get(result.call_id, "")
        data = result.result.data if isinstance(result.result.data, dict) else {}
        if result.tool_name != STOCK_TOOL or result.result.status != "success":
            continue
        name = str(data.get("name", "That coffee"))
        entry = find(name)
        shelf = f"{data.get('bags')} bags at {money(data.get('price_cents', 0))}"
        if text.endswith(_BEFORE_WATCHING):
            if data.get("in_stock"):
                lines.append(
                    f"Good news: {name} is in stock ({shelf}), so there is nothing to watch "
                    "for. " + ADD_OFFER.format(name=name)
                )
            elif entry is None or WATCH_TOOL not in tools:
                lines.append(
                    f"{name} is out of stock, but I have no way to watch for it here "
                    f"(this agent has no {WATCH_TOOL} tool)."
                )
            else:
                lines.append(f"{name} is out of stock. I'll set up a restock watch for it.")
                calls.append(_call(WATCH_TOOL, watch_request(entry)))
        elif text.endswith(_AFTER_ANSWER):
            if data.get("in_stock"):
                lines.append(
                    f"Good news: {name} is back in stock: {shelf}. " + ADD_OFFER.format(name=name)
                )
            else:
                lines.append(
                    f"The roastery answered your restock watch, but {name} is not in stock "
                    "yet: the shelf is still empty. " + KEEP_WATCHING_OFFER.format(name=name)
                )
    if not lines:
        return None
    return Message(sender="agent", text="\n".join(lines), tool_calls=calls or None)
