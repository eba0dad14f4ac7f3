"""The id a client sees is the event's number in its own stream: 1, 2, 3... with no gaps
from other streams' events or rolled-back writes, on the socket and over SSE alike."""

from __future__ import annotations

import json
import threading

import pytest
from channels.db import database_sync_to_async
from django.db import connection, transaction
from rest_framework.authtoken.models import Token

from gloveapp.conversations.services import messages_append
from gloveapp.core.types import Message
from gloveapp.live.eventlog import record_event, record_stream_events
from gloveapp.live.models import LiveEvent
from gloveapp.live.streams import session_stream
from tests.api.sse_asgi import SseStream
from tests.live.conftest import FRAME_TIMEOUT, acommit_event, frames, open_socket, socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


async def test_each_stream_numbers_its_own_events_from_one(
    layer, chat, other_chat, owner_cookie, other_cookie
):
    mine = await open_socket(chat.id, owner_cookie)
    theirs = await open_socket(other_chat.id, other_cookie)
    for n in range(3):
        await acommit_event(chat.id, title=f"mine {n}")
        await acommit_event(other_chat.id, title=f"theirs {n}")

    assert [frame["id"] for frame in await frames(mine, 3)] == [1, 2, 3]
    assert [frame["id"] for frame in await frames(theirs, 3)] == [1, 2, 3]
    await mine.disconnect()
    await theirs.disconnect()


async def test_a_reconnect_from_a_stream_number_replays_exactly_what_was_missed(
    layer, chat, other_chat, owner_cookie
):
    seen = await acommit_event(chat.id, title="seen")
    missed = []
    for n in range(2):
        await acommit_event(other_chat.id, title=f"elsewhere {n}")
        missed.append(await acommit_event(chat.id, title=f"missed {n}"))

    again = await open_socket(chat.id, owner_cookie, last_event_id=seen)
    live = await acommit_event(chat.id, title="live")

    received = await frames(again, 3)
    assert [frame["id"] for frame in received] == [2, 3, 4] == [*missed, live]
    assert [frame["payload"]["title"] for frame in received] == ["missed 0", "missed 1", "live"]
    assert await again.receive_nothing(timeout=0.3)
    await again.disconnect()


async def test_a_rolled_back_write_leaves_no_gap(layer, chat, other_chat, owner_cookie):
    def rolled_back() -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            record_stream_events(
                [
                    (session_stream(chat.id), "session.updated", {"title": "never"}),
                    (session_stream(other_chat.id), "session.updated", {"title": "never"}),
                ]
            )
            raise RuntimeError("the change failed")

    first = await acommit_event(chat.id, title="first")
    await database_sync_to_async(rolled_back, thread_sensitive=False)()
    second = await acommit_event(chat.id, title="second")
    assert (first, second) == (1, 2)

    communicator = await open_socket(chat.id, owner_cookie, last_event_id=0)
    received = await frames(communicator, 2)
    assert [(frame["id"], frame["payload"]["title"]) for frame in received] == [
        (1, "first"),
        (2, "second"),
    ]
    await communicator.disconnect()
    # The other stream's counter was rolled back too: its first event is still 1.
    assert await acommit_event(other_chat.id, title="theirs") == 1


async def test_concurrent_writers_of_one_stream_get_distinct_consecutive_numbers(
    requires_postgres, layer, chat, other_chat, owner_cookie
):
    # Services' events and messages' appends (the append's one statement numbers its events
    # itself) on one stream at once, and a writer of another stream beside them.
    writers, each = 4, 10
    start = threading.Barrier(writers + 1)

    def write(stream: str, appends: bool) -> None:
        start.wait(FRAME_TIMEOUT)
        try:
            for n in range(each):
                if appends:
                    messages_append(
                        session_id=chat.id, messages=[Message(sender="user", text="hi")]
                    )
                    continue
                with transaction.atomic():
                    record_event(stream=stream, type="session.updated", payload={"n": n})
        finally:
            connection.close()

    mine = session_stream(chat.id)
    threads = [
        threading.Thread(target=write, args=(mine, index % 2 == 0)) for index in range(writers)
    ]
    threads.append(threading.Thread(target=write, args=(session_stream(other_chat.id), False)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(FRAME_TIMEOUT * 3)

    total = writers * each
    numbers = [
        seq async for seq in LiveEvent.objects.filter(stream=mine).values_list("seq", flat=True)
    ]
    assert sorted(numbers) == list(range(1, total + 1))
    communicator = await open_socket(chat.id, owner_cookie, last_event_id=0)
    received = await frames(communicator, total)
    assert [frame["id"] for frame in received] == list(range(1, total + 1))
    await communicator.disconnect()


@pytest.mark.parametrize(
    ("raw", "replayed"),
    [("abc", None), ("-5", [1, 2]), ("", None), ("9" * 30, "resync"), ("9" * 5000, None)],
)
async def test_a_hostile_socket_cursor_is_ignored_or_told_to_resync(
    layer, chat, owner_cookie, raw, replayed
):
    await acommit_event(chat.id, title="one")
    await acommit_event(chat.id, title="two")
    communicator = socket(chat.id, owner_cookie)
    communicator.scope["query_string"] = f"last_event_id={raw}".encode()
    connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
    assert connected
    if replayed is None:  # no cursor: live from now on
        assert await communicator.receive_nothing(timeout=0.3)
    elif replayed == "resync":
        [resync] = await frames(communicator, 1)
        assert resync["payload"] == {"reason": "unknown_cursor", "last_event_id": 2}
    else:
        assert [frame["id"] for frame in await frames(communicator, 2)] == replayed
    await communicator.disconnect()


def _token_for(user) -> str:
    return Token.objects.create(user=user).key


async def _sse_messages(stream: SseStream, count: int) -> list[tuple[str | None, dict]]:
    """The next `count` messages' `id:` (None without one) and data."""
    found = []
    while len(found) < count:
        while "\n\n" not in stream.buffer:
            stream.buffer += await stream.body()
        message, stream.buffer = stream.buffer.split("\n\n", 1)
        lines = message.splitlines()
        data = [line[5:].strip() for line in lines if line.startswith("data:")]
        if not data:
            continue
        ids = [line[3:].strip() for line in lines if line.startswith("id:")]
        found.append((ids[0] if ids else None, json.loads("\n".join(data))))
    return found


def _sse(path: str, token: str, last_event_id: str) -> SseStream:
    stream = SseStream(path, token)
    stream.scope["headers"].append((b"last-event-id", last_event_id.encode()))
    return stream


async def test_sse_ids_and_last_event_id_count_per_stream(layer, chat, other_chat, owner):
    token = await database_sync_to_async(_token_for)(owner)
    for n in range(3):
        await acommit_event(other_chat.id, title=f"elsewhere {n}")
        await acommit_event(chat.id, title=f"mine {n}")

    async with _sse(f"/api/sessions/{chat.key}/events", token, "1") as stream:
        assert stream.status == 200
        replayed = await _sse_messages(stream, 2)
        assert [(id_, data["id"]) for id_, data in replayed] == [("2", 2), ("3", 3)]
        assert [data["payload"]["title"] for _, data in replayed] == ["mine 1", "mine 2"]


@pytest.mark.parametrize("raw", ["abc", "-5", "9" * 19, "1.5", "\uff19"])
async def test_a_hostile_last_event_id_is_a_400(layer, chat, owner, raw):
    token = await database_sync_to_async(_token_for)(owner)
    async with _sse(f"/api/sessions/{chat.key}/events", token, raw) as stream:
        assert stream.status == 400


async def test_a_huge_last_event_id_is_told_to_resync_with_its_streams_number(
    layer, chat, other_chat, owner
):
    token = await database_sync_to_async(_token_for)(owner)
    await acommit_event(other_chat.id, title="elsewhere")
    await acommit_event(chat.id, title="mine")
    async with _sse(f"/api/sessions/{chat.key}/events", token, "9" * 18) as stream:
        assert stream.status == 200
        [(id_, resync)] = await _sse_messages(stream, 1)
        assert id_ is None
        assert resync["payload"] == {"reason": "unknown_cursor", "last_event_id": 1}


async def test_one_write_of_several_streams_numbers_each_in_order(
    layer, chat, other_chat, owner_cookie, other_cookie
):
    def write() -> None:
        mine, theirs = session_stream(chat.id), session_stream(other_chat.id)
        with transaction.atomic():
            record_stream_events(
                [
                    (mine, "session.updated", {"title": "a"}),
                    (theirs, "session.updated", {"title": "x"}),
                    (mine, "session.updated", {"title": "b"}),
                ]
            )

    await acommit_event(chat.id, title="before")
    await database_sync_to_async(write, thread_sensitive=False)()

    mine = await open_socket(chat.id, owner_cookie, last_event_id=0)
    assert [(f["id"], f["payload"]["title"]) for f in await frames(mine, 3)] == [
        (1, "before"),
        (2, "a"),
        (3, "b"),
    ]
    theirs = await open_socket(other_chat.id, other_cookie, last_event_id=0)
    assert [(f["id"], f["payload"]["title"]) for f in await frames(theirs, 1)] == [(1, "x")]
    await mine.disconnect()
    await theirs.disconnect()
