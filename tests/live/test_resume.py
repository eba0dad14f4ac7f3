"""A client that reconnects with the last id it saw gets exactly what it missed, in order."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from gloveapp.live.models import LiveEvent
from gloveapp.live.streams import session_stream
from tests.live.conftest import acommit_event, commit_event, frames, open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


async def test_it_replays_exactly_the_events_missed_while_away(layer, chat, owner_cookie):
    first = await open_socket(chat.id, owner_cookie)
    seen = await acommit_event(chat.id, "message.appended", seq=0)
    assert (await frames(first, 1))[0]["id"] == seen
    await first.disconnect()

    missed = [await acommit_event(chat.id, "message.appended", seq=seq) for seq in (1, 2, 3)]
    again = await open_socket(chat.id, owner_cookie, last_event_id=seen)
    live = await acommit_event(chat.id, "message.appended", seq=4)

    received = await frames(again, 4)
    assert [frame["id"] for frame in received] == [*missed, live]
    assert [frame["payload"]["seq"] for frame in received] == [1, 2, 3, 4]
    await again.disconnect()


async def test_it_replays_nothing_to_a_client_that_is_up_to_date(layer, chat, owner_cookie):
    latest = await acommit_event(chat.id, title="old news")
    communicator = await open_socket(chat.id, owner_cookie, last_event_id=latest)
    fresh = await acommit_event(chat.id, title="news")

    assert [frame["id"] for frame in await frames(communicator, 1)] == [fresh]
    await communicator.disconnect()


async def test_it_never_loses_or_repeats_events_across_the_replay_boundary(
    layer, chat, owner_cookie
):
    # Events keep committing while the socket connects and replays: each must arrive once,
    # in id order, whether it came from the replay or from the relay.
    start = await acommit_event(chat.id, "message.appended", seq=0)
    writing = asyncio.ensure_future(
        database_sync_to_async(_write_burst, thread_sensitive=False)(chat.id, 40)
    )
    await asyncio.sleep(0)
    communicator = await open_socket(chat.id, owner_cookie, last_event_id=start)
    written = await writing

    sentinel = await acommit_event(chat.id, title="the end")

    received = [frame["id"] for frame in await frames(communicator, len(written) + 1)]
    assert received == [*written, sentinel]
    await communicator.disconnect()


async def test_it_tells_a_client_too_far_behind_to_reload(layer, settings, chat, owner_cookie):
    settings.GLOVE_LIVE_REPLAY_LIMIT = 3
    start = await acommit_event(chat.id, title="start")
    for n in range(4):
        await acommit_event(chat.id, title=f"change {n}")
    newest = await acommit_event(chat.id, title="newest")

    communicator = await open_socket(chat.id, owner_cookie, last_event_id=start)
    [resync] = await frames(communicator, 1)
    assert resync == {
        "id": None,
        "type": "resync",
        "payload": {"reason": "too_far_behind", "last_event_id": newest},
    }
    # After the resync the socket stays open and live.
    fresh = await acommit_event(chat.id, title="after reload")
    assert [frame["id"] for frame in await frames(communicator, 1)] == [fresh]
    await communicator.disconnect()


async def test_it_tells_a_client_whose_cursor_predates_retention_to_reload(
    layer, chat, owner_cookie
):
    old = await acommit_event(chat.id, title="old")
    pruned = await acommit_event(chat.id, title="pruned")
    kept = await acommit_event(chat.id, title="kept")
    await database_sync_to_async(_prune_up_to)(chat.id, pruned)

    communicator = await open_socket(chat.id, owner_cookie, last_event_id=old)
    [resync] = await frames(communicator, 1)
    assert resync["type"] == "resync"
    assert resync["payload"] == {"reason": "expired", "last_event_id": kept}
    await communicator.disconnect()


async def test_it_tells_a_client_with_a_cursor_from_the_future_to_reload(layer, chat, owner_cookie):
    newest = await acommit_event(chat.id, title="now")
    communicator = await open_socket(chat.id, owner_cookie, last_event_id=newest + 1000)
    [resync] = await frames(communicator, 1)
    assert resync["payload"] == {"reason": "unknown_cursor", "last_event_id": newest}
    await communicator.disconnect()


def _write_burst(session_id: str, count: int) -> list[int]:
    return [commit_event(session_id, "message.appended", seq=seq) for seq in range(1, count + 1)]


def _prune_up_to(session_id: str, seq: int) -> None:
    LiveEvent.objects.filter(stream=session_stream(session_id), seq__lte=seq).delete()
