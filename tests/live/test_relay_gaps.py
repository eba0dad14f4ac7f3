"""Ids are allocated before commit, so rows can become visible out of id order; the relay
still delivers every one, and one stream's events stay in order."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from channels.db import database_sync_to_async
from django.db import connection, transaction

from gloveapp.live.eventlog import record_event
from gloveapp.live.groups import stream_group
from gloveapp.live.models import LiveEvent
from gloveapp.live.streams import session_stream
from tests.live.conftest import FRAME_TIMEOUT, acommit_event, frames, open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


async def test_it_relays_an_event_whose_smaller_id_commits_later(layer, chat, owner_cookie):
    communicator = await open_socket(chat.id, owner_cookie)
    early_id, late_id = await database_sync_to_async(_reserve_two_ids)()

    await database_sync_to_async(_insert_with_id)(late_id, 1, chat.id, "committed first")
    assert [frame["id"] for frame in await frames(communicator, 1)] == [1]

    # The frame's id is the event's number in its stream, never the table's key.
    await database_sync_to_async(_insert_with_id)(early_id, 2, chat.id, "committed second")
    assert await frames(communicator, 1) == [
        {"id": 2, "type": "session.updated", "payload": {"title": "committed second"}}
    ]
    await communicator.disconnect()


async def test_it_relays_a_slow_transaction_that_commits_after_a_later_one(
    requires_postgres, layer, chat, other_chat, owner_cookie, other_cookie
):
    # Real concurrency: the owner's change takes its id first but commits last.
    communicator = await open_socket(chat.id, owner_cookie)
    neighbour = await open_socket(other_chat.id, other_cookie)
    holding, release = threading.Event(), threading.Event()

    def slow_change() -> LiveEvent:
        with transaction.atomic():
            event = record_event(stream=session_stream(chat.id), type="session.updated", payload={})
            holding.set()
            release.wait(FRAME_TIMEOUT)
        return event

    slow = asyncio.ensure_future(database_sync_to_async(slow_change, thread_sensitive=False)())
    await asyncio.to_thread(holding.wait, FRAME_TIMEOUT)
    quick_id = await acommit_event(other_chat.id, title="quick")
    # Once the quick event is relayed, the relay has gone past the slow one's id.
    assert [frame["id"] for frame in await frames(neighbour, 1)] == [quick_id]
    release.set()
    slow_event = await slow

    quick_key = await LiveEvent.objects.filter(stream=session_stream(other_chat.id)).alatest("id")
    assert slow_event.id < quick_key.id
    assert [frame["id"] for frame in await frames(communicator, 1)] == [slow_event.seq]
    await communicator.disconnect()
    await neighbour.disconnect()


async def test_it_commits_one_streams_events_in_id_order(
    requires_postgres, layer, chat, owner_cookie
):
    # Two writers on one session: the second waits for the first to commit, so a client
    # resuming from the larger id can never skip the smaller one.
    communicator = await open_socket(chat.id, owner_cookie)
    holding, release = threading.Event(), threading.Event()

    def first_writer() -> int:
        with transaction.atomic():
            event = record_event(stream=session_stream(chat.id), type="session.updated", payload={})
            holding.set()
            release.wait(FRAME_TIMEOUT)
        return event.seq

    first = asyncio.ensure_future(database_sync_to_async(first_writer, thread_sensitive=False)())
    await asyncio.to_thread(holding.wait, FRAME_TIMEOUT)
    second = asyncio.ensure_future(acommit_event(chat.id, title="second"))
    await database_sync_to_async(_wait_for_a_lock_waiter)()
    release.set()
    first_id, second_id = await first, await second

    assert second_id == first_id + 1
    assert [frame["id"] for frame in await frames(communicator, 2)] == [first_id, second_id]
    await communicator.disconnect()


def test_it_names_groups_within_the_channel_layers_rules():
    streams = ["session:chat-1", "session:chat-2", "session:chat 1", "workspace:é/" + "x" * 300]
    names = [stream_group(stream) for stream in streams]
    assert len(set(names)) == len(names)
    for name in names:
        assert len(name) < 100
        assert all(ch.isascii() and (ch.isalnum() or ch in "-_.") for ch in name)


def _reserve_two_ids() -> tuple[int, int]:
    """Two ids no other row will take, the way two transactions would get them."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            table = LiveEvent._meta.db_table
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')), "
                "nextval(pg_get_serial_sequence(%s, 'id'))",
                [table, table],
            )
            return tuple(cursor.fetchone())
    newest = LiveEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    return newest + 1, newest + 2


def _insert_with_id(event_id: int, seq: int, session_id: str, title: str) -> None:
    with transaction.atomic():
        LiveEvent.objects.create(
            id=event_id,
            seq=seq,
            stream=session_stream(session_id),
            type="session.updated",
            payload={"title": title},
        )


def _wait_for_a_lock_waiter() -> None:
    with connection.cursor() as cursor:
        for _ in range(200):
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.025)
    raise AssertionError("the second writer never waited for the first")
