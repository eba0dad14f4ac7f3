"""What DjangoStore promises beyond the shared contract: durability, atomicity, the outbox."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from gloveapp.conversations import append, services
from gloveapp.conversations.models import Message, Session
from gloveapp.core.store import resolve_inbox_item
from gloveapp.core.types import InboxItem, TokenUsage, ToolCall
from gloveapp.core.types import Message as CoreMessage
from gloveapp.live.eventlog import record_event
from gloveapp.live.models import LiveEvent
from gloveapp.ormstore.store import DjangoStore
from inbox.models import InboxItem as InboxRow
from inbox.services import inbox_item_resolve as resolve_service
from inbox.services import inbox_items_consume_resolved
from tests.helpers import post_item, run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def user(text: str, **extra) -> CoreMessage:
    return CoreMessage(sender="user", text=text, **extra)


async def count(model, **filters) -> int:
    return await model.objects.filter(**filters).acount()


async def test_it_shares_one_session_between_store_instances():
    writer, reader = DjangoStore("shared"), DjangoStore("shared")

    await writer.append_messages([user("hello")])
    await writer.add_inbox_item(InboxItem(id="inbox_1_a", tag="t", request="r"))

    assert [m.text for m in await reader.get_messages()] == ["hello"]
    assert [i.id for i in await reader.get_inbox_items()] == ["inbox_1_a"]


async def test_it_creates_the_session_on_the_first_write_only():
    store = DjangoStore("fresh")

    assert await store.get_messages() == []
    assert await store.get_token_count() == 0
    assert not await Session.objects.filter(pk="fresh").aexists()

    await store.increment_turn()

    assert await Session.objects.filter(pk="fresh").aexists()


def test_it_refuses_an_unusable_session_id():
    for bad in ("", "x" * 129, "nul\x00"):
        with pytest.raises(ValueError, match="session_id"):
            DjangoStore(bad)


async def test_it_stores_json_not_pickles():
    store = DjangoStore("s1")
    await store.append_messages(
        [CoreMessage(sender="agent", text="", tool_calls=[ToolCall("check_stock", {"a": 1}, "t1")])]
    )

    row = await Message.objects.aget(session_id="s1")

    assert row.tool_calls == [{"id": "t1", "tool_name": "check_stock", "input_args": {"a": 1}}]


async def test_it_refuses_a_batch_with_one_bad_message_and_writes_none_of_it():
    store = DjangoStore("s1")
    await store.append_messages([user("kept")])
    events_before = await LiveEvent.objects.acount()
    unstorable = CoreMessage(
        sender="agent", text="", tool_calls=[ToolCall("check_stock", {"n": float("nan")})]
    )

    with pytest.raises(ValueError, match=r"messages\[1\]\.tool_calls is not storable as JSON"):
        await store.append_messages([user("first of batch"), unstorable, user("third")])

    assert [m.text for m in await store.get_messages()] == ["kept"]
    assert await LiveEvent.objects.acount() == events_before


async def test_it_rolls_back_a_batch_that_fails_half_way_through_the_write(monkeypatch):
    store = DjangoStore("s1")
    await store.append_messages([user("kept")])

    if connection.vendor == "sqlite":

        def crash(**kwargs):
            raise RuntimeError("simulated crash after the rows were inserted")

        # The rows are inserted before the events: failing there proves the insert rolls back.
        monkeypatch.setattr(append, "record_events", crash)
    else:
        real_append = services.append_to_existing

        def crash(*, session_id, fields, **options):
            # One statement on PostgreSQL: the session row is updated and the first message
            # inserted before the second is refused (longer than its column allows).
            fields = [fields[0], {**fields[1], "framework_context": "x" * 51}]
            return real_append(session_id=session_id, fields=fields, **options)

        monkeypatch.setattr(services, "append_to_existing", crash)
    with pytest.raises((RuntimeError, DataError)):
        await store.append_messages([user("a"), user("b")])
    monkeypatch.undo()

    await store.append_messages([user("after")])
    assert [m.text for m in await store.get_messages()] == ["kept", "after"]
    assert list(
        await sync_to_async(
            lambda: list(Message.objects.order_by("seq").values_list("seq", flat=True))
        )()
    ) == [1, 2]


async def test_it_announces_each_appended_message_with_its_seq():
    store = DjangoStore("s1")

    await store.append_messages([user("a"), user("b")])

    events = [e async for e in LiveEvent.objects.filter(type="message.appended").order_by("id")]
    assert [(e.stream, e.payload["seq"], e.payload["message"]["text"]) for e in events] == [
        ("session:s1", 1, "a"),
        ("session:s1", 2, "b"),
    ]


async def test_it_announces_counters_tasks_and_inbox_changes():
    store = DjangoStore("s1")

    await store.add_tokens(TokenUsage(tokens_in=10, tokens_out=2))
    await store.add_inbox_item(InboxItem(id="inbox_1_a", tag="t", request="r"))
    await resolve_inbox_item(store, "inbox_1_a", "done")
    await store.consume_resolved_inbox_items()

    types = [e.type async for e in LiveEvent.objects.filter(stream="session:s1").order_by("id")]
    statuses = [
        e.payload["item"]["status"]
        async for e in LiveEvent.objects.filter(type="inbox.changed").order_by("id")
    ]
    assert "session.updated" in types
    assert statuses == ["pending", "resolved", "consumed"]
    session = await Session.objects.aget(pk="s1")
    assert (session.token_count, session.tokens_in_total, session.tokens_out_total) == (12, 10, 2)


def test_it_refuses_to_record_an_event_outside_a_transaction():
    with pytest.raises(RuntimeError, match="inside the change's transaction"):
        record_event(stream="session:x", type="test", payload={})
    with transaction.atomic():
        assert record_event(stream="session:x", type="test", payload={}).pk


def test_it_reads_context_with_a_marker_probe_and_a_bounded_range():
    services.messages_append(
        session_id="s1",
        messages=[user(f"m{n}", is_compaction=(n == 500)) for n in range(1000)],
    )

    with CaptureQueriesContext(connection) as queries:
        from gloveapp.conversations.selectors import read_messages

        context = read_messages("s1", since_compaction=True)

    assert [m.text for m in context][:2] == ["m500", "m501"]
    assert len(context) == 500
    assert len(queries) == 2
    assert "is_compaction" in queries[0]["sql"]
    # The marker's seq bounds the second query: PostgreSQL scans just that range of
    # (session, seq) (on PostgreSQL a prepared statement, logged with its parameters).
    assert '"seq" >=' in queries[1]["sql"] and "501" in queries[1]["sql"]


async def test_it_gives_pending_items_an_expiry_when_given_a_ttl():
    store = DjangoStore("s1", inbox_ttl=timedelta(hours=2))

    await store.add_inbox_item(
        InboxItem(id="inbox_1_a", tag="t", request="r", created_at="2030-01-01T10:00:00.000Z")
    )

    row = await InboxRow.objects.aget(pk="inbox_1_a")
    assert row.expires_at.isoformat() == "2030-01-01T12:00:00+00:00"


async def test_it_refuses_a_withdrawal_of_another_sessions_item():
    await sync_to_async(post_item)("inbox_1_theirs", session_id="theirs")

    from gloveapp.core.store import InboxItemNotFound

    with pytest.raises(InboxItemNotFound):
        await DjangoStore("mine").update_inbox_item("inbox_1_theirs", {"status": "consumed"})
    assert (await InboxRow.objects.aget(pk="inbox_1_theirs")).status == "pending"


def test_it_keeps_seq_unique_and_batches_whole_under_concurrent_appends():
    def append_batches(worker: int) -> None:
        for n in range(10):
            services.messages_append(
                session_id="busy",
                messages=[user(f"w{worker} b{n} m{i}") for i in range(3)],
            )

    outcomes = run_in_threads(4, append_batches)

    assert outcomes == [None] * 4
    rows = list(
        Message.objects.filter(session_id="busy").order_by("seq").values_list("seq", "text")
    )
    assert [seq for seq, _ in rows] == list(range(1, 121))
    for start in range(0, 120, 3):
        batch = [text.rsplit(" ", 1)[0] for _, text in rows[start : start + 3]]
        assert len(set(batch)) == 1, f"a batch was interleaved: {rows[start : start + 3]}"


def test_it_consumes_each_item_once_across_concurrent_connections():
    for n in range(10):
        post_item(f"inbox_{n}_x", session_id="busy", created_at=f"2030-01-01T10:00:{n:02d}.000Z")
        resolve_service(item_id=f"inbox_{n}_x", response=f"response {n}")

    outcomes = run_in_threads(8, lambda _: inbox_items_consume_resolved(session_id="busy"))

    taken = [item.id for batch in outcomes for item in batch]
    assert sorted(taken) == sorted(f"inbox_{n}_x" for n in range(10))
    assert set(InboxRow.objects.values_list("status", flat=True)) == {"consumed"}


async def test_it_takes_resolved_items_and_writes_their_banner_in_one_transaction():
    store = DjangoStore("atomic-banner")
    await store.add_inbox_item(InboxItem(id="inbox_1_banner", tag="restock_watch", request="r"))
    await resolve_inbox_item(store, "inbox_1_banner", "back in stock")

    def crash(items):
        raise RuntimeError("process died while writing the banner")

    with pytest.raises(RuntimeError):
        await store.inject_resolved_inbox_items(crash)

    # Nothing was lost: the item is still resolved and no message was written.
    assert [i.status for i in await store.get_inbox_items()] == ["resolved"]
    assert await store.get_messages() == []

    banner = await store.inject_resolved_inbox_items(
        lambda items: user(f"{len(items)} resolved", framework_context="inbox")
    )

    assert banner is not None and banner.text == "1 resolved"
    assert [m.text for m in await store.get_messages()] == ["1 resolved"]
    assert [i.status for i in await store.get_inbox_items()] == ["consumed"]
    assert await store.inject_resolved_inbox_items(lambda items: user("again")) is None


async def test_it_does_not_bring_a_deleted_session_back_to_life():
    store = DjangoStore("deleted-midway")
    await store.append_messages([user("hello")])
    session = await Session.objects.aget(pk="deleted-midway")
    await sync_to_async(services.session_delete)(session=session)

    # A turn still running for it tries to write its reply.
    with pytest.raises(services.SessionGone, match="was deleted"):
        await store.append_messages([user("the reply")])

    assert not await Session.objects.filter(pk="deleted-midway").aexists()
    assert await count(Message, session_id="deleted-midway") == 0
