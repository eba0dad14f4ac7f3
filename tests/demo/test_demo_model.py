"""The offline demo model on its own: which tool it calls for what, and what it says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gloveapp.core.providers.base import ToolSpec
from gloveapp.core.types import Message, ToolCall, ToolResult, ToolResultData
from gloveapp.demo.demo_model import DemoModel

COFFEE_TOOLS = [
    ToolSpec(name=name, description="")
    for name in (
        "glove_post_to_inbox",
        "get_catalogue",
        "check_stock",
        "add_to_cart",
        "view_cart",
        "checkout",
    )
]
GREETED = Message(sender="agent", text="Hello!")


async def reply_to(messages: list[Message], tools: list[ToolSpec] = COFFEE_TOOLS) -> Message:
    events: list[tuple[str, dict[str, Any]]] = []

    async def notify(event_type: str, payload: dict[str, Any]) -> None:
        events.append((event_type, payload))

    result = await DemoModel().prompt(messages, tools, notify)
    [message] = result.messages
    assert events[-1][0] == "model_response_complete"
    streamed = "".join(p["text"] for kind, p in events if kind == "text_delta")
    assert streamed == message.text
    return message


def user(text: str) -> Message:
    return Message(sender="user", text=text)


async def test_it_introduces_itself_honestly_once():
    first = await reply_to([user("hi")])
    later = await reply_to([user("hi"), GREETED, user("hi again")])

    assert "offline demo model" in first.text and "not an AI" in first.text
    assert "offline demo model" not in later.text


@pytest.mark.parametrize(
    ("text", "tool_name", "tool_input"),
    [
        ("What's on the menu?", "get_catalogue", {}),
        ("Do you have Yirgacheffe?", "check_stock", {"coffee": "Ethiopia Yirgacheffe"}),
        ("add 2 Kenya AA please", "add_to_cart", {"coffee": "Kenya AA", "quantity": 2}),
        ("what's in my cart", "view_cart", {}),
        ("checkout", "checkout", {"payment": "saved_card"}),
        ("check out, I'll pay at pickup", "checkout", {"payment": "pickup"}),
        # A watch starts with a look at the shelf: never a watch for a coffee in stock.
        (
            "notify me when the Yirgacheffe is back",
            "check_stock",
            {"coffee": "Ethiopia Yirgacheffe"},
        ),
    ],
)
async def test_it_calls_the_tool_the_message_asks_for(text, tool_name, tool_input):
    message = await reply_to([user("hi"), GREETED, user(text)])

    [call] = message.tool_calls
    assert (call.tool_name, call.input_args) == (tool_name, tool_input)
    assert call.id


async def test_it_takes_yes_as_agreeing_to_its_last_offer():
    offer = Message(
        sender="agent",
        text="Kenya AA is out of stock right now. Shall I watch for Kenya AA and tell you "
        "when it is back in stock?",
    )

    message = await reply_to([user("kenya?"), offer, user("yes")])

    [call] = message.tool_calls
    assert (call.tool_name, call.input_args) == ("check_stock", {"coffee": "Kenya AA"})


def stock_result(call_id: str, *, bags: int) -> Message:
    data = {"name": "Ethiopia Yirgacheffe", "in_stock": bags > 0, "bags": bags, "price_cents": 1900}
    result = ToolResult(
        tool_name="check_stock", call_id=call_id, result=ToolResultData.success(data)
    )
    return Message(sender="user", text="tool results", tool_results=[result])


async def asked_to_watch() -> list[Message]:
    messages = [user("hi"), GREETED, user("tell me when Yirgacheffe is back")]
    check = await reply_to(messages)
    return [*messages, check, stock_result(check.tool_calls[0].id, bags=0)]


async def test_it_sets_the_watch_once_the_shelf_says_out_of_stock():
    message = await reply_to(await asked_to_watch())

    [call] = message.tool_calls
    assert call.tool_name == "glove_post_to_inbox"
    assert call.input_args == {
        "tag": "restock_watch",
        "request": "Notify when Yirgacheffe is back in stock",
        "blocking": False,
    }


async def test_it_sets_no_watch_when_the_shelf_has_the_coffee():
    messages = await asked_to_watch()
    messages[-1] = stock_result(messages[-2].tool_calls[0].id, bags=3)

    message = await reply_to(messages)

    assert message.tool_calls is None
    assert "Ethiopia Yirgacheffe is in stock (3 bags at $19.00)" in message.text
    assert "Shall I add a bag of Ethiopia Yirgacheffe" in message.text


BANNER = Message(
    sender="user",
    framework_context="inbox",
    text='[Inbox: 1 item(s) resolved]\n- [restock_watch] Request: "Notify when Yirgacheffe '
    'is back in stock" -> Response: "Back in stock (12 bags)." (resolved 2030-01-01T10:00:00.000Z)',
)


async def test_it_relays_a_resolved_watch_and_checks_the_shelf():
    message = await reply_to([user("hi"), GREETED, BANNER, user("hello")])

    assert 'was answered: "Back in stock (12 bags)."' in message.text
    assert "Shall I add" not in message.text
    [call] = message.tool_calls
    assert (call.tool_name, call.input_args) == ("check_stock", {"coffee": "Ethiopia Yirgacheffe"})


@pytest.mark.parametrize(
    ("bags", "said", "not_said"),
    [
        (12, "Shall I add a bag of Ethiopia Yirgacheffe", "not in stock yet"),
        (0, "Shall I keep watching for Ethiopia Yirgacheffe", "Shall I add"),
    ],
)
async def test_it_offers_a_bag_after_an_answered_watch_only_if_the_shelf_has_one(
    bags, said, not_said
):
    messages = [user("hi"), GREETED, BANNER, user("hello")]
    check = await reply_to(messages)

    message = await reply_to([*messages, check, stock_result(check.tool_calls[0].id, bags=bags)])

    assert message.tool_calls is None
    assert said in message.text
    assert not_said not in message.text


async def test_it_promises_no_bag_from_news_it_cannot_check():
    tools = [tool for tool in COFFEE_TOOLS if tool.name != "check_stock"]

    message = await reply_to([user("hi"), GREETED, BANNER, user("hello")], tools=tools)

    assert message.tool_calls is None
    assert "From the inbox: Back in stock (12 bags)." in message.text
    assert "Shall I add" not in message.text


async def test_it_reads_past_the_blocking_reminder_at_the_end():
    reminder = Message(
        sender="user",
        framework_context="inbox",
        text="[Inbox: 1 blocking item(s) still pending \u2014 you cannot proceed]\n- [x] y",
    )

    message = await reply_to([user("hi"), GREETED, user("show me the menu"), reminder])

    assert message.tool_calls[0].tool_name == "get_catalogue"


async def test_it_describes_tool_results_in_words():
    call = ToolCall(tool_name="check_stock", input_args={"coffee": "Kenya AA"}, id="c1")
    result = ToolResult(
        tool_name="check_stock",
        call_id="c1",
        result=ToolResultData.success(
            {"name": "Kenya AA", "in_stock": True, "bags": 8, "price_cents": 2100}
        ),
    )
    messages = [
        user("kenya?"),
        Message(sender="agent", text="Let me check.", tool_calls=[call]),
        Message(sender="user", text="tool results", tool_results=[result]),
    ]

    message = await reply_to(messages)

    assert message.text == (
        "Kenya AA is in stock: 8 bags at $21.00. Shall I add a bag of Kenya AA to your cart?"
    )


async def test_it_says_so_when_the_agent_lacks_the_tool():
    message = await reply_to([user("hi"), GREETED, user("show me the menu")], tools=[])

    assert message.tool_calls is None
    assert "get_catalogue" in message.text


async def test_it_writes_a_summary_when_asked_to_compact():
    request = Message(sender="user", text="Summarize.", is_compaction_request=True)

    message = await reply_to([user("add kenya"), GREETED, request])

    assert message.text.startswith("Summary by the offline demo model")


@pytest.mark.process
def test_it_imports_without_django():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'django' or name.startswith('django.'):\n"
        "            raise ImportError('django is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import gloveapp.demo.demo_model\n"
        "print('ok')\n"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert result.returncode == 0, result.stderr
