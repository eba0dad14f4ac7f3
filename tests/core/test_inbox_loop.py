"""The inbox in the agent loop: the tool, injection of resolved items, the blocking reminder."""

from __future__ import annotations

import asyncio
import re

from gloveapp.core import InboxItem, MemoryStore, resolve_inbox_item
from gloveapp.core.providers.formatting import format_anthropic_messages
from tests.core.support import calls, make_glove

RESTOCK = {"tag": "restock_watch", "request": "Notify when Yirgacheffe is back in stock"}
PAYMENT = {"tag": "payment_confirmation", "request": "Confirm payment for order #1042"}


def post(args):
    return calls(("glove_post_to_inbox", args))


async def test_it_registers_the_inbox_and_task_tools_when_the_store_has_them():
    glove, _, _ = make_glove([])
    assert [t.name for t in glove.tools] == ["glove_update_tasks", "glove_post_to_inbox"]


async def test_it_creates_a_pending_item_and_answers_with_the_exact_texts():
    both = calls(
        ("glove_post_to_inbox", RESTOCK), ("glove_post_to_inbox", {**PAYMENT, "blocking": True})
    )
    glove, _, store = make_glove([both, "ok"])
    await glove.process_request("watch it")
    [message] = [m for m in await store.get_messages() if m.tool_results]
    non_blocking, blocking = (r.result.data for r in message.tool_results)
    assert non_blocking["message"] == (
        "Inbox item created. This is non-blocking \u2014 you may continue."
    )
    assert blocking["message"] == (
        "Inbox item created. This is blocking \u2014 you must wait for resolution."
    )
    assert re.fullmatch(r"inbox_\d{13}_[0-9a-z]{1,6}", non_blocking["inbox_item_id"])
    first, second = await store.get_inbox_items()
    assert (first.id, first.status, first.blocking, first.response) == (
        non_blocking["inbox_item_id"],
        "pending",
        False,
        None,
    )
    assert second.blocking is True
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first.created_at)


async def test_it_injects_resolved_items_once_before_the_user_message():
    store = MemoryStore("s")
    await store.add_inbox_item(InboxItem(id="inbox_1", **RESTOCK))
    await store.update_inbox_item(
        "inbox_1",
        {
            "status": "resolved",
            "response": "Yirgacheffe is back in stock (12 bags).",
            "resolved_at": "2030-01-01T10:00:00.000Z",
        },
    )
    glove, model, _ = make_glove(["Good news!", "You're welcome."], store=store)
    await glove.process_request("Any news?")
    await glove.process_request("Thanks!")
    banner, user = model.calls[0].messages
    assert banner.text == (
        "[Inbox: 1 item(s) resolved]\n"
        '- [restock_watch] Request: "Notify when Yirgacheffe is back in stock" -> Response: '
        '"Yirgacheffe is back in stock (12 bags)." (resolved 2030-01-01T10:00:00.000Z)'
    )
    assert (banner.sender, banner.framework_context) == ("user", "inbox")
    assert user.text == "Any news?"
    [item] = await store.get_inbox_items()
    assert item.status == "consumed"
    # Persisted once, never injected again.
    banners = [m for m in model.calls[1].messages if m.text.startswith("[Inbox:")]
    assert banners == [banner]


async def test_it_prints_missing_values_as_null_like_glove():
    class LooseStore(MemoryStore):
        async def get_resolved_inbox_items(self):
            return [InboxItem(id="x", tag="t", request="r", status="resolved")]

        consume_resolved_inbox_items = None  # fall back to claim-by-update
        inject_resolved_inbox_items = None

        async def update_inbox_item(self, item_id, updates):
            return None

    glove, model, _ = make_glove(["ok"], store=LooseStore("s"))
    await glove.process_request("hi")
    assert (
        model.calls[0]
        .messages[0]
        .text.endswith('- [t] Request: "r" -> Response: "null" (resolved null)')
    )


async def test_it_reminds_of_pending_blocking_items_at_the_end_of_every_call_of_later_asks():
    glove, model, store = make_glove(
        [
            post({**PAYMENT, "blocking": True}),
            "I asked for confirmation.",
            calls(("glove_update_tasks", {"todos": []})),
            "Still waiting.",
        ]
    )
    await glove.process_request("Please ship order #1042.")
    # Computed at the start of an ask: the ask that created the item shows no reminder.
    assert not any(m.framework_context for call in model.calls for m in call.messages)
    await glove.process_request("Is my payment confirmed yet?")
    [item] = await store.get_inbox_items()
    reminder_text = (
        "[Inbox: 1 blocking item(s) still pending \u2014 you cannot proceed with actions that "
        "depend on these results]\n"
        f"- [payment_confirmation] Confirm payment for order #1042 (posted {item.created_at})"
    )
    first, second = model.calls[2], model.calls[3]
    assert [m.text for m in first.messages[-2:]] == ["Is my payment confirmed yet?", reminder_text]
    # In the tool loop the reminder comes after the tool results, never between call and result.
    assert second.messages[-2].text == "tool results"
    assert (second.messages[-1].text, second.messages[-1].framework_context) == (
        reminder_text,
        "inbox",
    )
    assert not any(m.framework_context for m in await store.get_messages())


async def test_it_keeps_tool_results_first_when_formatting_the_reminder_for_anthropic():
    store = MemoryStore("s")
    await store.add_inbox_item(InboxItem(id="inbox_7", blocking=True, **PAYMENT))
    glove, model, _ = make_glove(
        [calls(("glove_update_tasks", {"todos": []})), "done"], store=store
    )
    await glove.process_request("Can I check out?")
    wire = format_anthropic_messages(model.calls[1].messages)
    assert [turn["role"] for turn in wire] == ["user", "assistant", "user"]
    last_user_blocks = wire[-1]["content"]
    assert [block["type"] for block in last_user_blocks] == ["tool_result", "text"]
    assert last_user_blocks[0]["tool_use_id"] == "call_scripted_0_0"
    assert last_user_blocks[1]["text"].startswith("[Inbox: 1 blocking item(s) still pending")


async def test_it_injects_an_item_resolved_during_a_turn_on_the_next_ask():
    store = MemoryStore("s")
    await store.add_inbox_item(InboxItem(id="inbox_1", **RESTOCK))

    async def resolve_mid_turn(messages):
        await resolve_inbox_item(store, "inbox_1", "Back in stock.")
        return "Checking."

    glove, model, _ = make_glove([resolve_mid_turn, "Here it is."], store=store)
    await glove.process_request("first")
    assert not any(m.text.startswith("[Inbox:") for m in model.calls[0].messages)
    await glove.process_request("second")
    assert model.calls[1].messages[-2].text.startswith("[Inbox: 1 item(s) resolved]")


async def test_it_injects_a_resolved_item_exactly_once_across_concurrent_requests():
    store = MemoryStore("shared")
    await store.add_inbox_item(InboxItem(id="inbox_1", **RESTOCK))
    await resolve_inbox_item(store, "inbox_1", "Back in stock.")
    first, first_model, _ = make_glove(["one"], store=store)
    second, second_model, _ = make_glove(["two"], store=store)
    await asyncio.gather(first.process_request("a"), second.process_request("b"))
    banners = [m for m in await store.get_messages() if m.text.startswith("[Inbox:")]
    assert len(banners) == 1
    [item] = await store.get_inbox_items()
    assert item.status == "consumed"
    # Both requests share the session, so both prompts hold that one banner, once.
    for model in (first_model, second_model):
        prompt = model.calls[0].messages
        assert len([m for m in prompt if m.text.startswith("[Inbox:")]) <= 1


async def test_it_claims_items_one_by_one_on_stores_without_atomic_consume():
    class ClaimingStore(MemoryStore):
        consume_resolved_inbox_items = None
        inject_resolved_inbox_items = None

        async def get_resolved_inbox_items(self):
            items = await super().get_resolved_inbox_items()
            await asyncio.sleep(0)  # let the other request read the same items
            return items

    store = ClaimingStore("shared")
    await store.add_inbox_item(InboxItem(id="inbox_1", **RESTOCK))
    await resolve_inbox_item(store, "inbox_1", "Back in stock.")
    first, _, _ = make_glove(["one"], store=store)
    second, _, _ = make_glove(["two"], store=store)
    await asyncio.gather(first.process_request("a"), second.process_request("b"))
    banners = [m for m in await store.get_messages() if m.text.startswith("[Inbox:")]
    assert len(banners) == 1


async def test_it_shows_no_reminder_for_non_blocking_items():
    store = MemoryStore("s")
    await store.add_inbox_item(InboxItem(id="inbox_1", **RESTOCK))
    glove, model, _ = make_glove(["ok"], store=store)
    await glove.process_request("hi")
    assert [m.text for m in model.calls[0].messages] == ["hi"]
