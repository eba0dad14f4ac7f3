"""The demo's built-in gates (the large-order approval policy, the saved-card permission)
read the arguments as the checkout receives them: a string, float or extra-key form of a
large order asks the barista all the same."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gloveapp.core.approvals.policy import APPROVAL_RENDERER
from gloveapp.core.display import PERMISSION_RENDERER
from gloveapp.demo.coffee import checkout
from tests.core.support import calls, make_glove

SIX_AS_A_STRING = {"payment": "pickup", "lines": [{"coffee": "Colombia Huila", "quantity": "6"}]}
SIX_AS_A_FLOAT = {"payment": "pickup", "lines": [{"coffee": "Colombia Huila", "quantity": 6.0}]}
SIX_WITH_EXTRA_KEYS = {
    "payment": "pickup",
    "lines": [{"coffee": "Colombia Huila", "quantity": 6, "gift": True}],
    "rush": "yes",
}
THREE_AND_THREE_AS_STRINGS = {
    "payment": "pickup",
    "lines": [
        {"coffee": "Colombia Huila", "quantity": "3"},
        {"coffee": "Kenya AA", "quantity": 3.0},
    ],
}


async def first_prompt(args: dict[str, Any]) -> dict[str, Any]:
    """Run one checkout call and return the first prompt it hands over (then refuse it, so
    nothing runs)."""
    glove, _, _ = make_glove([calls(("checkout", args)), "done"], tools=[checkout])
    answering = asyncio.create_task(glove.process_request("checkout"))
    for _ in range(1000):
        if glove.display_manager.stack:
            break
        await asyncio.sleep(0)
    [slot] = glove.display_manager.stack
    glove.display_manager.reject(slot.id, "test over")
    await answering
    return slot.input


@pytest.mark.parametrize(
    "args",
    [SIX_AS_A_STRING, SIX_AS_A_FLOAT, SIX_WITH_EXTRA_KEYS, THREE_AND_THREE_AS_STRINGS],
    ids=["string", "float", "extra-keys", "two-lines"],
)
async def test_a_large_order_in_any_form_asks_the_barista(settings, args):
    settings.GLOVE_DEMO_APPROVAL_BAGS = 5

    prompt = await first_prompt(args)

    assert prompt["renderer"] == APPROVAL_RENDERER
    # The barista sees (and the fingerprint binds) what will run: integers, no extra keys.
    quantities = [line["quantity"] for line in prompt["toolInput"]["lines"]]
    assert sum(quantities) == 6 and all(type(q) is int for q in quantities)
    assert "rush" not in prompt["toolInput"]
    assert all(set(line) == {"coffee", "quantity"} for line in prompt["toolInput"]["lines"])


@pytest.mark.parametrize(
    "args",
    [
        {"lines": [{"coffee": "Colombia Huila", "quantity": "1"}]},  # payment left out
        {"lines": [{"coffee": "Colombia Huila", "quantity": 1.0}], "card": "pickup"},
    ],
    ids=["default", "extra-key"],
)
async def test_the_saved_card_permission_reads_the_payment_that_runs(settings, args):
    settings.GLOVE_DEMO_APPROVAL_BAGS = 5

    prompt = await first_prompt(args)

    assert prompt["renderer"] == PERMISSION_RENDERER
