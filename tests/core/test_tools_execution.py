"""Running tool calls: lookup, permission, validation, retries, results (contract §2.3)."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

from pydantic import BaseModel, Field

from gloveapp.core import (
    AbortController,
    AbortError,
    MemoryStore,
    Tool,
    ToolContext,
    ToolResultData,
    tool,
)
from tests.core.support import calls, make_glove


async def until(condition) -> None:
    """Let the running request advance until `condition()` holds."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def tool_results(store_messages):
    [message] = [m for m in store_messages if m.tool_results]
    return [r.result for r in message.tool_results]


@tool(description="Look up stock.")
async def check_stock(product: str) -> dict:
    return {"product": product, "bags": 3}


async def test_it_suggests_near_names_and_lists_every_tool_for_an_unknown_tool():
    glove, _, store = make_glove(
        [calls(("stock", {}), ("Check_Stock", {"product": "AA"})), "ok"], tools=[check_stock]
    )
    await glove.process_request("hi")
    unknown, found = tool_results(await store.get_messages())
    assert unknown.status == "error"
    assert unknown.data is None
    assert unknown.message == (
        "No tool called stock exists. Did you mean check_stock? Available tools: "
        "glove_update_tasks, glove_post_to_inbox, check_stock."
    )
    # Lookup ignores case.
    assert found.to_dict() == {"status": "success", "data": {"product": "AA", "bags": 3}}


async def test_it_joins_several_suggestions_with_or():
    @tool(description="x")
    async def stock_a() -> str:
        return ""

    @tool(description="x")
    async def stock_b() -> str:
        return ""

    store = _BareStore()
    glove, _, _ = make_glove([calls(("stock", {})), "ok"], store=store, tools=[stock_a, stock_b])
    await glove.process_request("hi")
    [result] = tool_results(store.messages)
    assert result.message == (
        "No tool called stock exists. Did you mean stock_a or stock_b? "
        "Available tools: stock_a, stock_b."
    )


async def test_it_says_when_no_tools_are_registered():
    store = _BareStore()
    glove, _, _ = make_glove([calls(("anything", {})), "ok"], store=store)
    await glove.process_request("hi")
    [result] = tool_results(store.messages)
    assert result.message == "No tool called anything exists. No tools are registered."


async def test_it_reports_invalid_input_as_a_zod_shaped_tree():
    class Input(BaseModel):
        product: str = Field(min_length=2)
        bags: int
        grind: Literal["fine", "coarse"]

    async def run(params, ctx):
        return "never"

    order = Tool(name="order", description="Order.", run=run, input_model=Input)
    glove, _, store = make_glove(
        [calls(("order", {"product": "A", "bags": "many", "grind": "medium"})), "ok"],
        tools=[order],
    )
    await glove.process_request("hi")
    [result] = tool_results(await store.get_messages())
    assert result.status == "error"
    assert result.message == "TOOL_INPUT_INVALID"
    prefix = "Failed to validate the input args provided for the tool:: "
    assert result.data.startswith(prefix)
    assert json.loads(result.data[len(prefix) :]) == {
        "errors": [],
        "properties": {
            "product": {"errors": ["Too small: expected string to have >=2 characters"]},
            "bags": {"errors": ["Invalid input: expected number, received string"]},
            "grind": {"errors": ['Invalid option: expected one of "fine"|"coarse"']},
        },
    }


async def test_it_reports_errors_inside_lists_under_items():
    glove, _, store = make_glove(
        [calls(("glove_update_tasks", {"todos": [{"content": "", "activeForm": "Doing"}]})), "ok"]
    )
    await glove.process_request("hi")
    [result] = tool_results(await store.get_messages())
    tree = json.loads(result.data.split(":: ", 1)[1])
    assert tree == {
        "errors": [],
        "properties": {
            "todos": {
                "errors": [],
                "items": [
                    {
                        "errors": [],
                        "properties": {
                            "content": {
                                "errors": ["Too small: expected string to have >=1 characters"]
                            },
                            "status": {
                                "errors": [
                                    'Invalid option: expected one of "pending"|"in_progress"|"completed"'
                                ]
                            },
                        },
                    }
                ],
            }
        },
    }


async def test_it_reports_a_non_object_input_at_the_root():
    glove, _, store = make_glove([calls(("glove_post_to_inbox", None)), "ok"])
    await glove.process_request("hi")
    [result] = tool_results(await store.get_messages())
    assert result.data.endswith('{"errors":["Invalid input: expected object, received null"]}')


async def test_it_retries_a_raising_tool_and_then_reports_the_exact_failure_text():
    attempts = []

    @tool(description="Flaky.")
    async def flaky() -> str:
        attempts.append(1)
        raise RuntimeError("warehouse offline")

    glove, _, store = make_glove([calls(("flaky", {})), "ok"], tools=[flaky])
    await glove.process_request("hi")
    [result] = tool_results(await store.get_messages())
    assert len(attempts) == 4
    assert result.to_dict() == {
        "status": "error",
        "data": None,
        "message": "Failed to run tool successfully. Tool Errored out with RuntimeError: "
        "warehouse offline, after 3/3 retries. ABORT EXECUTION",
    }


async def test_it_counts_retries_from_max_retries():
    attempts = []

    @tool(description="Flaky.")
    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 2:
            raise ValueError("once")
        return "fine"

    glove, _, store = make_glove([calls(("flaky", {})), "ok"], tools=[flaky])
    await glove.process_request("hi")
    [result] = tool_results(await store.get_messages())
    assert (len(attempts), result.data) == (2, "fine")


async def test_it_does_not_retry_a_returned_error():
    attempts = []

    @tool(description="Refuses.")
    async def refuses() -> ToolResultData:
        attempts.append(1)
        return ToolResultData.error("Out of beans.")

    glove, _, store = make_glove([calls(("refuses", {})), "ok"], tools=[refuses])
    await glove.process_request("hi")
    [result] = tool_results(await store.get_messages())
    assert (len(attempts), result.message) == (1, "Out of beans.")


async def test_it_runs_calls_serially_in_order_and_stamps_durations():
    order = []

    @tool(description="Slow.")
    async def slow(n: int) -> int:
        order.append(("start", n))
        await asyncio.sleep(0.01)
        order.append(("end", n))
        return n

    glove, _, store = make_glove(
        [calls(("slow", {"n": 1}), ("slow", {"n": 2})), "ok"], tools=[slow]
    )
    await glove.process_request("hi")
    assert order == [("start", 1), ("end", 1), ("start", 2), ("end", 2)]
    [message] = [m for m in await store.get_messages() if m.tool_results]
    assert [r.duration_ms >= 10 for r in message.tool_results] == [True, True]
    assert message.text == "tool results"


async def test_it_asks_for_permission_once_per_input_and_remembers_the_answer():
    ran = []

    @tool(description="Charge a card.", requires_permission=True)
    async def charge(amount: int) -> str:
        ran.append(amount)
        return "charged"

    glove, _, store = make_glove(
        [calls(("charge", {"amount": 5})), "ok", calls(("charge", {"amount": 5})), "ok"],
        tools=[charge],
    )
    answering = asyncio.create_task(glove.process_request("pay"))
    await until(lambda: glove.display_manager.stack)
    [slot] = glove.display_manager.stack
    assert slot.renderer == "permission_request"
    assert slot.input == {
        "renderer": "permission_request",
        "toolName": "charge",
        "toolInput": {"amount": 5},
    }
    assert (slot.tool_name, slot.call_id) == ("charge", "call_scripted_0_0")
    glove.display_manager.resolve(slot.id, True)
    await answering
    assert await store.get_permission("charge", {"amount": 5}) == "granted"
    await glove.process_request("pay again")  # granted: no second prompt
    assert ran == [5, 5]


async def test_it_refuses_a_denied_tool_with_the_exact_text():
    @tool(description="Charge a card.", requires_permission=True)
    async def charge(amount: int) -> str:
        return "charged"

    store = MemoryStore("s")
    await store.set_permission("charge", "denied", {"amount": 5})
    glove, _, _ = make_glove([calls(("charge", {"amount": 5})), "ok"], store=store, tools=[charge])
    await glove.process_request("pay")
    [result] = tool_results(await store.get_messages())
    assert result.to_dict() == {
        "status": "error",
        "data": None,
        "message": 'Permission denied for tool "charge". The user has not granted permission '
        "to run this tool.",
    }
    assert glove.display_manager.stack == []


async def test_it_aborts_a_tool_waiting_on_the_user_and_stops_the_request():
    @tool(description="Ask the user.")
    async def ask_size(ctx: ToolContext) -> str:
        return await ctx.display.push_and_wait(input={"question": "size?"})

    glove, _, store = make_glove(
        [calls(("ask_size", {}), ("ask_size", {})), "never"], tools=[ask_size]
    )
    events = []
    glove.add_subscriber(lambda kind, data: events.append((kind, data)))
    controller = AbortController()
    running = asyncio.create_task(glove.process_request("hi", abort=controller.signal))
    await until(lambda: glove.display_manager.stack)
    assert glove.display_manager.stack[0].renderer == "ask_size"
    controller.abort()
    try:
        await running
        raise AssertionError("expected AbortError")
    except AbortError as error:
        assert str(error) == "Operation aborted"
    results = [data for kind, data in events if kind == "tool_use_result"]
    # The aborted call ends the batch: the second call gets no result at all.
    assert [r["result"] for r in results] == [
        {"status": "aborted", "data": None, "message": "Tool execution was aborted by the user."}
    ]
    # Tool results of an aborted request are not persisted; the waiting slot is taken away.
    assert not any(m.tool_results for m in await store.get_messages())
    assert glove.display_manager.stack == []


async def test_it_passes_validated_input_with_defaults_to_the_tool():
    seen = []

    @tool(description="Brew.")
    async def brew(size: str = "M") -> str:
        seen.append(size)
        return "ok"

    glove, _, _ = make_glove([calls(("brew", {})), "done"], tools=[brew])
    await glove.process_request("hi")
    assert seen == ["M"]


class _BareStore:
    """A store with only the required methods: no tasks, inbox or permissions."""

    identifier = "bare"

    def __init__(self):
        self.messages = []
        self.tokens = 0
        self.turns = 0

    async def get_messages(self):
        return list(self.messages)

    async def get_context_messages(self):
        return list(self.messages)

    async def append_messages(self, messages):
        self.messages.extend(messages)

    async def get_token_count(self):
        return self.tokens

    async def add_tokens(self, usage):
        self.tokens += usage.tokens_in + usage.tokens_out

    async def get_turn_count(self):
        return self.turns

    async def increment_turn(self):
        self.turns += 1

    async def reset_counters(self):
        self.tokens = self.turns = 0


async def test_a_permission_prompt_takes_approve_and_reject_with_a_reason_remembering_neither():
    ran = []

    @tool(description="Charge a card.", requires_permission=True)
    async def charge(amount: int) -> str:
        ran.append(amount)
        return "charged"

    glove, _, store = make_glove(
        [calls(("charge", {"amount": 5})), "ok", calls(("charge", {"amount": 5})), "ok"],
        tools=[charge],
    )
    for answer in ({"decision": "approve"}, {"decision": "reject", "reason": "Too much."}):
        answering = asyncio.create_task(glove.process_request("pay"))
        await until(lambda: glove.display_manager.stack)
        [slot] = glove.display_manager.stack
        glove.display_manager.resolve(slot.id, answer)
        await answering
        assert await store.get_permission("charge", {"amount": 5}) == "unset"
    first, second = [m.tool_results[0].result for m in await store.get_messages() if m.tool_results]
    assert (ran, first.status, second.status) == ([5], "success", "error")
    assert second.message == (
        'Permission denied for tool "charge". The user has not granted permission '
        "to run this tool. Reason: Too much."
    )
