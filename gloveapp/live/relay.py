"""The relay: one background task per server process that tails the event log.

It reads LiveEvent rows with ids (the table's key, kept internal: clients see each
event's number in its stream) above the highest it has seen and hands each straight to
this process's consumers of its stream (`watch` / `unwatch`), not through the channel
layer: profiling 1,000 sockets showed a channel-layer message per socket per event costs
far more than the send itself (channels_redis's per-channel receive machinery, and
Channels' `close_old_connections` thread hop before every handler). Each process's relay
delivers only to its own sockets, so with several processes sharing Redis every socket
still gets each event exactly once. It polls every
GLOVE_LIVE_POLL_SECONDS and wakes at once when a commit announces new rows: directly in
this process, through Redis pub/sub when REDIS_URL is set, or through PostgreSQL
LISTEN/NOTIFY otherwise. Rows are only ever seen once committed, so nothing rolled back is
announced.

Ids are allocated before commit, so a row with a smaller id can become visible after a
larger one (two transactions on different streams). The relay remembers the ids it jumped
over ("holes") for GLOVE_LIVE_GAP_SECONDS and keeps asking for them, so a late commit is
still relayed.

A socket that fails to take an event is logged in one line and left behind (its page
recovers on reload), so one broken socket or odd payload cannot stop every later event in
the process; a socket that does not take an event within DELIVERY_TIMEOUT_SECONDS is
dropped (it would hold up every other socket of the process).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import dj_database_url
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.db.models import Max, Q

from gloveapp.lib.db.outages import Backoff, close_broken_connections
from gloveapp.live import outbox
from gloveapp.live.eventlog import LIVE_EVENTS_CHANNEL
from gloveapp.live.models import LiveEvent
from gloveapp.observe import metrics

logger = logging.getLogger(__name__)

BATCH_SIZE = 500
# Ids skipped in one jump beyond this many are not tracked: such jumps come from deleted
# rows or a restarted sequence, not from transactions still in flight.
MAX_NEW_HOLES = 1000
# At start, ids missing among the newest ones may belong to transactions still in flight.
STARTUP_LOOKBEHIND = 200
MAX_BACKOFF_SECONDS = 5.0
READY_TIMEOUT_SECONDS = 10.0
DELIVERY_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class StoredFrame:
    """One stored event as every socket receives it, encoded once for all of them. `id` is
    the frame's: the event's number in its stream (`LiveEvent.seq`), not the table's key."""

    id: int
    type: str
    text: str  # the JSON frame: {"id", "type", "payload"}


@dataclass(frozen=True)
class Row:
    id: int  # the table's key: the relay's own cursor, never sent
    stream: str
    seq: int
    type: str
    payload: dict


class Relay:
    """Tails the event log for one event loop. Use `ensure_relay_started` / `stop_relay`."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.high_water = 0
        self.holes: dict[int, float] = {}  # id -> when it was first noticed missing
        # stream -> this process's consumers of it (objects with `deliver_stored(StoredFrame)`).
        self.watchers: dict[str, set] = {}
        self._wake = asyncio.Event()
        self._ready = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._stopped = False
        # One thread with its own long-lived database connection: polling through the
        # shared sync thread would queue behind requests and reconnect on every poll.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="glove-live-relay")

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._tasks.append(self.loop.create_task(self._run(), name="glove-live-relay"))
        listener = self._listener()
        if listener is not None:
            self._tasks.append(self.loop.create_task(listener, name="glove-live-listener"))
        outbox.set_local_waker(self.wake_threadsafe)

    def usable(self) -> bool:
        return not self._stopped and not self.loop.is_closed() and self.loop.is_running()

    async def wait_ready(self) -> None:
        # Bounded: a consumer should fail, not hang, when the database is unreachable.
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            await self._ready.wait()

    async def stop(self) -> None:
        self._stopped = True
        if outbox._local_waker == self.wake_threadsafe:
            outbox.set_local_waker(None)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await self._db(connections.close_all)
        self._executor.shutdown(wait=False)

    def abandon(self) -> None:
        """Drop a relay whose event loop is gone (it cannot be awaited any more)."""
        self._stopped = True
        with contextlib.suppress(Exception):
            self._executor.submit(connections.close_all)
        self._executor.shutdown(wait=False)

    def watch(self, stream: str, consumer) -> None:
        self.watchers.setdefault(stream, set()).add(consumer)

    def unwatch(self, stream: str, consumer) -> None:
        consumers = self.watchers.get(stream)
        if consumers is not None:
            consumers.discard(consumer)
            if not consumers:
                del self.watchers[stream]

    def wake(self) -> None:
        self._wake.set()

    def wake_threadsafe(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self.loop.call_soon_threadsafe(self._wake.set)

    # -- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = Backoff("live relay", log=logger)
        while True:
            self._wake.clear()
            try:
                if not self._ready.is_set():
                    await self._start_from_newest()
                    self._ready.set()
                await self._pump()
                backoff.succeeded()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                with contextlib.suppress(Exception):
                    await self._db(close_broken_connections)  # a new connection next time
                await asyncio.sleep(backoff.failed(error))
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), settings.GLOVE_LIVE_POLL_SECONDS)

    async def _start_from_newest(self) -> None:
        # Clients catch up on older events by replaying from the database; the relay only
        # announces what commits from now on.
        newest, present = await self._db(_newest_ids)
        self.high_water = newest
        now = time.monotonic()
        for missing in range(max(1, newest - STARTUP_LOOKBEHIND + 1), newest + 1):
            if missing not in present:
                self.holes[missing] = now

    async def _pump(self) -> None:
        while True:
            self._forget_old_holes()
            rows = await self._db(_rows_after, self.high_water, list(self.holes), BATCH_SIZE)
            for row in rows:
                await self._deliver(row)
                self._mark_relayed(row.id)
            if len(rows) < BATCH_SIZE:
                return

    async def _deliver(self, row: Row) -> None:
        """Hand one row to each of this process's consumers of its stream, in turn.

        Awaiting each delivery before the next row keeps every socket's events in id
        order. A failure is that socket's alone: it is logged, never retried (the others
        already have the event) and never raised (the row must not be read again)."""
        # Encoded here, once: profiling 1,000 sockets showed json.dumps per socket per event.
        frame = StoredFrame(
            row.seq, row.type, json.dumps({"id": row.seq, "type": row.type, "payload": row.payload})
        )
        # A snapshot: consumers come and go while deliveries await.
        for consumer in list(self.watchers.get(row.stream, ())):
            try:
                # Bounded: a socket that cannot take a frame (a closing handshake the server
                # waits out, a client that stopped reading) must not hold up every other
                # socket of the process.
                async with asyncio.timeout(DELIVERY_TIMEOUT_SECONDS):
                    await consumer.deliver_stored(frame)
            except asyncio.CancelledError:
                raise
            except TimeoutError:
                # Stuck (a closing handshake, a client that stopped reading): dropped, so it
                # holds up no later event; its page reconnects and replays.
                self.unwatch(row.stream, consumer)
                logger.warning(
                    "live relay: could not deliver event %d to a socket of %s in %s s; dropped it",
                    row.seq,
                    row.stream,
                    DELIVERY_TIMEOUT_SECONDS,
                )
            except Exception as error:
                if _socket_closed(error):
                    # The client closed it (normally or not) between our snapshot and this
                    # send: not news. Unwatched here too, so no later event tries it again.
                    self.unwatch(row.stream, consumer)
                    logger.debug("live relay: a socket of %s closed: %r", row.stream, error)
                    continue
                # One line, no traceback: sockets that closed meanwhile are unwatched by
                # their consumer, and a burst of these must not flood the log.
                logger.warning(
                    "live relay: could not deliver event %d (%s on %s) to a socket: %s: %s",
                    row.seq,
                    row.type,
                    row.stream,
                    type(error).__name__,
                    error,
                )

    def _mark_relayed(self, event_id: int) -> None:
        if self.holes.pop(event_id, None) is not None or event_id <= self.high_water:
            return
        now = time.monotonic()
        for missing in range(max(self.high_water + 1, event_id - MAX_NEW_HOLES), event_id):
            self.holes[missing] = now
        self.high_water = event_id

    def _forget_old_holes(self) -> None:
        # A hole older than the window was a rolled-back transaction (or one slower than
        # any service should be); its event, if it ever commits, is found by replay.
        horizon = time.monotonic() - settings.GLOVE_LIVE_GAP_SECONDS
        for hole in [hole for hole, seen in self.holes.items() if seen < horizon]:
            del self.holes[hole]

    async def _db(self, func, *args):
        return await sync_to_async(func, thread_sensitive=False, executor=self._executor)(*args)

    # -- wake-ups from other processes ---------------------------------------------------

    def _listener(self):
        if settings.REDIS_URL:
            return self._listen_redis(settings.REDIS_URL, outbox.redis_wake_channel())
        if connections["default"].vendor == "postgresql":
            return self._listen_postgres(listen_params())
        return None

    async def _listen_redis(self, url: str, channel: str) -> None:
        import redis.asyncio as aioredis

        failures = 0
        while True:
            # Pings keep a silent subscription honest: a dead connection is noticed and
            # replaced instead of waiting forever.
            client = aioredis.from_url(url, health_check_interval=30)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(channel)
                    if failures:
                        metrics.redis_reconnected("live_relay")
                    failures = 0
                    self.wake()  # catch up on whatever was announced while unsubscribed
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            self.wake()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                failures += 1
                if failures == 1:  # once per outage: the relay polls meanwhile
                    logger.warning(
                        "live relay: Redis wake-up channel lost (%s: %s); polling every %s s",
                        type(error).__name__,
                        error,
                        settings.GLOVE_LIVE_POLL_SECONDS,
                    )
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()
            await asyncio.sleep(min(MAX_BACKOFF_SECONDS, 0.2 * 2**failures))

    async def _listen_postgres(self, params: dict) -> None:
        await listen_postgres(
            LIVE_EVENTS_CHANNEL,
            params=params,
            on_connect=self.wake,
            on_notify=lambda payload: self.wake(),
            label="live relay",
        )


async def listen_postgres(
    channel: str,
    *,
    params: dict,
    on_connect: Callable[[], None],
    on_notify: Callable[[str], None],
    on_lost: Callable[[], None] | None = None,
    label: str,
) -> None:
    """LISTEN on `channel` on a PostgreSQL connection of its own until cancelled, connecting
    again (with backoff) when it is lost. `on_connect` runs after each (re)connection, to
    catch up on what was notified meanwhile; `on_notify(payload)` for each notification."""
    import psycopg

    backoff = Backoff(f"{label} (LISTEN)", log=logger)
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(**params, autocommit=True)
            async with conn:
                await conn.execute(f"LISTEN {channel}")
                backoff.succeeded()
                on_connect()
                async for notify in conn.notifies():
                    on_notify(notify.payload)
            error: BaseException = psycopg.OperationalError("the LISTEN connection ended")
        except asyncio.CancelledError:
            raise
        except Exception as lost:
            error = lost
        finally:
            if on_lost is not None:
                on_lost()
        # Meanwhile the caller polls.
        await asyncio.sleep(backoff.failed(error))


# -- database helpers (run on the relay's thread) ---------------------------------------


def _newest_ids() -> tuple[int, set[int]]:
    newest = LiveEvent.objects.aggregate(newest=Max("id"))["newest"] or 0
    present = set(
        LiveEvent.objects.filter(id__gt=newest - STARTUP_LOOKBEHIND).values_list("id", flat=True)
    )
    return newest, present


def _rows_after(high_water: int, holes: list[int], limit: int) -> list[Row]:
    wanted = Q(id__gt=high_water)
    if holes:
        wanted |= Q(id__in=holes)
    rows = (
        LiveEvent.objects.filter(wanted)
        .order_by("id")
        .values_list("id", "stream", "seq", "type", "payload")
    )
    return [Row(*row) for row in rows[:limit]]


def listen_params() -> dict:
    params = connections["default"].get_connection_params()
    # Django's sync cursor class and adapter context do not belong on an async connection.
    params.pop("cursor_factory", None)
    params.pop("context", None)
    direct_url = getattr(settings, "DATABASE_DIRECT_URL", "")
    if direct_url:
        # Behind a transaction pooler: a LISTEN needs a session of its own on the server.
        direct = dj_database_url.parse(direct_url)
        for key, value in (
            ("host", direct.get("HOST")),
            ("port", direct.get("PORT")),
            ("dbname", direct.get("NAME")),
            ("user", direct.get("USER")),
            ("password", direct.get("PASSWORD")),
        ):
            if value:
                params[key] = value
            else:
                params.pop(key, None)
    return params


# -- one relay per process (per running event loop) -------------------------------------

_relay: Relay | None = None


async def ensure_relay_started() -> Relay:
    """Start this process's relay on first use and wait until it knows where to start.

    Consumers call this before reading their replay, so every event that commits after
    the replay's read is relayed to them.
    """
    global _relay
    relay = _relay
    if relay is None or not relay.usable() or relay.loop is not asyncio.get_running_loop():
        if relay is not None:
            relay.abandon()
        # No await between the check and the assignment: concurrent first connections
        # share one relay.
        relay = _relay = Relay()
        relay.start()
    await relay.wait_ready()
    return relay


async def stop_relay() -> None:
    """Stop this process's relay (tests; a server stops with its process)."""
    global _relay
    relay, _relay = _relay, None
    if relay is None:
        return
    if relay.loop is asyncio.get_running_loop():
        await relay.stop()
    else:
        relay.abandon()


# What the servers raise for a send on a socket its client closed: Daphne/Channels and
# uvicorn (ClientDisconnected, websockets' ConnectionClosed*), and ASGI's "after sending
# 'websocket.close'" / "after ... 'websocket.disconnect'" RuntimeErrors.
_CLOSED_NAMES = ("ClientDisconnected", "ConnectionClosed", "ConnectionClosedOK", "Disconnected")


def _socket_closed(error: BaseException) -> bool:
    if any(type(error).__name__.startswith(name) for name in _CLOSED_NAMES):
        return True
    text = str(error)
    return isinstance(error, RuntimeError | OSError) and (
        "websocket.close" in text or "websocket.disconnect" in text or "closed" in text.lower()
    )
