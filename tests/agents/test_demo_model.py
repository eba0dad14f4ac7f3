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
        (
            "notify me when the Yirgacheffe is back",
            "glove_post_to_inbox",
            {
                "tag": "restock_watch",
                "request": "Notify when Yirgacheffe is back in stock",
                "blocking": False,
            },
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
    assert call.tool_name == "glove_post_to_inbox"
    assert call.input_args["request"] == "Notify when Kenya AA is back in stock"


async def test_it_relays_a_resolved_inbox_item():
    banner = Message(
        sender="user",
        framework_context="inbox",
        text='[Inbox: 1 item(s) resolved]\n- [restock_watch] Request: "Notify when Yirgacheffe '
        'is back in stock" -> Response: "Back in stock (12 bags)." (resolved 2030-01-01T10:00:00.000Z)',
    )

    message = await reply_to([user("hi"), GREETED, banner, user("hello")])

    assert message.tool_calls is None
    assert "Good news from the inbox: Back in stock (12 bags)." in message.text
    assert "Shall I add a bag of Ethiopia Yirgacheffe" in message.text


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
