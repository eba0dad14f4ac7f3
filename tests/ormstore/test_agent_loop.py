"""The agent loop on DjangoStore: the seed's coffee-shop restock flow, concurrent turns on one
session, and a crash in the middle of a turn."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import DataError, connection

from gloveapp.conversations import append, services
from gloveapp.conversations.models import Message as MessageRow
from gloveapp.conversations.models import Session
from gloveapp.core import CompactionConfig, Glove, ScriptedModel, tool
from gloveapp.core.types import Message, ToolCall
from gloveapp.ormstore.store import DjangoStore
from inbox.models import InboxItem
from inbox.services import inbox_item_resolve
from tests.helpers import post_item, run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PROJECT = Path(__file__).resolve().parents[2]
SYSTEM_PROMPT = """You are Brew, the assistant of a small coffee shop.
## Async Notifications
- Use glove_post_to_inbox to track requests that can't be fulfilled now (e.g. out of stock)
- Use a descriptive tag (e.g. "restock_watch")
- When an inbox item is resolved, you'll see the response — inform the customer"""
REQUEST = "Notify when Yirgacheffe is back in stock"
RESPONSE = "Yirgacheffe is back in stock (12 bags)."


@tool
async def check_stock(product: str) -> dict:
    """Look up how many bags of a coffee are in stock."""
    return {"product": product, "bags": 0}


def agent_for(store: DjangoStore, script: list) -> tuple[Glove, ScriptedModel]:
    model = ScriptedModel(script)
    glove = Glove(
        store=store,
        model=model,
        system_prompt=SYSTEM_PROMPT,
        compaction_config=CompactionConfig(compaction_instructions="Summarize the conversation."),
    )
    return glove.fold(check_stock).build(), model


def calls(*tool_calls: ToolCall) -> Message:
    return Message(sender="agent", text="", tool_calls=list(tool_calls))


def database_url() -> str:
    """The test database as a DATABASE_URL, for a process started outside this one."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    user = quote(settings["USER"] or "")
    password = f":{quote(settings['PASSWORD'])}" if settings.get("PASSWORD") else ""
    return (
        f"postgres://{user}{password}@{settings['HOST'] or '127.0.0.1'}:"
        f"{settings['PORT'] or 5432}/{settings['NAME']}"
    )


def manage(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url()}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.process
async def test_it_runs_the_coffee_shop_restock_flow_across_processes():
    store = DjangoStore("coffee_session")
    glove, model = agent_for(
        store,
        [
            calls(ToolCall("check_stock", {"product": "Yirgacheffe"})),
            "Sorry, Yirgacheffe is out of stock. Shall I watch for it?",
            calls(ToolCall("glove_post_to_inbox", {"tag": "restock_watch", "request": REQUEST})),
            "Done: I'll tell you as soon as it is back.",
            "Great news! The Yirgacheffe is back in stock.",
        ],
    )

    # 1-2. The customer asks; the agent finds it out of stock and posts a restock watch.
    await glove.process_request("Do you have Yirgacheffe?")
    await glove.process_request("Yes, please watch for it.")
    (watch,) = await store.get_inbox_items()
    assert (watch.tag, watch.request, watch.status, watch.blocking) == (
        "restock_watch",
        REQUEST,
        "pending",
        False,
    )

    # 3. Another process, sharing only the database, resolves it.
    listed = await sync_to_async(manage)("inbox_pending")
    assert watch.id in listed.stdout, listed.stderr
    resolved = await sync_to_async(manage)("resolve_inbox_item", watch.id, RESPONSE)
    assert resolved.returncode == 0, resolved.stderr
    assert f'Resolved inbox item "{watch.id}"' in resolved.stdout
    again = await sync_to_async(manage)("resolve_inbox_item", watch.id, "twice")
    assert again.returncode == 4
    assert "already resolved" in again.stderr

    (item,) = await store.get_resolved_inbox_items()
    assert item.resolved_at and item.resolved_at.endswith("Z")

    # 4. The next turn's prompt carries the exact banner, just before the new message.
    await glove.process_request("Any news?")

    prompt = [m.text for m in model.calls[-1].messages]
    banner = (
        "[Inbox: 1 item(s) resolved]\n"
        f'- [restock_watch] Request: "{REQUEST}" -> Response: "{RESPONSE}" '
        f"(resolved {item.resolved_at})"
    )
    assert prompt[-2:] == [banner, "Any news?"]

    # 5. The item is consumed: the banner never comes back.
    (consumed,) = await store.get_inbox_items()
    assert consumed.status == "consumed"
    row = await InboxItem.objects.aget(pk=watch.id)
    assert row.resolved_by == "command"
    assert sum(1 for m in await store.get_messages() if m.text == banner) == 1


def test_it_injects_each_item_exactly_once_into_two_concurrent_turns():
    item_ids = [f"inbox_{n}_watch" for n in range(6)]
    for n, item_id in enumerate(item_ids):
        post_item(item_id, session_id="busy", created_at=f"2030-01-01T10:00:0{n}.000Z")
        inbox_item_resolve(item_id=item_id, response=f"answer {n}")
    agents = [agent_for(DjangoStore("busy"), ["Noted."]) for _ in range(2)]

    outcomes = run_in_threads(2, lambda n: async_to_sync(agents[n][0].process_request)(f"turn {n}"))

    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    banners = [
        text
        for text in MessageRow.objects.filter(session_id="busy").values_list("text", flat=True)
        if text.startswith("[Inbox:")
    ]
    injected = [line for banner in banners for line in banner.splitlines()[1:]]
    assert sorted(injected) == sorted(
        f'- [restock_watch] Request: "Notify when Yirgacheffe is back in stock" -> '
        f'Response: "answer {n}" (resolved {_resolved_at(item_ids[n])})'
        for n in range(6)
    )
    assert set(InboxItem.objects.values_list("status", flat=True)) == {"consumed"}
    # Both turns share the session's history, so each may see the other's banner too; what
    # matters is that no model is ever told about one item twice.
    for _, model in agents:
        lines = [
            line
            for message in model.calls[0].messages
            if message.text.startswith("[Inbox:")
            for line in message.text.splitlines()[1:]
        ]
        assert len(lines) == len(set(lines))


def _resolved_at(item_id: str) -> str:
    from gloveapp.conversations.serialization import iso_or_none

    return iso_or_none(InboxItem.objects.get(pk=item_id).resolved_at)


async def test_it_leaves_no_trace_of_a_turn_whose_model_call_crashed():
    store = DjangoStore("crashy")
    await store.append_messages(
        [Message(sender="user", text="hi"), Message(sender="agent", text="hello")]
    )

    def lost_connection(messages):
        raise ConnectionError("model connection lost")

    glove, _ = agent_for(store, [lost_connection])
    with pytest.raises(ConnectionError):
        await glove.process_request("Do you have Yirgacheffe?")

    history = await store.get_messages()
    assert [(m.sender, m.text) for m in history] == [
        ("user", "hi"),
        ("agent", "hello"),
        ("user", "Do you have Yirgacheffe?"),
    ]
    assert (await store.get_turn_count(), await store.get_token_count()) == (0, 0)


async def test_it_writes_nothing_of_a_reply_when_the_process_dies_while_appending_it(monkeypatch):
    store = DjangoStore("crashy")
    glove, model = agent_for(
        store,
        [calls(ToolCall("check_stock", {"product": "Yirgacheffe"})), "It is out of stock."],
    )
    if connection.vendor == "sqlite":
        # SQLite appends step by step: die after the reply's rows are inserted, before its
        # events are.
        real_record_events = append.record_events

        def die_on_the_reply(*, stream, events):
            if any(p.get("message", {}).get("sender") == "agent" for _, p in events):
                raise SystemExit("killed while writing the reply")
            return real_record_events(stream=stream, events=events)

        monkeypatch.setattr(append, "record_events", die_on_the_reply)
    else:
        # PostgreSQL appends in one statement: make it fail half-way (the session row is
        # updated, then a message row is refused), as a dying connection would abort it.
        real_append = services.append_to_existing

        def die_on_the_reply(*, session_id, fields, **options):
            if any(values["sender"] == "agent" for values in fields):
                fields = [{**values, "framework_context": "x" * 51} for values in fields]
                try:
                    real_append(session_id=session_id, fields=fields, **options)
                except DataError:
                    raise SystemExit("killed while writing the reply") from None
                raise AssertionError("the broken row was accepted")
            return real_append(session_id=session_id, fields=fields, **options)

        monkeypatch.setattr(services, "append_to_existing", die_on_the_reply)
    with pytest.raises(SystemExit):
        await glove.process_request("Do you have Yirgacheffe?")
    monkeypatch.undo()

    assert [(m.sender, m.text) for m in await store.get_messages()] == [
        ("user", "Do you have Yirgacheffe?")
    ]
    assert (await store.get_turn_count(), await store.get_token_count()) == (0, 0)
    assert len(model.calls) == 1  # the model answered; none of its answer was kept

    # A restarted process carries on from a consistent history.
    glove, _ = agent_for(DjangoStore("crashy"), ["Sorry, Yirgacheffe is out of stock."])
    await glove.process_request("Hello?")
    seqs = [
        seq
        async for seq in MessageRow.objects.filter(session_id="crashy")
        .order_by("seq")
        .values_list("seq", flat=True)
    ]
    assert seqs == [1, 2, 3]
    assert (await Session.objects.aget(pk="crashy")).turn_count == 1
