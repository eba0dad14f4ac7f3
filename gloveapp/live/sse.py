"""One event stream as Server-Sent Events: the websocket consumer's frames over plain HTTP.

An edge (`gloveapp.api.agents.events`) checks who asks and which stream, then answers with
`sse_response(stream=…, user_pk=…, last_event_id=…)`. The feed is the websocket's
(`StreamConsumer`) on an async response: it counts against its user's open streams
(`live.open_streams`), registers with this process's relay (stored events) and with its hub
(`live.hub`: transient ones, one channel-layer membership per group per process) *before*
reading the replay, so every stored event is in the replay or arrives live (or both, deduplicated),
never neither. No thread is held while the stream is open: it waits on the event loop.

Each event is one SSE message; its `data` is the websocket's JSON frame
`{"id", "type", "payload"}`, its `event` the frame's type, and stored events carry `id:`
(the event's number in its stream, never the log's key), so a client that reconnects with `Last-Event-ID` gets what it missed,
or a `resync` frame when it is too far behind (`live.replay`). Transient frames (streamed
text, tool progress) have no id: a reconnecting client misses them by design, and what they
lead to is stored. A comment line (`: heartbeat`) goes out every
GLOVE_SSE_HEARTBEAT_SECONDS, so proxies keep an idle stream open.

The stream ends (and the client should not reconnect) after a `final_events` frame; it ends
with a `signed_out` comment when the user's login ends. A client that does not read keeps at
most MAX_BUFFERED frames here: past that the stream ends, and its reconnection replays from
the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.http import StreamingHttpResponse

from gloveapp.live import hub, open_streams
from gloveapp.live.groups import stream_group
from gloveapp.live.relay import StoredFrame, ensure_relay_started
from gloveapp.live.replay import replay_after
from gloveapp.live.signout import SIGNED_OUT, user_group
from gloveapp.live.streams import user_stream

logger = logging.getLogger(__name__)

# What one watcher may read of a transient frame: (type, payload) -> payload.
TransientShape = Callable[[str, dict], dict]

MAX_BUFFERED = 1000
# How long a client waits before reconnecting after a dropped connection (the SSE `retry:`).
RECONNECT_MILLISECONDS = 1000
_END = object()


async def run_db(func: Any, *args: Any, **kwargs: Any) -> Any:
    """`func(*args, **kwargs)` on a thread of the shared pool, its connections closed after
    (handed back to the pool): a thread-sensitive call would give each open stream a thread
    of its own, parked until the stream ends."""

    def closing() -> Any:
        try:
            return func(*args, **kwargs)
        finally:
            connections.close_all()

    return await sync_to_async(closing, thread_sensitive=False)()


def sse_message(frame: dict[str, Any]) -> str:
    """One frame as an SSE message (`id:` only for stored events)."""
    return _message(frame["id"], frame["type"], json.dumps(frame))


def _message(event_id: int | None, event_type: str, data: str) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    # A type is a plain name ("message.appended"); a line break would end the field early.
    kind = event_type.replace("\n", " ").replace("\r", " ")
    return f"{head}event: {kind}\ndata: {data}\n\n"


class StreamFeed:
    """The frames of one stream for one client, from the relay and the channel layer."""

    def __init__(
        self,
        *,
        stream: str,
        user_pk: Any,
        final_events: frozenset[str],
        shape: TransientShape | None = None,
    ) -> None:
        self.stream = stream
        self.shape = shape
        self.user_stream = user_stream(user_pk)
        self.groups = [stream_group(stream), user_group(user_pk)]
        self.final_events = final_events
        self.queue: asyncio.Queue = asyncio.Queue()
        self.overflowed = False
        self.user_pk = user_pk
        self._relay = None
        self._hub: hub.Hub | None = None
        self._counted = False

    async def open(self) -> None:
        """Count the stream against its user's cap (`TooManyStreams`), then register with
        the relay and the process's hub (before the replay is read)."""
        open_streams.take(self.user_pk)
        self._counted = True
        self._relay = await ensure_relay_started()
        self._relay.watch(self.stream, self)
        self._relay.watch(self.user_stream, self)
        self._hub = hub.hub()
        if self._hub is not None:
            await self._hub.join(self.groups, self)

    def _put(self, item: Any) -> None:
        if self.overflowed:
            return
        if self.queue.qsize() >= MAX_BUFFERED:
            # The client stopped reading: end its stream; its reconnection replays from the log.
            self.overflowed = True
            self.queue.put_nowait(_END)
            return
        self.queue.put_nowait(item)

    async def deliver_stored(self, frame: StoredFrame) -> None:
        """A stored event from this process's relay (called on the relay's task)."""
        if frame.type == SIGNED_OUT:
            self._put(("signed_out", None))
            return
        self._put(("stored", frame))

    async def layer_message(self, message: dict) -> None:
        """A transient frame or a sign-out, from the process's hub."""
        kind = message.get("type")
        if kind == "live.transient":
            event_type, payload = message["event"], message["payload"]
            if self.shape is not None:
                payload = self.shape(event_type, payload)
            self._put(("transient", {"id": None, "type": event_type, "payload": payload}))
        elif kind == "user.signed_out":
            self._put(("signed_out", None))

    _closed = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._relay is not None:
            self._relay.unwatch(self.stream, self)
            self._relay.unwatch(self.user_stream, self)
        if self._hub is not None:
            self._hub.leave(self.groups, self)
        if self._counted:
            self._counted = False
            open_streams.give_back(self.user_pk)

    async def messages(self, last_event_id: int | None) -> AsyncIterator[str]:
        """The SSE body: the replay after `last_event_id`, then live frames and heartbeats."""
        heartbeat = settings.GLOVE_SSE_HEARTBEAT_SECONDS
        try:
            yield f"retry: {RECONNECT_MILLISECONDS}\n\n"
            replay = await run_db(replay_after, self.stream, last_event_id)
            replayed: set[int] = set()
            for frame in replay.frames:
                replayed.add(frame["id"])
                yield sse_message(frame)
                if frame["type"] in self.final_events:
                    return
            if replay.resync is not None:
                yield sse_message(replay.resync)
            while True:
                try:
                    item = await asyncio.wait_for(self.queue.get(), heartbeat)
                except TimeoutError:
                    yield ": heartbeat\n\n"
                    continue
                if item is _END:
                    return
                kind, frame = item
                if kind == "signed_out":
                    yield ": signed_out\n\n"
                    return
                if kind == "transient":
                    yield sse_message(frame)
                    continue
                # The relay may hand over an event the replay already sent (it reads rows in
                # batches), or one the client had before it reconnected (this process's relay
                # polls, and may not have reached the client's cursor yet): each id goes out
                # once.
                if frame.id in replayed:
                    replayed.discard(frame.id)
                    continue
                if last_event_id is not None and frame.id <= last_event_id:
                    continue
                yield _message(frame.id, frame.type, frame.text)
                if frame.type in self.final_events:
                    return
        finally:
            self.close()


async def open_feed(
    *,
    stream: str,
    user_pk: Any,
    final_events: frozenset[str] = frozenset(),
    shape: TransientShape | None = None,
) -> StreamFeed:
    """A feed registered with the relay and the channel layer; raises when the relay cannot
    start (the database is away): the edge answers that with a 503; `open_streams.
    TooManyStreams` when the user holds as many streams as the cap: a 429. `shape(type, payload)`
    cuts what this watcher may read of a transient frame (as `StreamConsumer.
    shape_transient`)."""
    feed = StreamFeed(stream=stream, user_pk=user_pk, final_events=final_events, shape=shape)
    try:
        await feed.open()
    except BaseException:
        feed.close()
        raise
    return feed


SSE_HEADERS = (
    ("Content-Type", "text/event-stream"),
    ("Cache-Control", "no-cache"),
    # nginx buffers a proxied response unless told not to.
    ("X-Accel-Buffering", "no"),
)


def sse_response(feed: StreamFeed, last_event_id: int | None) -> StreamingHttpResponse:
    """The feed as Django's streaming response (a project that mounts the API itself)."""
    response = StreamingHttpResponse(feed.messages(last_event_id))
    for name, value in SSE_HEADERS:
        response[name] = value
    return response


async def send_sse(feed: StreamFeed, last_event_id: int | None, receive: Any, send: Any) -> None:
    """The feed straight onto an ASGI connection: no Django request around it, so no thread
    is kept for the stream (Django's ASGI handler parks one per request until it ends).
    Ends when the client goes (`http.disconnect`) or the feed ends."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(name.lower().encode(), value.encode()) for name, value in SSE_HEADERS],
        }
    )

    async def pump() -> None:
        async for text in feed.messages(last_event_id):
            await send({"type": "http.response.body", "body": text.encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def client_left() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    pumping = asyncio.ensure_future(pump())
    watching = asyncio.ensure_future(client_left())
    try:
        await asyncio.wait({pumping, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (pumping, watching):
            task.cancel()
        for task in (pumping, watching):
            with contextlib.suppress(BaseException):
                await task
        feed.close()
