"""Open event streams are bounded per user, and cost the channel layer nothing per stream.

One customer opened 500 to 1,100 event streams and took the live relay's Redis from every
other user of the process. Now a user holds at most GLOVE_MAX_OPEN_STREAMS_PER_USER streams
(SSE: 429 with Retry-After; websockets: 4429 with `retry_after`), and a process joins each
group once, however many of its streams watch it.
"""

from __future__ import annotations

import json

import pytest
import redis
from channels.db import database_sync_to_async
from rest_framework.authtoken.models import Token

from gloveapp.live.groups import stream_group
from gloveapp.live.streams import session_stream
from gloveapp.live.transient import broadcast_transient
from tests.api.sse_asgi import SseStream
from tests.live.conftest import FRAME_TIMEOUT, cookie_for, socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

CAP = 3


@pytest.fixture
def capped(settings):
    settings.GLOVE_MAX_OPEN_STREAMS_PER_USER = CAP


async def token_of(user) -> str:
    token, _ = await database_sync_to_async(Token.objects.get_or_create)(user=user)
    return token.key


async def test_an_sse_stream_past_the_cap_is_a_429_with_retry_after(
    layer, capped, chat, owner, other_user, other_chat
):
    mine = await token_of(owner)
    path = f"/api/sessions/{chat.id}/events"
    held = [SseStream(path, mine) for _ in range(CAP)]
    for stream in held:
        await stream.__aenter__()
    try:
        async with SseStream(path, mine) as refused:
            assert refused.status == 429
            assert int(refused.headers["retry-after"]) > 0
            assert "at most 3" in json.loads(await refused.body())["error"]
        # Another user's stream opens meanwhile.
        theirs = await token_of(other_user)
        async with SseStream(f"/api/sessions/{other_chat.id}/events", theirs) as other:
            assert other.status == 200
    finally:
        await held.pop().__aexit__()
    # One closed: one more opens.
    async with SseStream(path, mine) as again:
        assert again.status == 200
    for stream in held:
        await stream.__aexit__()


async def test_a_websocket_past_the_cap_is_closed_with_4429(layer, capped, chat, owner):
    cookie = await database_sync_to_async(cookie_for)(owner)
    opened = []
    for _ in range(CAP):
        communicator = socket(chat.id, cookie)
        connected, _ = await communicator.connect(timeout=FRAME_TIMEOUT)
        assert connected
        opened.append(communicator)

    refused = socket(chat.id, cookie)
    await refused.connect(timeout=FRAME_TIMEOUT)
    closed = await refused.receive_output(timeout=FRAME_TIMEOUT)

    assert closed["type"] == "websocket.close" and closed["code"] == 4429
    assert closed.get("reason", "").startswith("retry_after=")
    for communicator in opened:
        await communicator.disconnect()


async def test_the_channel_layer_holds_one_member_per_group_however_many_streams(
    layer, settings, chat, owner, redis_url
):
    if layer != "redis":
        pytest.skip("counts Redis members")
    settings.GLOVE_MAX_OPEN_STREAMS_PER_USER = 0
    mine = await token_of(owner)
    cookie = await database_sync_to_async(cookie_for)(owner)
    path = f"/api/sessions/{chat.id}/events"
    streams = [SseStream(path, mine) for _ in range(12)]
    for stream in streams:
        await stream.__aenter__()
    sockets = []
    for _ in range(8):
        communicator = socket(chat.id, cookie)
        assert (await communicator.connect(timeout=FRAME_TIMEOUT))[0]
        sockets.append(communicator)

    members = redis.Redis.from_url(redis_url).zcard(
        f"asgi:group:{stream_group(session_stream(chat.id))}"
    )
    await broadcast_transient(chat.id, "text_delta", {"text": "Hi"})

    assert members == 1
    for stream in streams:
        assert (await stream.frame())["payload"] == {"text": "Hi"}
    for communicator in sockets:
        frame = await communicator.receive_json_from(timeout=FRAME_TIMEOUT)
        assert frame["type"] == "text_delta" and frame["payload"] == {"text": "Hi"}
    for stream in streams:
        await stream.__aexit__()
    for communicator in sockets:
        await communicator.disconnect()


# -- across processes: the count is shared through Redis -------------------------------------
# Each `OpenStreams` is one process's count; two on the run's Redis are two processes.


@pytest.fixture
def two_processes(redis_url):
    from gloveapp.live.open_streams import OpenStreams

    redis.Redis.from_url(redis_url).flushdb()
    return OpenStreams(redis_url, "test"), OpenStreams(redis_url, "test")


def test_a_users_streams_are_counted_across_processes(two_processes):
    from gloveapp.live.open_streams import OpenStreams, TooManyStreams

    first, second = two_processes
    first.take("bea", CAP)
    first.take("bea", CAP)
    second.take("bea", CAP)
    with pytest.raises(TooManyStreams, match="at most 3"):
        second.take("bea", CAP)
    with pytest.raises(TooManyStreams):
        first.take("bea", CAP)
    # Another user, and the same user id of another deployment, are counted apart.
    second.take("cal", CAP)
    OpenStreams(first.redis_url, "another").take("bea", CAP)
    # One closes in the first process: the second may open one.
    first.give_back("bea")
    second.take("bea", CAP)
    assert (first.held("bea"), second.held("bea")) == (1, 2)


def test_a_killed_processs_streams_stop_counting_and_a_live_ones_are_renewed(
    two_processes, monkeypatch
):
    import time

    from gloveapp.live import open_streams

    monkeypatch.setattr(open_streams, "LEASE_SECONDS", 1)
    killed, alive = two_processes
    for _ in range(CAP - 1):
        killed.take("bea", CAP)  # never given back: the process dies
    killed.stop_renewing()
    alive.take("bea", CAP)
    with pytest.raises(open_streams.TooManyStreams):
        alive.take("bea", CAP)
    for _ in range(3):  # the live process renews its lease, the dead one cannot
        time.sleep(0.5)
        alive.renew()
    alive.take("bea", CAP)
    alive.take("bea", CAP)
    with pytest.raises(open_streams.TooManyStreams):
        alive.take("bea", CAP)  # its first lease still counts: it was renewed


def test_with_redis_away_each_process_counts_its_own_and_refuses_only_past_the_cap(caplog):
    import socket

    from gloveapp.live.open_streams import OpenStreams, TooManyStreams

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    away = OpenStreams(f"redis://127.0.0.1:{port}/0", "test")
    for _ in range(CAP):
        away.take("bea", CAP)
    with pytest.raises(TooManyStreams):
        away.take("bea", CAP)
    away.give_back("bea")
    away.take("bea", CAP)
    assert away.held("bea") == CAP
    assert sum("each process counts its own" in r.getMessage() for r in caplog.records) == 1
