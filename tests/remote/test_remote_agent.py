"""A `gloveapp.core` agent in this process keeps its memory in the server in another process.

The coffee-shop inbox flow end to end over HTTP: the agent posts a `restock_watch` item with
`glove_post_to_inbox`; someone outside resolves it with the management command; the next
turn's prompt carries the banner and the item is consumed, all through `RemoteStore`.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from gloveapp.core import (
    CompactionConfig,
    Glove,
    InboxItem,
    InboxItemNotFound,
    InboxTransitionError,
    Message,
    ScriptedModel,
    ToolCall,
    tool,
)
from gloveapp.remote.remote_store import RemoteStore

pytestmark = [pytest.mark.postgres]

RESTOCK_REQUEST = "Tell the customer when Ethiopian Yirgacheffe is back in stock"


@tool
async def check_stock(product: str) -> dict:
    """Look up how many bags of a coffee are in stock."""
    return {"product": product, "bags": 0}


def calls(name: str, args: dict) -> Message:
    return Message(sender="agent", tool_calls=[ToolCall(tool_name=name, input_args=args)])


async def test_it_runs_the_coffee_inbox_flow_through_the_remote_store(
    live_server_process, live_token, remote_stores
):
    server = live_server_process
    store = await RemoteStore.create(server.url, live_token, title="Coffee", agent_name="coffee")
    remote_stores.append(store)
    model = ScriptedModel(
        [
            calls("check_stock", {"product": "Yirgacheffe"}),
            calls("glove_post_to_inbox", {"tag": "restock_watch", "request": RESTOCK_REQUEST}),
            "Yirgacheffe is out of stock; I will tell you when it is back.",
            "Good news: Yirgacheffe is back!",
        ]
    )
    glove = (
        Glove(
            store=store,
            model=model,
            system_prompt="You are the coffee shop's barista.",
            compaction_config=CompactionConfig(compaction_instructions="Summarize."),
        )
        .fold(check_stock)
        .build()
    )

    await glove.process_request("I'd like a bag of Yirgacheffe")

    [item] = await store.get_inbox_items()
    assert (item.tag, item.request, item.status) == ("restock_watch", RESTOCK_REQUEST, "pending")

    # Someone outside both processes resolves it: a shell on the server's database.
    resolved = await asyncio.to_thread(
        server.manage, "resolve_inbox_item", item.id, "Back in stock: 12 bags"
    )
    assert item.id in resolved

    await glove.process_request("Any news?")

    prompt = model.calls[-1].messages
    banner = next(m for m in prompt if m.text.startswith("[Inbox: 1 item(s) resolved]"))
    assert (
        f'- [restock_watch] Request: "{RESTOCK_REQUEST}" -> Response: "Back in stock: 12 bags"'
        in banner.text
    )
    assert banner.framework_context == "inbox"
    assert prompt[-1].text == "Any news?"
    [item] = await store.get_inbox_items()
    assert item.status == "consumed"
    assert await store.get_resolved_inbox_items() == []

    # The whole conversation lives on the server, as any other client reads it.
    async with httpx.AsyncClient(headers={"Authorization": f"Token {live_token}"}) as client:
        history = (await client.get(f"{store.session_url}/messages")).json()
        turns = (await client.get(f"{store.session_url}/turns")).json()
    assert [m["text"] for m in history if m["sender"] == "user" and not m.get("tool_results")] == [
        "I'd like a bag of Yirgacheffe",
        banner.text,
        "Any news?",
    ]
    assert history[-1]["text"] == "Good news: Yirgacheffe is back!"
    assert turns["turn_count"] >= 2


async def test_it_raises_the_runtime_errors_for_refused_inbox_updates(
    live_server_process, live_token, remote_stores
):
    store = await RemoteStore.create(live_server_process.url, live_token)
    remote_stores.append(store)
    await store.add_inbox_item(InboxItem(id="inbox_1_remote", tag="t", request="r"))
    await store.update_inbox_item("inbox_1_remote", {"status": "consumed"})

    with pytest.raises(InboxTransitionError, match="already consumed"):
        await store.update_inbox_item("inbox_1_remote", {"status": "resolved", "response": "x"})
    with pytest.raises(InboxItemNotFound):
        await store.update_inbox_item("inbox_unknown", {"status": "consumed"})


async def test_it_cannot_reach_a_session_of_another_user(live_server_process, live_token):
    other_token = await asyncio.to_thread(live_server_process.token_for, "remote-other")
    mine = await RemoteStore.create(live_server_process.url, live_token)
    await mine.append_messages([Message(sender="user", text="mine only")])
    theirs = RemoteStore(live_server_process.url, other_token, mine.identifier)
    try:
        # Ids are per owner: the same id names a session of theirs, empty, never mine.
        assert await theirs.get_messages() == []
        await theirs.append_messages([Message(sender="user", text="theirs")])
        assert [m.text for m in await mine.get_messages()] == ["mine only"]
    finally:
        await mine.delete_session()
        await mine.aclose()
        await theirs.aclose()
