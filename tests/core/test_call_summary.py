"""How a pending call reads to people: a tool's label and summary, and what an edit changed."""

from __future__ import annotations

from gloveapp.core.approvals.edits import args_changes, change_sentence
from gloveapp.core.tools import CallSummary, tool


def test_a_tool_without_a_label_reads_as_its_name_in_words():
    @tool
    async def add_to_cart(coffee: str) -> None:
        """Add a coffee."""

    @tool(label="Your cart")
    async def view_cart() -> None:
        """Show the cart."""

    assert add_to_cart.display_label == "Add to cart"
    assert view_cart.display_label == "Your cart"


def test_a_summary_may_be_text_or_a_call_summary_and_a_failing_one_reads_as_none():
    def order(args: dict) -> CallSummary:
        return CallSummary(f"Order: {args['quantity']} bags", total="$10.00")

    @tool(summary=order)
    async def place(quantity: int) -> None:
        """Order."""

    @tool(summary=lambda args: f"Book {args['day']}")
    async def book(day: str) -> None:
        """Book."""

    assert place.summarize({"quantity": 3}) == CallSummary("Order: 3 bags", total="$10.00")
    assert place.summarize({"quantity": 3}).to_dict()["customer"] == "Order: 3 bags"
    assert book.summarize({"day": "Friday"}) == CallSummary("Book Friday")
    assert book.summarize({}) is None  # a KeyError: the page shows the arguments instead
    assert book.summarize("not an object") is None
    long = book.summarize({"day": "x" * 900})
    assert long is not None and len(long.text) == 500 and long.text.endswith("\u2026")


def test_an_edit_reads_as_what_changed_in_words():
    before = {"payment": "pickup", "lines": [{"coffee": "Colombia Huila", "quantity": 6}]}
    after = {"payment": "saved_card", "lines": [{"coffee": "Colombia Huila", "quantity": 4}]}

    changes = args_changes(before, after)

    assert [change.path for change in changes] == ["payment", "lines.0.quantity"]
    assert change_sentence("A barista", changes) == (
        "A barista changed the payment from pickup to saved card and "
        "the quantity of Colombia Huila from 6 to 4."
    )
    assert args_changes(before, before) == [] and change_sentence("A barista", []) == ""
