"""Resuming a turn whose worker stopped: nothing stored twice, unsafe tools not run again."""

from __future__ import annotations

from gloveapp.core import MemoryStore, Message, ToolCall, tool
from gloveapp.core.agent import INTERRUPTED_CALL_MESSAGE
from tests.core.support import make_glove

ran: list[str] = []


@tool(description="Look up the stock of a coffee.")
async def check_stock(product: str) -> dict:
    ran.append(f"check_stock:{product}")
    return {"product": product, "in_stock": True}


@tool(description="Charge the customer's card.", retry_safe=False)
async def charge_card(amount: int) -> dict:
    ran.append(f"charge_card:{amount}")
    return {"charged": amount}


async def stored_before_the_crash() -> MemoryStore:
    store = MemoryStore("session_resume")
    await store.append_messages(
        [
            Message(sender="user", text="buy it"),
            Message(
                sender="agent",
                text="",
                tool_calls=[
                    ToolCall(tool_name="check_stock", input_args={"product": "AA"}, id="c1"),
                    ToolCall(tool_name="charge_card", input_args={"amount": 12}, id="c2"),
                ],
            ),
        ]
    )
    return store


async def test_it_reruns_safe_calls_and_refuses_unsafe_ones_of_an_interrupted_reply():
    ran.clear()
    store = await stored_before_the_crash()
    glove, _, _ = make_glove(["Done."], store=store, tools=[check_stock, charge_card])

    await glove.resume_request()

    messages = await store.get_messages()
    assert ran == ["check_stock:AA"]
    results = {result.call_id: result.result for result in messages[2].tool_results}
    assert results["c1"].status == "success"
    assert results["c2"].status == "error"
    assert results["c2"].message == INTERRUPTED_CALL_MESSAGE
    assert [m.text for m in messages if m.sender == "user" and not m.tool_results] == ["buy it"]
    assert messages[-1].text == "Done."


async def test_it_continues_from_a_stored_request_without_storing_it_again():
    store = MemoryStore("session_resume_request")
    await store.append_messages([Message(sender="user", text="hello")])
    glove, model, _ = make_glove(["Hi there."], store=store)

    await glove.resume_request()

    texts = [(m.sender, m.text) for m in await store.get_messages()]
    assert texts == [("user", "hello"), ("agent", "Hi there.")]
    assert model.calls  # the model was asked once more
