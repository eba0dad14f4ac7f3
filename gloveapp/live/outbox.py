"""The writer's side of the event log: ordering and wake-ups around `record_event`.

Imported by `events.py` in every process that writes (the server, management commands,
webhook workers), so it stays light: Django and, only when configured, a Redis client.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import connections, transaction

logger = logging.getLogger(__name__)

# At most one PUBLISH per this many seconds: the commits of a busy process share one.
COALESCE_SECONDS = 0.005
_local_waker: Callable[[], None] | None = None
_redis_clients: dict[str, object] = {}
_redis_lock = threading.Lock()


def before_event_insert(stream: str, *, using: str | None = None) -> None:
    """Call inside the change's transaction, right before inserting the stream's LiveEvent.

    On PostgreSQL, ids come from a sequence when the row is inserted but become visible at
    commit, so two writers on one stream could commit out of id order; a client that resumed
    from the larger id would then skip the smaller one forever. A per-stream lock held until
    commit makes each stream's ids commit in order. (SQLite serialises all writers anyway.)
    Then, once the transaction commits, the relays are woken. (On PostgreSQL without Redis
    the wake-up is the NOTIFY that `record_events` issues inside the transaction.)
    """
    before_events_insert([stream], using=using)


def before_events_insert(streams: list[str], *, using: str | None = None) -> None:
    """`before_event_insert` for the events of several streams written together (a chat's
    change announced on its stream and on its console's): their locks in one statement,
    taken in the order the streams are named (PostgreSQL evaluates a select list left to
    right), which is the order every writer of those streams takes them in."""
    connection = transaction.get_connection(using)
    if connection.vendor == "postgresql" and streams:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT " + ", ".join(["pg_advisory_xact_lock(%s)"] * len(streams)),
                [stream_lock_key(stream) for stream in streams],
            )
    transaction.on_commit(notify_committed, using=using, robust=True)


def stream_lock_key(stream: str) -> int:
    """A signed 64-bit advisory-lock key for a stream."""
    digest = hashlib.sha256(b"glove_live:" + stream.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def notify_committed() -> None:
    """Wake the relays after a commit that added events (run it from `transaction.on_commit`).

    Best effort by design: a relay that misses a wake-up still finds the rows on its next
    poll, so a failure here is logged and never raised into the committed change.
    """
    waker = _local_waker
    if waker is not None:
        waker()
    if settings.REDIS_URL:
        _publisher.request(settings.REDIS_URL, redis_wake_channel())


class _WakePublisher:
    """Sends the relays' Redis wake-up from one daemon thread per process.

    A commit only raises a flag, so it never waits on Redis (a frozen Redis slows the
    wake-up, not the change), and the commits that land while one PUBLISH is on the wire
    share the next one instead of paying a round trip each (profiled: ~9% of a busy turn
    worker's samples were these PUBLISHes).
    """

    def __init__(self) -> None:
        self._wanted = threading.Event()
        self._target: tuple[str, str] | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._failing = False

    def request(self, url: str, channel: str) -> None:
        self._target = (url, channel)
        if self._wanted.is_set():
            # A wake-up is already due: this commit shares it (no lock, no thread switch).
            return
        self._wanted.set()
        if self._thread is None or not self._thread.is_alive():
            with self._start_lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(
                        target=self._run, name="glove-live:wake", daemon=True
                    )
                    self._thread.start()
                    # A short-lived process (a management command, a cron job) may exit
                    # right after its commit, before the thread had its turn.
                    atexit.register(self._publish)

    def _run(self) -> None:
        last = 0.0
        while True:
            self._wanted.wait()
            # A busy worker commits every millisecond or two, and each wake-up is a round
            # trip plus a thread switch: the commits made within COALESCE_SECONDS of the
            # last PUBLISH share the next one. A quiet process publishes at once (waiting
            # first put those milliseconds into every live update's latency).
            pause = last + COALESCE_SECONDS - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            self._wanted.clear()
            self._publish()
            last = time.monotonic()

    def _publish(self) -> None:
        target = self._target
        if target is None:
            return
        url, channel = target
        try:
            _redis_client(url).publish(channel, b"1")
        except Exception as error:
            if not self._failing:  # once per outage, not once per commit
                self._failing = True
                logger.warning(
                    "live: could not wake the relays through Redis (%s: %s); they poll",
                    type(error).__name__,
                    error,
                )
            return
        if self._failing:
            self._failing = False
            logger.warning("live: waking the relays through Redis again")


_publisher = _WakePublisher()


def redis_wake_channel() -> str:
    """The Redis pub/sub channel for this database's relays.

    Pub/sub ignores Redis database numbers, so the name carries the database's identity:
    projects (or test runs) sharing one Redis server do not wake each other.
    """
    db = connections["default"].settings_dict
    identity = f"{db['ENGINE']}|{db.get('HOST', '')}|{db.get('PORT', '')}|{db['NAME']}"
    return "glove_live." + hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]


def set_local_waker(waker: Callable[[], None] | None) -> None:
    """The relay of this process registers itself so commits here wake it without a round trip."""
    global _local_waker
    _local_waker = waker


def _redis_client(url: str):  # -> redis.Redis
    with _redis_lock:
        client = _redis_clients.get(url)
        if client is None:
            import redis

            # Short timeouts: a dead Redis must not hold the wake-up thread for long.
            client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
            _redis_clients[url] = client
        return client
