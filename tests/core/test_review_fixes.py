"""Review fixes: JSON-safe tool results, fire-and-forget result events, abortable and
rejectable permission prompts, one ask at a time per Glove."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import json
import logging
import math

import pytest
from pydantic import BaseModel

from gloveapp.core import AbortController, AbortError, MemoryStore, tool
from gloveapp.core.types import json_safe
from tests.core.support import calls, make_glove

DENIED = (
    'Permission denied for tool "charge". The user has not granted permission to run this tool.'
)


async def until(condition) -> None:
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never became true")


def tool_results(messages):
    return [r for m in messages if m.tool_results for r in m.tool_results]


# -- 1. tool results that are not JSON ----------------------------------------------------


class Receipt(BaseModel):  # dumped field by field, under the same rules as plain values
    total: decimal.Decimal
    at: datetime.datetime


@dataclasses.dataclass
class Line:
    item: str
    price: decimal.Decimal
    tags: set[str]


AT = datetime.datetime(2026, 5, 25, 18, 22, 14, 123456, tzinfo=datetime.UTC)

ODD_VALUES = [
    (decimal.Decimal("12.50"), 12.5),
    (AT, "2026-05-25T18:22:14.123Z"),
    (datetime.date(2026, 5, 25), "2026-05-25"),
    ({"b", "a"}, ["a", "b"]),
    ((1, "two"), [1, "two"]),
    (math.nan, None),
    (math.inf, None),
    (-math.inf, None),
    (decimal.Decimal("NaN"), None),
    (
        Receipt(total=decimal.Decimal("3.5"), at=AT),
        {"total": 3.5, "at": "2026-05-25T18:22:14.123Z"},
    ),
    (Line("AA", decimal.Decimal("4"), {"x"}), {"item": "AA", "price": 4.0, "tags": ["x"]}),
    ({1: "one", None: "none", False: "no"}, {"1": "one", "null": "none", "false": "no"}),
    (object, str(object)),
]


@pytest.mark.parametrize(("value", "expected"), ODD_VALUES)
async def test_a_tool_returning_a_non_json_value_still_gets_a_stored_success_result(
    value, expected
):
    ran = []

    @tool(description="Place an order.")
    async def place_order(coffee: str):
        ran.append(coffee)
        return {"order": 1042, "value": value}

    glove, model, store = make_glove(
        [calls(("place_order", {"coffee": "AA"})), "done"], tools=[place_order]
    )
    result = await glove.process_request("order AA")
    assert result.messages[-1].text == "done"
    assert ran == ["AA"]
    [stored] = tool_results(await store.get_messages())
    assert stored.result.status == "success"
    data = stored.result.data
    if isinstance(expected, list) and isinstance(value, set):
        data = {**data, "value": sorted(data["value"])}
    assert data == {"order": 1042, "value": expected}
    json.dumps(stored.to_dict(), allow_nan=False)
    # The model saw the real result, not "No result available".
    assert model.calls[1].messages[-1].tool_results[0].result.data == stored.result.data


async def test_render_data_is_made_json_safe_too():
    from gloveapp.core.types import ToolResultData

    @tool(description="Show a receipt.")
    async def show():
        return ToolResultData.success({"n": decimal.Decimal("1")}, render_data={"at": AT})

    glove, _, store = make_glove([calls(("show", {})), "done"], tools=[show])
    await glove.process_request("show")
    [stored] = tool_results(await store.get_messages())
    assert stored.result.data == {"n": 1.0}
    assert stored.result.render_data == {"at": "2026-05-25T18:22:14.123Z"}
    json.dumps(stored.to_dict(), allow_nan=False)


def test_json_safe_leaves_json_alone_and_breaks_cycles():
    plain = {"a": [1, 2.5, "x", None, True], "b": {"c": False}}
    assert json_safe(plain) == plain
    loop: list = []
    loop.append(loop)
    assert json_safe(loop) == ["[Circular]"]


# -- 2. a subscriber failing on a post-run tool_use_result ----------------------------------


async def test_a_subscriber_failing_on_a_tool_result_does_not_lose_the_result(caplog):
    ran = []

    @tool(description="Charge.")
    async def charge(amount: int) -> dict:
        ran.append(amount)
        return {"charged": amount}

    seen = []

    def broken(kind, data):
        if kind == "tool_use_result":
            raise ConnectionError("socket closed")

    glove, _, store = make_glove([calls(("charge", {"amount": 5})), "done"], tools=[charge])
    glove.add_subscriber(broken)
    glove.add_subscriber(lambda kind, data: seen.append(kind))
    with caplog.at_level(logging.ERROR, logger="gloveapp.core"):
        result = await glove.process_request("go")
    assert result.messages[-1].text == "done"
    assert ran == [5]
    [stored] = tool_results(await store.get_messages())
    assert stored.result.data == {"charged": 5}
    # Later subscribers still get the event, in order.
    assert "tool_use_result" in seen
    assert "socket closed" in caplog.text


async def test_a_subscriber_failing_on_a_skip_path_result_still_stops_the_request():
    def broken(kind, data):
        if kind == "tool_use_result":
            raise ConnectionError("socket closed")

    glove, _, _ = make_glove([calls(("missing", {})), "done"])
    glove.add_subscriber(broken)
    with pytest.raises(ConnectionError):
        await glove.process_request("go")


# -- 3. permission prompts -------------------------------------------------------------------


def charging_tool(ran):
    @tool(description="Charge a card.", requires_permission=True)
    async def charge(amount: int) -> str:
        ran.append(amount)
        return "charged"

    return charge


async def test_an_abort_ends_a_permission_prompt_at_once():
    ran = []
    glove, _, store = make_glove(
        [calls(("charge", {"amount": 5})), "never"], tools=[charging_tool(ran)]
    )
    events = []
    glove.add_subscriber(lambda kind, data: events.append((kind, data)))
    controller = AbortController()
    running = asyncio.create_task(glove.process_request("pay", abort=controller.signal))
    await until(lambda: glove.display_manager.stack)
    controller.abort()
    with pytest.raises(AbortError):
        await asyncio.wait_for(running, 1)
    assert ran == []
    results = [data["result"] for kind, data in events if kind == "tool_use_result"]
    assert results == [
        {"status": "aborted", "data": None, "message": "Tool execution was aborted by the user."}
    ]
    assert glove.display_manager.stack == []
    assert await store.get_permission("charge", {"amount": 5}) == "unset"


@pytest.mark.parametrize("how", ["reject", "remove", "clear"])
async def test_a_rejected_or_removed_permission_prompt_denies_this_call_only(how):
    ran = []
    glove, _, store = make_glove(
        [calls(("charge", {"amount": 5})), "ok", calls(("charge", {"amount": 5})), "ok"],
        tools=[charging_tool(ran)],
    )
    manager = glove.display_manager
    running = asyncio.create_task(glove.process_request("pay"))
    await until(lambda: manager.stack)
    [slot] = manager.stack
    if how == "reject":
        manager.reject(slot.id, "user closed the dialog")
    elif how == "remove":
        manager.remove_slot(slot.id)
    else:
        await manager.clear_stack()
    result = await asyncio.wait_for(running, 1)
    assert result.messages[-1].text == "ok"
    [stored] = tool_results(await store.get_messages())
    assert stored.result.to_dict() == {"status": "error", "data": None, "message": DENIED}
    assert ran == []
    # Not remembered: the next call asks again.
    assert await store.get_permission("charge", {"amount": 5}) == "unset"
    again = asyncio.create_task(glove.process_request("pay again"))
    await until(lambda: manager.stack)
    manager.resolve(manager.stack[0].id, True)
    await asyncio.wait_for(again, 1)
    assert ran == [5]


# -- 4. one ask at a time per Glove ----------------------------------------------------------


async def test_concurrent_requests_on_one_glove_run_one_after_the_other():
    @tool(description="Slow.")
    async def slow(n: int) -> dict:
        await asyncio.sleep(0.01)
        return {"n": n}

    async def reply(messages):
        await asyncio.sleep(0)
        if messages[-1].tool_results:
            return "ok"
        return calls(("slow", {"n": 1}))

    glove, _, store = make_glove([reply] * 4, tools=[slow], store=MemoryStore("s"))
    await asyncio.gather(glove.process_request("A"), glove.process_request("B"))
    shape = [
        (m.sender, m.text, bool(m.tool_calls), bool(m.tool_results))
        for m in await store.get_messages()
    ]
    turn = [
        ("agent", "", True, False),
        ("user", "tool results", False, True),
        ("agent", "ok", False, False),
    ]
    assert shape == [("user", "A", False, False), *turn, ("user", "B", False, False), *turn]
