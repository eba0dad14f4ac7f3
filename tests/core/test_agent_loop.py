"""The agent loop: requests, turns, events, abort, tasks (contract §2, §5)."""

from __future__ import annotations

import re

import pytest

from gloveapp.core import (
    AbortController,
    AbortError,
    CompactionConfig,
    ContentPart,
    ContentSource,
    Glove,
    GloveNotBuiltError,
    Message,
    ScriptedModel,
    ScriptedTurn,
    tool,
)
from gloveapp.core.providers.scripted import ScriptExhaustedError
from tests.core.support import calls, make_glove


@tool(description="Look up stock.")
async def check_stock(product: str) -> dict:
    return {"product": product, "in_stock": False}


async def test_it_refuses_to_run_before_build():
    glove = Glove(model=ScriptedModel(["hi"]), compaction_config=CompactionConfig("Sum."))
    with pytest.raises(GloveNotBuiltError, match="Call build before process_request"):
        await glove.process_request("hi")


async def test_it_sets_the_system_prompt_and_offers_every_tool_in_registration_order():
    glove, model, _ = make_glove(["hello"], tools=[check_stock])
    await glove.process_request("hi")
    [call] = model.calls
    assert call.system_prompt == "You are a test agent."
    assert call.tool_names == ["glove_update_tasks", "glove_post_to_inbox", "check_stock"]


async def test_it_stores_the_user_message_and_the_reply_and_returns_the_last_result():
    glove, _, store = make_glove(["hello there"])
    result = await glove.process_request("hi")
    assert [m.text for m in result.messages] == ["hello there"]
    assert (result.tokens_in, result.tokens_out) == (100, 20)
    assert [m.to_dict() for m in await store.get_messages()] == [
        {"sender": "user", "text": "hi"},
        {"sender": "agent", "text": "hello there"},
    ]
    assert (await store.get_token_count(), await store.get_turn_count()) == (120, 1)


async def test_it_stops_at_the_turn_limit_with_the_exact_text():
    glove, model, store = make_glove(
        [calls(("check_stock", {"product": "A"})), calls(("check_stock", {"product": "B"}))],
        tools=[check_stock],
        max_turns=2,
    )
    result = await glove.process_request("Check everything.")
    text = (
        "Reached the maximum number of turns (2) for this request. Please send a new message to "
        "continue."
    )
    assert [m.to_dict() for m in result.messages] == [{"sender": "agent", "text": text}]
    assert (result.tokens_in, result.tokens_out) == (0, 0)
    assert len(model.calls) == 2
    assert (await store.get_messages())[-1].text == text


async def test_it_emits_events_in_the_contract_order():
    events = []
    glove, _, _ = make_glove(
        [calls(("check_stock", {"product": "AA"})), "done"], tools=[check_stock], events=events
    )
    await glove.process_request("hi")
    assert [kind for kind, _ in events] == [
        "model_response",
        "token_consumption",
        "tool_use_result",
        "model_response",
        "token_consumption",
    ]
    result_event = events[2][1]
    assert result_event["id"] == result_event["call_id"] == "call_scripted_0_0"
    assert result_event["name"] == result_event["tool_name"] == "check_stock"
    assert isinstance(result_event["duration_ms"], int)
    assert events[1][1] == {"consumption": {"tokens_in": 100, "tokens_out": 20}}


async def test_it_awaits_async_subscribers():
    seen = []

    async def subscriber(kind, data):
        seen.append(kind)

    glove, _, _ = make_glove(["ok"])
    glove.add_subscriber(subscriber)
    await glove.process_request("hi")
    assert seen == ["model_response", "token_consumption"]


async def test_it_turns_content_parts_into_a_multimodal_message():
    glove, model, _ = make_glove(["nice"])
    image = ContentPart(
        type="image", source=ContentSource(type="url", media_type="image/png", url="http://x/a.png")
    )
    await glove.process_request(
        [ContentPart(type="text", text="look"), image, {"type": "text", "text": "here"}]
    )
    [message] = model.calls[0].messages
    assert message.text == "look\nhere"
    assert [part.type for part in message.content] == ["text", "image"]
    assert message.content[0].text == "look\nhere"


async def test_it_marks_a_media_only_message():
    glove, model, _ = make_glove(["nice"])
    image = ContentPart(
        type="image", source=ContentSource(type="base64", media_type="image/png", data="AAAA")
    )
    await glove.process_request([image])
    assert model.calls[0].messages[0].text == "[multimodal message]"


async def test_it_raises_abort_before_calling_the_model_when_already_aborted():
    controller = AbortController()
    controller.abort()
    glove, model, store = make_glove(["never"])
    with pytest.raises(AbortError):
        await glove.process_request("hi", abort=controller.signal)
    assert model.calls == []
    assert [m.text for m in await store.get_messages()] == ["hi"]


async def test_it_does_not_store_a_reply_that_arrived_after_an_abort():
    controller = AbortController()

    def abort_while_thinking(messages):
        controller.abort()
        return "too late"

    glove, _, store = make_glove([abort_while_thinking])
    with pytest.raises(AbortError):
        await glove.process_request("hi", abort=controller.signal)
    assert [m.text for m in await store.get_messages()] == ["hi"]


async def test_it_reports_a_script_that_ran_out():
    glove, _, _ = make_glove([calls(("check_stock", {"product": "A"}))], tools=[check_stock])
    with pytest.raises(ScriptExhaustedError, match="ran out at model call #1"):
        await glove.process_request("hi")


async def test_it_records_each_prompt_and_uses_per_turn_tokens():
    glove, model, store = make_glove(
        [ScriptedTurn("hello", tokens_in=7, tokens_out=3)], tokens_in=1, tokens_out=1
    )
    await glove.process_request("hi")
    [call] = model.calls
    assert (call.index, call.tokens_in, call.tokens_out) == (0, 7, 3)
    assert call.reply.to_dict() == {"sender": "agent", "text": "hello"}
    assert await store.get_token_count() == 10


async def test_it_replaces_the_task_list_and_keeps_ids_of_unchanged_content():
    first = [
        {"content": "Check stock", "activeForm": "Checking stock", "status": "in_progress"},
        {"content": "Place order", "activeForm": "Placing order", "status": "pending"},
    ]
    second = [
        {"content": "Check stock", "activeForm": "Checking stock", "status": "completed"},
        {"content": "Send confirmation", "activeForm": "Sending confirmation", "status": "pending"},
    ]
    glove, _, store = make_glove(
        [
            calls(("glove_update_tasks", {"todos": first})),
            calls(("glove_update_tasks", {"todos": second})),
            calls(("glove_update_tasks", {"todos": []})),
            "done",
        ]
    )
    events = []
    glove.add_subscriber(lambda kind, data: events.append(data) if kind == "tool_use_result" else 0)
    await glove.process_request("plan")
    after_first, after_second, after_clear = (e["result"]["data"]["tasks"] for e in events)
    assert all(re.fullmatch(r"task_\d{13}_[01]", t["id"]) for t in after_first)
    assert after_second[0]["id"] == after_first[0]["id"]
    # A new task never takes an id in use, even minted in the same millisecond.
    assert after_second[1]["id"].endswith("_1")
    assert after_second[1]["id"] not in {t["id"] for t in after_first}
    assert after_second[1] == {
        "id": after_second[1]["id"],
        "content": "Send confirmation",
        "activeForm": "Sending confirmation",
        "status": "pending",
    }
    assert after_clear == []
    assert await store.get_tasks() == []


async def test_it_does_not_inject_tasks_into_the_prompt():
    todos = [{"content": "Check stock", "activeForm": "Checking stock", "status": "pending"}]
    glove, model, _ = make_glove([calls(("glove_update_tasks", {"todos": todos})), "ok", "ok"])
    await glove.process_request("plan")
    await glove.process_request("again")
    assert [m.sender for m in model.calls[-1].messages] == [
        "user",
        "agent",
        "user",
        "agent",
        "user",
    ]


async def test_it_treats_a_returned_message_with_sender_user_as_the_agent():
    glove, _, _ = make_glove([Message(sender="user", text="odd")])
    result = await glove.process_request("hi")
    assert result.messages[0].sender == "agent"
