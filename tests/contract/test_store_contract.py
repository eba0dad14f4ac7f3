"""The StoreAdapter contract: every store behaves the same through the runtime's interface.

These tests only await store methods, so they run unchanged over each implementation that
`store_factory` provides (see conftest.py).
"""

from __future__ import annotations

import asyncio

import pytest

from gloveapp.core.store import (
    DuplicateInboxItem,
    InboxItemNotFound,
    InboxTransitionError,
    resolve_inbox_item,
    supports_inbox,
    supports_permissions,
    supports_tasks,
)
from gloveapp.core.types import (
    ContentPart,
    ContentSource,
    InboxItem,
    Message,
    Task,
    TokenUsage,
    ToolCall,
    ToolResult,
    ToolResultData,
)


def user(text: str, **extra) -> Message:
    return Message(sender="user", text=text, **extra)


def agent(text: str, **extra) -> Message:
    return Message(sender="agent", text=text, **extra)


def summary(text: str = "summary") -> Message:
    return user(f"[Conversation summary from compaction]\n\n{text}", is_compaction=True)


def texts(messages: list[Message]) -> list[str]:
    return [message.text for message in messages]


def item(item_id: str, created_at: str, **extra) -> InboxItem:
    return InboxItem(
        id=item_id, tag="restock_watch", request=f"watch {item_id}", created_at=created_at, **extra
    )


def full_messages() -> list[Message]:
    """One message of each shape, every optional wire field set somewhere."""
    return [
        user(
            "look at this",
            id="msg_user_1",
            content=[
                ContentPart(type="text", text="look at this"),
                ContentPart(
                    type="image",
                    source=ContentSource(type="base64", media_type="image/png", data="iVBORw0K"),
                ),
                ContentPart(
                    type="document",
                    source=ContentSource(
                        type="url", media_type="application/pdf", url="https://x.test/a.pdf"
                    ),
                ),
            ],
        ),
        agent(
            "checking stock",
            id="msg_agent_1",
            reasoning_content="The user wants beans; check stock first.",
            tool_calls=[
                ToolCall(
                    tool_name="check_stock",
                    input_args={"product": "Yirgacheffe", "sizes": [250, 1000], "gift": None},
                    id="toolu_1",
                ),
                ToolCall(tool_name="no_args", input_args=None),
            ],
        ),
        user(
            "tool results",
            tool_results=[
                ToolResult(
                    tool_name="check_stock",
                    call_id="toolu_1",
                    duration_ms=12,
                    result=ToolResultData(
                        status="success",
                        data={"bags": 0, "ünïcode": "☕"},
                        render_data={"card": "out-of-stock"},
                        summary="0 bags",
                    ),
                ),
                ToolResult(
                    tool_name="no_args",
                    result=ToolResultData(status="error", data=None, message="boom"),
                ),
            ],
        ),
        user("[Skill: brew]\nBrew well.", is_skill_injection=True),
        user("[Inbox: 1 item(s) resolved]", framework_context="inbox"),
        summary("what happened so far"),
        agent(""),
    ]


# -- capabilities and a fresh store --------------------------------------------------------


async def test_it_offers_every_optional_capability(store):
    assert supports_tasks(store)
    assert supports_permissions(store)
    assert supports_inbox(store)
    assert callable(store.consume_resolved_inbox_items)
    assert isinstance(store.identifier, str) and store.identifier


async def test_it_starts_empty(store):
    assert await store.get_messages() == []
    assert await store.get_context_messages() == []
    assert await store.get_token_count() == 0
    assert await store.get_turn_count() == 0
    assert await store.get_tasks() == []
    assert await store.get_inbox_items() == []
    assert await store.get_resolved_inbox_items() == []
    assert await store.consume_resolved_inbox_items() == []
    assert await store.get_permission("check_stock", {"product": "x"}) == "unset"


async def test_it_keeps_sessions_apart(store_factory):
    mine, theirs = store_factory(), store_factory()
    await mine.append_messages([user("mine")])
    await mine.add_inbox_item(item("inbox_1_mine", "2030-01-01T10:00:00.000Z"))
    await mine.add_tokens(TokenUsage(tokens_in=5, tokens_out=5))

    assert await theirs.get_messages() == []
    assert await theirs.get_inbox_items() == []
    assert await theirs.get_token_count() == 0
    with pytest.raises(InboxItemNotFound):
        await theirs.update_inbox_item("inbox_1_mine", {"status": "consumed"})


# -- messages -----------------------------------------------------------------------------


async def test_it_round_trips_every_wire_field_of_every_message(store):
    messages = full_messages()
    await store.append_messages(messages)

    stored = await store.get_messages()

    assert [m.to_dict() for m in stored] == [m.to_dict() for m in messages]


async def test_it_keeps_append_order_across_batches(store):
    await store.append_messages([user("1"), agent("2")])
    await store.append_messages([])
    await store.append_messages([user("3")])
    await store.append_messages([agent("4"), user("5"), agent("6")])

    assert texts(await store.get_messages()) == ["1", "2", "3", "4", "5", "6"]


async def test_it_gives_the_whole_history_as_context_without_a_marker(store):
    await store.append_messages([user("a"), agent("b"), user("c")])

    assert texts(await store.get_context_messages()) == ["a", "b", "c"]


async def test_it_gives_context_from_the_last_compaction_marker_on(store):
    await store.append_messages([user("a"), agent("b"), summary("first")])
    await store.append_messages([user("c"), agent("d")])
    await store.append_messages([summary("second"), user("e")])

    context = await store.get_context_messages()

    assert texts(context) == [summary("second").text, "e"]
    assert context[0].is_compaction is True
    assert len(await store.get_messages()) == 7


async def test_it_treats_a_marker_as_the_first_message_like_any_start(store):
    await store.append_messages([summary("carried over"), user("a")])

    assert texts(await store.get_context_messages()) == [summary("carried over").text, "a"]


async def test_it_gives_just_the_marker_when_it_is_the_newest_message(store):
    await store.append_messages([user("a"), agent("b")])
    await store.append_messages([summary("now")])

    assert texts(await store.get_context_messages()) == [summary("now").text]


# -- counters -----------------------------------------------------------------------------


async def test_it_counts_tokens_in_plus_out(store):
    await store.add_tokens(TokenUsage(tokens_in=100, tokens_out=20))
    await store.add_tokens(TokenUsage(tokens_in=7, tokens_out=3, cache_read_input_tokens=50))

    assert await store.get_token_count() == 130


async def test_it_counts_turns(store):
    for _ in range(3):
        await store.increment_turn()

    assert await store.get_turn_count() == 3


async def test_it_resets_both_counters_and_keeps_the_messages(store):
    await store.append_messages([user("hello"), agent("hi")])
    await store.add_tokens(TokenUsage(tokens_in=10, tokens_out=5))
    await store.increment_turn()

    await store.reset_counters()

    assert await store.get_token_count() == 0
    assert await store.get_turn_count() == 0
    assert texts(await store.get_messages()) == ["hello", "hi"]
    await store.add_tokens(TokenUsage(tokens_in=1, tokens_out=1))
    assert await store.get_token_count() == 2


# -- tasks --------------------------------------------------------------------------------


async def test_it_replaces_the_whole_task_list(store):
    await store.add_tasks([Task("t1", "Grind beans", "Grinding beans", "in_progress")])
    await store.add_tasks(
        [Task("t2", "Boil water", "Boiling water"), Task("t3", "Pour", "Pouring", "completed")]
    )

    tasks = await store.get_tasks()

    assert [t.to_dict() for t in tasks] == [
        {"id": "t2", "content": "Boil water", "activeForm": "Boiling water", "status": "pending"},
        {"id": "t3", "content": "Pour", "activeForm": "Pouring", "status": "completed"},
    ]


async def test_it_empties_the_task_list_with_an_empty_replacement(store):
    await store.add_tasks([Task("t1", "Grind beans", "Grinding beans")])
    await store.add_tasks([])

    assert await store.get_tasks() == []


async def test_it_updates_one_task_and_leaves_the_others(store):
    await store.add_tasks([Task("t1", "Grind", "Grinding"), Task("t2", "Brew", "Brewing")])

    await store.update_task("t1", {"status": "completed"})
    await store.update_task("t2", {"content": "Brew slowly", "activeForm": "Brewing slowly"})

    assert [t.to_dict() for t in await store.get_tasks()] == [
        {"id": "t1", "content": "Grind", "activeForm": "Grinding", "status": "completed"},
        {"id": "t2", "content": "Brew slowly", "activeForm": "Brewing slowly", "status": "pending"},
    ]


async def test_it_ignores_an_update_of_an_unknown_task(store):
    await store.add_tasks([Task("t1", "Grind", "Grinding")])

    await store.update_task("nope", {"status": "completed"})

    assert [t.status for t in await store.get_tasks()] == ["pending"]


async def test_it_refuses_a_bad_task_update_and_changes_nothing(store):
    await store.add_tasks([Task("t1", "Grind", "Grinding")])

    with pytest.raises(ValueError, match="status"):
        await store.update_task("t1", {"status": "done"})
    with pytest.raises(ValueError, match="unknown task update field"):
        await store.update_task("t1", {"owner": "me"})

    assert [t.to_dict() for t in await store.get_tasks()] == [
        {"id": "t1", "content": "Grind", "activeForm": "Grinding", "status": "pending"}
    ]


async def test_it_returns_tasks_the_caller_cannot_change_behind_its_back(store):
    await store.add_tasks([Task("t1", "Grind", "Grinding")])
    (task,) = await store.get_tasks()
    task.status = "completed"

    assert [t.status for t in await store.get_tasks()] == ["pending"]


# -- permissions --------------------------------------------------------------------------


async def test_it_remembers_a_permission_per_tool_and_exact_input(store):
    await store.set_permission("place_order", "granted", {"product": "Yirgacheffe", "bags": 2})

    assert await store.get_permission("place_order", {"product": "Yirgacheffe", "bags": 2}) == (
        "granted"
    )
    assert await store.get_permission("place_order", {"product": "Yirgacheffe", "bags": 3}) == (
        "unset"
    )
    # Keys follow JSON.stringify: key order is part of the key.
    assert await store.get_permission("place_order", {"bags": 2, "product": "Yirgacheffe"}) == (
        "unset"
    )
    assert await store.get_permission("cancel_order", {"product": "Yirgacheffe", "bags": 2}) == (
        "unset"
    )


async def test_it_overwrites_a_permission_and_keys_no_input_as_null(store):
    await store.set_permission("check_stock", "denied")
    await store.set_permission("check_stock", "granted", None)

    assert await store.get_permission("check_stock") == "granted"
    assert await store.get_permission("check_stock", {}) == "unset"


# -- inbox --------------------------------------------------------------------------------


async def test_it_stores_an_inbox_item_with_every_field(store):
    posted = InboxItem(
        id="inbox_1_a",
        tag="payment_confirmation",
        request='Confirm payment for order "#1042"',
        blocking=True,
        created_at="2030-01-01T10:00:00.123Z",
    )
    await store.add_inbox_item(posted)

    (stored,) = await store.get_inbox_items()

    assert stored.to_dict() == {
        "id": "inbox_1_a",
        "tag": "payment_confirmation",
        "request": 'Confirm payment for order "#1042"',
        "response": None,
        "status": "pending",
        "blocking": True,
        "created_at": "2030-01-01T10:00:00.123Z",
        "resolved_at": None,
    }


async def test_it_lists_inbox_items_oldest_first(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))
    await store.add_inbox_item(item("inbox_2_b", "2030-01-01T10:00:01.000Z"))
    await store.add_inbox_item(item("inbox_3_c", "2030-01-01T10:00:02.000Z"))

    assert [i.id for i in await store.get_inbox_items()] == ["inbox_1_a", "inbox_2_b", "inbox_3_c"]


async def test_it_refuses_a_duplicate_inbox_id_and_keeps_the_first(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))

    with pytest.raises(DuplicateInboxItem, match="inbox_1_a"):
        await store.add_inbox_item(
            InboxItem(
                id="inbox_1_a", tag="other", request="other", created_at="2031-01-01T00:00:00.000Z"
            )
        )

    (only,) = await store.get_inbox_items()
    assert only.tag == "restock_watch"


async def test_it_resolves_a_pending_item(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))

    await store.update_inbox_item(
        "inbox_1_a",
        {
            "status": "resolved",
            "response": "Back in stock",
            "resolved_at": "2030-01-02T09:30:00.250Z",
        },
    )

    (resolved,) = await store.get_resolved_inbox_items()
    assert (resolved.id, resolved.status, resolved.response, resolved.resolved_at) == (
        "inbox_1_a",
        "resolved",
        "Back in stock",
        "2030-01-02T09:30:00.250Z",
    )


async def test_it_resolves_through_the_runtime_helper(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))

    resolved = await resolve_inbox_item(store, "inbox_1_a", "Back in stock")

    assert (resolved.status, resolved.response) == ("resolved", "Back in stock")
    assert resolved.resolved_at and resolved.resolved_at.endswith("Z")


async def test_it_refuses_to_resolve_twice_and_keeps_the_first_response(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))
    await resolve_inbox_item(store, "inbox_1_a", "first")

    with pytest.raises(InboxTransitionError, match="already resolved"):
        await resolve_inbox_item(store, "inbox_1_a", "second")

    (stored,) = await store.get_inbox_items()
    assert stored.response == "first"


async def test_it_never_resurrects_a_consumed_item(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))
    await resolve_inbox_item(store, "inbox_1_a", "first")
    await store.consume_resolved_inbox_items()

    with pytest.raises(InboxTransitionError, match="already consumed"):
        await store.update_inbox_item("inbox_1_a", {"status": "resolved", "response": "again"})
    with pytest.raises(InboxTransitionError):
        await store.update_inbox_item("inbox_1_a", {"status": "pending"})
    with pytest.raises(InboxTransitionError):
        await store.update_inbox_item("inbox_1_a", {"status": "consumed"})

    (stored,) = await store.get_inbox_items()
    assert (stored.status, stored.response) == ("consumed", "first")


async def test_it_withdraws_a_pending_item_straight_to_consumed(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))

    await store.update_inbox_item("inbox_1_a", {"status": "consumed", "response": "Send failed"})

    (stored,) = await store.get_inbox_items()
    assert (stored.status, stored.response) == ("consumed", "Send failed")
    assert await store.consume_resolved_inbox_items() == []


async def test_it_refuses_bad_inbox_updates_and_changes_nothing(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))

    with pytest.raises(ValueError, match="unknown inbox update field"):
        await store.update_inbox_item("inbox_1_a", {"status": "resolved", "tag": "x"})
    with pytest.raises(ValueError, match="status must be one of"):
        await store.update_inbox_item("inbox_1_a", {"status": "done"})
    with pytest.raises(InboxTransitionError):
        await store.update_inbox_item("inbox_1_a", {"status": "pending"})

    (stored,) = await store.get_inbox_items()
    assert (stored.status, stored.response, stored.tag) == ("pending", None, "restock_watch")


async def test_it_reports_unknown_inbox_ids(store):
    with pytest.raises(InboxItemNotFound, match="inbox_nope"):
        await store.update_inbox_item("inbox_nope", {"status": "resolved", "response": "x"})
    with pytest.raises(InboxItemNotFound):
        await resolve_inbox_item(store, "inbox_nope", "x")


async def test_it_lists_only_resolved_items_as_resolved(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))
    await store.add_inbox_item(item("inbox_2_b", "2030-01-01T10:00:01.000Z"))
    await store.add_inbox_item(item("inbox_3_c", "2030-01-01T10:00:02.000Z"))
    await resolve_inbox_item(store, "inbox_1_a", "one")
    await resolve_inbox_item(store, "inbox_3_c", "three")

    resolved = await store.get_resolved_inbox_items()

    assert [(i.id, i.response) for i in resolved] == [("inbox_1_a", "one"), ("inbox_3_c", "three")]


async def test_it_accepts_an_item_that_arrives_already_resolved(store):
    # glove-mesh delivers inbound messages this way.
    await store.add_inbox_item(
        item(
            "inbox_1_mesh",
            "2030-01-01T10:00:00.000Z",
            status="resolved",
            response="hello B",
            resolved_at="2030-01-01T10:00:01.000Z",
        )
    )

    (resolved,) = await store.get_resolved_inbox_items()
    assert (resolved.response, resolved.resolved_at) == ("hello B", "2030-01-01T10:00:01.000Z")


async def test_it_consumes_resolved_items_once(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))
    await store.add_inbox_item(item("inbox_2_b", "2030-01-01T10:00:01.000Z"))
    await store.add_inbox_item(item("inbox_3_c", "2030-01-01T10:00:02.000Z"))
    await resolve_inbox_item(store, "inbox_1_a", "one")
    await resolve_inbox_item(store, "inbox_2_b", "two")

    taken = await store.consume_resolved_inbox_items()

    assert [(i.id, i.response) for i in taken] == [("inbox_1_a", "one"), ("inbox_2_b", "two")]
    assert await store.consume_resolved_inbox_items() == []
    assert await store.get_resolved_inbox_items() == []
    assert {i.id: i.status for i in await store.get_inbox_items()} == {
        "inbox_1_a": "consumed",
        "inbox_2_b": "consumed",
        "inbox_3_c": "pending",
    }


async def test_it_consumes_each_item_exactly_once_under_concurrent_turns(store):
    for n in range(10):
        await store.add_inbox_item(item(f"inbox_{n}_x", f"2030-01-01T10:00:{n:02d}.000Z"))
        await resolve_inbox_item(store, f"inbox_{n}_x", f"response {n}")

    batches = await asyncio.gather(*(store.consume_resolved_inbox_items() for _ in range(5)))

    taken = sorted(i.id for batch in batches for i in batch)
    assert taken == sorted(f"inbox_{n}_x" for n in range(10))


async def test_it_consumes_an_item_resolved_after_an_earlier_consume(store):
    await store.add_inbox_item(item("inbox_1_a", "2030-01-01T10:00:00.000Z"))
    assert await store.consume_resolved_inbox_items() == []

    await resolve_inbox_item(store, "inbox_1_a", "later")

    assert [i.response for i in await store.consume_resolved_inbox_items()] == ["later"]
