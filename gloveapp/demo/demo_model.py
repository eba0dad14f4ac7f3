"""The offline demo model: a rule-based stand-in that drives the coffee shop's tools.

With no model configured (`GLOVE_MODEL` empty) the project still shows the whole Glove flow
offline: the catalogue, a stock check, the restock watch through the inbox, the cart and a
checkout with its confirmation and permission prompts. This model reads the latest user
message (or the latest tool results) and picks a reply by a handful of keyword rules. It says
so in its first reply: it is not an AI and must never pass for one.

Django-free (like `gloveapp.core`): a `ScriptedModel` whose rules answer every prompt
(`respond`), streamed like a real adapter; it knows the coffee names from
`gloveapp.demo.catalogue`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gloveapp.core.providers.base import ToolSpec
from gloveapp.core.providers.scripted import ScriptedModel, ScriptedTurn
from gloveapp.core.types import Message, ToolResult
from gloveapp.demo.catalogue import CatalogueEntry, find_entry
from gloveapp.demo.demo_extensions import describe_extension_result, use_extension
from gloveapp.demo.demo_mesh import (
    answer_mesh_question,
    ask_roastery,
    call_message,
    describe_sent,
    reply_with_stock,
    without_echoes,
)
from gloveapp.demo.demo_restock import (
    ADD_OFFER,
    WATCH_OFFER,
    WATCH_OFFERS,
    check_answered_watches,
    check_before_watching,
    follow_stock_check,
    money,
)

DISCLOSURE = (
    "(I'm the offline demo model: a rule-based stand-in, not an AI. I follow simple keyword "
    "rules to drive the coffee shop's tools. Set GLOVE_MODEL and an API key for a real model.)"
)
CAPABILITIES = (
    'I can show the menu, check stock (try "do you have Yirgacheffe?"), add coffee to your '
    'cart ("add 2 Kenya AA"), show your cart, watch for a restock, and check out '
    '("checkout", or "checkout, pay at pickup").'
)

_BANNER_LINE = re.compile(
    r'^- \[(?P<tag>[^\]]+)\] Request: "(?P<request>.*)" -> Response: "(?P<response>.*)" '
    r"\(resolved [^)]*\)$"
)
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "a couple of": 2}
_YES = re.compile(r"^\s*(yes|yeah|yep|yup|sure|please|ok|okay|y|go ahead|do it)\b")
_NO = re.compile(r"^\s*(no|nope|nah|not now)\b")
_CHECKOUT = re.compile(r"\b(check ?out|place (the |my )?order|pay now|buy now)\b")
_PICKUP = re.compile(r"\b(pick ?up|in store|in-store|cash)\b")
_WATCH = re.compile(r"\b(watch|notify|let me know|tell me when|restock)\b")
_ADD = re.compile(r"\b(add|buy|take|want|order|get me|i'?ll have)\b")
_CART = re.compile(r"\b(cart|basket|bag so far)\b")
_MENU = re.compile(
    r"\b(menu|catalogu?e|coffees|beans|sell|offer|prices?|options|what do you have)\b"
)

Intent = tuple[str, dict[str, Any], str]  # (tool name, input, text shown with the call)


class DemoModel(ScriptedModel):
    """A `ModelAdapter` that answers by rules. Honest about it, deterministic, free."""

    def __init__(
        self, *, find_product: Callable[[str], CatalogueEntry | None] = find_entry
    ) -> None:
        super().__init__(respond=self._answer, stream=True, label="demo", record_messages=False)
        self.name = "demo"
        self._find = find_product

    def _answer(self, messages: list[Message], tools: list[ToolSpec] | None) -> ScriptedTurn:
        if messages and messages[-1].is_compaction_request:
            reply = _say(self._summary(messages))
        else:
            reply = self._reply(messages, {tool.name: tool for tool in tools or []})
            if reply.text and not _has_spoken(messages):
                reply.text = f"{DISCLOSURE}\n\n{reply.text}"
        return ScriptedTurn(
            reply=reply,
            tokens_in=sum(len(message.text) for message in messages) // 4 + 1,
            tokens_out=len(reply.text) // 4 + 1,
        )

    # -- choosing a reply -------------------------------------------------------------------
    def _reply(self, messages: list[Message], specs: dict[str, ToolSpec]) -> Message:
        tools = set(specs)
        context = _without_trailing_reminders(messages)
        if not context:
            return _say(CAPABILITIES)
        last = context[-1]
        if last.sender == "user" and last.tool_results:
            follow_up = reply_with_stock(last.tool_results, context, tools) or (
                follow_stock_check(last.tool_results, context, tools, self._find)
            )
            return follow_up or _say(self._describe_results(last.tool_results, context))
        ask = _current_ask(context)
        news = [line for message in ask for line in _resolved_lines(message)]
        if news:
            answer = answer_mesh_question(news, tools, self._find) or (
                check_answered_watches(news, tools, self._find)
            )
            return answer or _say(self._relay(without_echoes(news)))
        text = last.text.strip()
        used = use_extension(text, specs)
        if used is not None:
            return used
        asked = ask_roastery(text, tools, self._find)
        if asked is not None:
            return asked
        intent = self._intent(text.lower(), _last_agent_text(context))
        if isinstance(intent, str):
            return _say(intent)
        tool_name, tool_input, preface = intent
        if tool_name == "checkout":
            lines = _cart_lines(context)
            threshold = _approval_bags()
            if threshold and sum(line["quantity"] for line in lines) > threshold:
                # A large order names its lines, for a barista to approve (or change).
                tool_input = {**tool_input, "lines": lines}
        if tool_name not in tools:
            return _say(f"I would use the {tool_name} tool for that, but this agent has none.")
        return call_message(tool_name, tool_input, preface)

    def _intent(self, text: str, previous: str) -> Intent | str:
        product = self._find(text)
        # The coffee of the agent's last offer ("Shall I add a bag of Kenya AA ..."), if any.
        offer = previous[previous.rfind("Shall I") :] if "Shall I" in previous else ""
        offered = self._find(offer) if offer else None
        if not text:
            return CAPABILITIES
        if _CHECKOUT.search(text):
            payment = "pickup" if _PICKUP.search(text) else "saved_card"
            return ("checkout", {"payment": payment}, "Let me get your order ready.")
        watch_offered = any(words in offer for words in WATCH_OFFERS)
        if _WATCH.search(text) or (_YES.search(text) and watch_offered):
            watched = product or offered
            if watched is None:
                return "Which coffee should I watch for?"
            # Never a watch for a coffee on the shelf: the stock result decides (demo_restock).
            return check_before_watching(watched)
        if _YES.search(text) and "Shall I add" in previous and offered is not None:
            return (
                "add_to_cart",
                {"coffee": offered.name, "quantity": 1},
                f"Adding {offered.name} to your cart.",
            )
        if _NO.search(text):
            return "No problem. " + CAPABILITIES
        if product is not None and _ADD.search(text):
            quantity = _quantity(text)
            return (
                "add_to_cart",
                {"coffee": product.name, "quantity": quantity},
                f"Adding {quantity} x {product.name} to your cart.",
            )
        if _CART.search(text):
            return ("view_cart", {}, "Here's your cart.")
        if product is not None:
            return ("check_stock", {"coffee": product.name}, f"Let me check {product.name}.")
        if _MENU.search(text):
            return ("get_catalogue", {}, "Here's what we're pouring.")
        return "Hello! " + CAPABILITIES

    def _relay(self, news: list[dict[str, str]]) -> str:
        # No offer of a bag here: only a stock result may promise one (demo_restock).
        return "\n".join(f"From the inbox: {item['response']}" for item in news)

    # -- describing tool results ------------------------------------------------------------
    def _describe_results(self, results: list[ToolResult], context: list[Message]) -> str:
        calls = {
            call.id: call
            for message in context
            if message.sender == "agent"
            for call in message.tool_calls or []
        }
        lines = []
        for result in results:
            call = calls.get(result.call_id)
            lines.append(self._describe(result, call.input_args if call else None))
        return "\n".join(lines)

    def _describe(self, result: ToolResult, tool_input: Any) -> str:
        name, outcome = result.tool_name, result.result
        data = outcome.data if isinstance(outcome.data, dict) else {}
        if outcome.status == "error":
            message = outcome.message or "it failed"
            if message.startswith("Permission denied"):
                return "You didn't allow that, so I haven't done it. Nothing was charged."
            if data.get("reason") == "out_of_stock":
                return f"Sorry, {message} " + WATCH_OFFER.format(name=data.get("coffee", "it"))
            return f"That didn't work: {message}"
        if outcome.status == "aborted":
            return "That was stopped before it finished."
        describe = _DESCRIBERS.get(name)
        if describe is None:
            return describe_extension_result(name, outcome.data) or f"Done ({name})."
        return describe(data, tool_input if isinstance(tool_input, dict) else {})

    def _summary(self, messages: list[Message]) -> str:
        asked = [m.text for m in messages if m.sender == "user" and not m.tool_results and m.text][
            -5:
        ]
        return "Summary by the offline demo model. The customer recently said: " + "; ".join(asked)


# -- describers, one per coffee tool ---------------------------------------------------------
def _describe_catalogue(data: dict[str, Any], tool_input: dict[str, Any]) -> str:
    coffees = data.get("coffees", [])
    out = [c["name"] for c in coffees if not c.get("in_stock")]
    text = f"That's our menu: {len(coffees)} coffees."
    if out:
        text += f" Out of stock right now: {', '.join(out)}."
    return text + ' Ask about any of them, or say "add Kenya AA".'


def _describe_stock(data: dict[str, Any], tool_input: dict[str, Any]) -> str:
    name = data.get("name", "That coffee")
    if data.get("in_stock"):
        return (
            f"{name} is in stock: {data.get('bags')} bags at {money(data.get('price_cents', 0))}. "
            + ADD_OFFER.format(name=name)
        )
    return f"{name} is out of stock right now. " + WATCH_OFFER.format(name=name)


def _describe_cart_line(data: dict[str, Any], tool_input: dict[str, Any]) -> str:
    added = data.get("added", {})
    cart = data.get("cart", {})
    return (
        f"Added {added.get('quantity', 1)} x {added.get('name', 'it')}. Your cart comes to "
        f'{money(cart.get("total_cents", 0))}. Say "checkout" when you\'re ready.'
    )


def _describe_cart(data: dict[str, Any], tool_input: dict[str, Any]) -> str:
    lines = data.get("lines", [])
    if not lines:
        return "Your cart is empty."
    items = ", ".join(f"{line['quantity']} x {line['name']}" for line in lines)
    return f"Your cart: {items}, {money(data.get('total_cents', 0))} in all."


def _describe_watch(data: dict[str, Any], tool_input: dict[str, Any]) -> str:
    request = tool_input.get("request", "your request")
    return (
        f"Done: I'm watching for you (\"{request}\"). It is listed under Watching; I'll tell "
        "you as soon as it's resolved."
    )


def _describe_checkout(data: dict[str, Any], tool_input: dict[str, Any]) -> str:
    if data.get("status") == "placed":
        how = (
            "paid with your saved card"
            if data.get("payment") == "saved_card"
            else ("to pay at pickup")
        )
        return (
            f"Order #{data.get('order_number')} is placed: "
            f"{money(data.get('total_cents', 0))}, {how}. Thank you!"
        )
    return "No problem, I haven't placed the order. Your cart is still there."


_DESCRIBERS: dict[str, Callable[[dict[str, Any], dict[str, Any]], str]] = {
    "get_catalogue": _describe_catalogue,
    "check_stock": _describe_stock,
    "add_to_cart": _describe_cart_line,
    "view_cart": _describe_cart,
    "glove_post_to_inbox": _describe_watch,
    "checkout": _describe_checkout,
    "glove_mesh_send_message": describe_sent,
}


# -- reading the conversation ----------------------------------------------------------------
def _say(text: str) -> Message:
    return Message(sender="agent", text=text)


def _has_spoken(messages: list[Message]) -> bool:
    return any(m.sender == "agent" and m.text.strip() for m in messages)


def _is_reminder(message: Message) -> bool:
    return message.framework_context is not None and "still pending" in message.text[:200]


def _without_trailing_reminders(messages: list[Message]) -> list[Message]:
    # The blocking reminder rides at the very end of every prompt; the question is before it.
    trimmed = list(messages)
    while trimmed and _is_reminder(trimmed[-1]):
        trimmed.pop()
    return trimmed


def _current_ask(messages: list[Message]) -> list[Message]:
    """The user messages since the agent last spoke: the inbox banner and the new message."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].sender == "agent":
            return messages[index + 1 :]
    return list(messages)


def _last_agent_text(messages: list[Message]) -> str:
    return next((m.text for m in reversed(messages) if m.sender == "agent" and m.text), "")


def _resolved_lines(message: Message) -> list[dict[str, str]]:
    if message.sender != "user" or not message.text.startswith("[Inbox:"):
        return []
    first, *rest = message.text.split("\n")
    if "resolved]" not in first:
        return []
    found = []
    for line in rest:
        match = _BANNER_LINE.match(line)
        if match:
            found.append(match.groupdict())
    return found


def _approval_bags() -> int:
    """GLOVE_DEMO_APPROVAL_BAGS, read only when a checkout is asked for: this model also runs
    without Django (the runtime's tests), where no order needs an approval."""
    try:
        from gloveapp.demo.coffee import approval_bags

        return approval_bags()
    except Exception:  # Django is not installed or configured here
        return 0


def _cart_lines(messages: list[Message]) -> list[dict[str, Any]]:
    """The cart as the conversation last showed it (an add or a view), unless an order was
    placed since: [{"coffee": name, "quantity": bags}]."""
    for message in reversed(messages):
        for result in reversed(message.tool_results or []):
            data = result.result.data if isinstance(result.result.data, dict) else {}
            if result.tool_name == "checkout" and data.get("status") == "placed":
                return []
            if result.tool_name in ("add_to_cart", "view_cart"):
                cart = data.get("cart", data)
                lines = cart.get("lines") if isinstance(cart, dict) else None
                if isinstance(lines, list):
                    return [
                        {"coffee": line["name"], "quantity": line["quantity"]}
                        for line in lines
                        if isinstance(line, dict) and "name" in line and "quantity" in line
                    ]
    return []


def _quantity(text: str) -> int:
    number = re.search(r"\b(\d{1,2})\b", text)
    if number:
        return max(1, int(number.group(1)))
    for word, value in _NUMBER_WORDS.items():
        if re.search(rf"\b{word}\b", text):
            return value
    return 1
