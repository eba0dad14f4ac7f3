"""Changes reach the owner's socket in commit order, on the in-memory layer and on Redis."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from gloveapp.live.transient import broadcast_transient, broadcast_transient_sync
from tests.live.conftest import acommit_event, commit_event, frames, open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


async def test_it_pushes_each_change_to_the_owner_in_order(layer, chat, owner_cookie):
    communicator = await open_socket(chat.id, owner_cookie)
    ids = [await acommit_event(chat.id, "message.appended", seq=seq) for seq in range(5)]

    received = await frames(communicator, 5)

    assert [frame["id"] for frame in received] == ids
    assert [frame["payload"]["seq"] for frame in received] == [0, 1, 2, 3, 4]
    assert {frame["type"] for frame in received} == {"message.appended"}
    await communicator.disconnect()


async def test_it_does_not_show_the_owner_another_sessions_events(
    layer, chat, other_chat, owner_cookie
):
    communicator = await open_socket(chat.id, owner_cookie)
    await acommit_event(other_chat.id, title="not yours")
    mine = await acommit_event(chat.id, title="yours")

    assert await frames(communicator, 1) == [
        {"id": mine, "type": "session.updated", "payload": {"title": "yours"}}
    ]
    await communicator.disconnect()


async def test_it_relays_a_change_committed_on_another_connection(layer, chat, owner_cookie):
    # A worker thread with its own database connection, like a management command or a
    # webhook handled elsewhere: only the committed row connects it to the socket.
    communicator = await open_socket(chat.id, owner_cookie)

    def worker() -> int:
        return commit_event(chat.id, "inbox.changed", item={"id": "in-1"}, resolved_by="command")

    event_id = await database_sync_to_async(worker, thread_sensitive=False)()

    assert await frames(communicator, 1) == [
        {
            "id": event_id,
            "type": "inbox.changed",
            "payload": {"item": {"id": "in-1"}, "resolved_by": "command"},
        }
    ]
    await communicator.disconnect()


async def test_it_streams_transient_events_without_an_id(layer, chat, owner_cookie):
    communicator = await open_socket(chat.id, owner_cookie)

    await broadcast_transient(chat.id, "text_delta", {"text": "Hel"})
    await database_sync_to_async(broadcast_transient_sync)(chat.id, "text_delta", {"text": "lo"})

    assert await frames(communicator, 2) == [
        {"id": None, "type": "text_delta", "payload": {"text": "Hel"}},
        {"id": None, "type": "text_delta", "payload": {"text": "lo"}},
    ]
    await communicator.disconnect()


async def test_it_pushes_to_every_socket_of_the_owner(layer, chat, owner_cookie):
    first = await open_socket(chat.id, owner_cookie)
    second = await open_socket(chat.id, owner_cookie)
    event_id = await acommit_event(chat.id, title="both tabs")

    assert (await frames(first, 1))[0]["id"] == event_id
    assert (await frames(second, 1))[0]["id"] == event_id
    await first.disconnect()
    await second.disconnect()


async def test_it_keeps_each_sessions_order_under_concurrent_writers(
    layer, chat, other_chat, owner_cookie
):
    communicator = await open_socket(chat.id, owner_cookie)

    def writer(session_id: str, count: int) -> list[int]:
        return [commit_event(session_id, "message.appended", seq=seq) for seq in range(count)]

    mine, _theirs, more_mine = await asyncio.gather(
        database_sync_to_async(writer, thread_sensitive=False)(chat.id, 15),
        database_sync_to_async(writer, thread_sensitive=False)(other_chat.id, 15),
        database_sync_to_async(writer, thread_sensitive=False)(chat.id, 15),
    )

    received = [frame["id"] for frame in await frames(communicator, 30)]
    assert received == sorted(mine + more_mine)
    await communicator.disconnect()
