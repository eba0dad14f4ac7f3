"""How many event streams (SSE feeds, websockets) each user holds open, across the processes.

Past GLOVE_MAX_OPEN_STREAMS_PER_USER a new one is refused (a 429 with `Retry-After` for an
SSE request, close code 4429 with `retry_after=<seconds>` for a websocket): one customer's
streams cannot take the sockets, threads and channel-layer traffic from others. 0 turns the
cap off.

With REDIS_URL set the count is shared by every process: each open stream holds a lease in
the user's sorted set (scored by when it expires), taken and counted in one script; a
process renews its leases every LEASE_SECONDS / 3, so a killed process's streams stop
counting within LEASE_SECONDS. Without Redis, or while it is away, each process counts its
own (a user then holds at most the cap per process): a stream is never refused because the
count could not be read.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

# When a refused client may try again: a stream of theirs may have closed by then.
RETRY_AFTER_SECONDS = 5
# How long a lease outlives its process's last renewal.
LEASE_SECONDS = 60
# While Redis is away, how long a process counts alone before it asks Redis again.
AWAY_RETRY_SECONDS = 5
KEY_PREFIX = "glove:open-streams:"

# KEYS[1] the user's set; ARGV: now, the lease's expiry, the cap, the lease. Returns the
# streams held when refused, else -1 (taken).
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local held = redis.call('ZCARD', KEYS[1])
if tonumber(ARGV[3]) > 0 and held >= tonumber(ARGV[3]) then return held end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) - tonumber(ARGV[1])) + 1)
return -1
"""


class TooManyStreams(Exception):
    """The user holds as many open streams as the cap allows."""


class OpenStreams:
    """One process's count of its users' open streams, and its leases in Redis."""

    def __init__(self, redis_url: str = "", namespace: str = "") -> None:
        self.redis_url = redis_url
        # Deployments sharing a Redis keep apart: user ids are their database's.
        self.namespace = namespace
        self.process = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._open: dict[Any, int] = {}
        # The leases this process holds in Redis, per user (renewed, given back).
        self._leases: dict[Any, list[str]] = {}
        self._serial = 0
        self._client: Any = None
        self._take_script: Any = None
        self._renewer: threading.Thread | None = None
        self._stopped = threading.Event()
        self._away = False
        self._retry_at = 0.0

    def take(self, user_pk: Any, cap: int) -> None:
        """Count one more open stream of `user_pk`, or raise `TooManyStreams`."""
        with self._lock:
            local = self._open.get(user_pk, 0)
            lease = None
            if self.redis_url:
                self._serial += 1
                lease = f"{self.process}:{self._serial}"
                held = self._lease(user_pk, lease, cap)
                if held is None:  # Redis is away: this process's own count decides
                    lease = None
                elif held >= 0:
                    raise TooManyStreams(self._refusal(held, cap))
            if lease is None and cap and local >= cap:
                raise TooManyStreams(self._refusal(local, cap))
            self._open[user_pk] = local + 1
            if lease is not None:
                self._leases.setdefault(user_pk, []).append(lease)
        if lease is not None:
            self._ensure_renewer()

    def give_back(self, user_pk: Any) -> None:
        with self._lock:
            held = self._open.get(user_pk, 0) - 1
            if held > 0:
                self._open[user_pk] = held
            else:
                self._open.pop(user_pk, None)
            leases = self._leases.get(user_pk)
            lease = leases.pop() if leases else None
            if leases == []:
                self._leases.pop(user_pk, None)
        if lease is not None:
            try:
                self._redis().zrem(self._key(user_pk), lease)
            except Exception as error:  # expires with its lease
                self._went_away(error)

    def held(self, user_pk: Any) -> int:
        return self._open.get(user_pk, 0)

    def renew(self) -> None:
        """Push back the expiry of every lease this process holds."""
        with self._lock:
            leases = {user: list(held) for user, held in self._leases.items() if held}
        if not leases:
            return
        expiry = time.time() + LEASE_SECONDS
        try:
            pipe = self._redis().pipeline(transaction=False)
            for user, held in leases.items():
                key = self._key(user)
                pipe.zadd(key, dict.fromkeys(held, expiry))
                pipe.expire(key, LEASE_SECONDS + 1)
            pipe.execute()
            self._back()
        except Exception as error:
            self._went_away(error)

    def _lease(self, user_pk: Any, lease: str, cap: int) -> int | None:
        now = time.time()
        if self._away and time.monotonic() < self._retry_at:
            return None
        try:
            if self._take_script is None:
                self._take_script = self._redis().register_script(_TAKE)
            held = self._take_script(
                keys=[self._key(user_pk)], args=[now, now + LEASE_SECONDS, cap, lease]
            )
        except Exception as error:
            self._went_away(error)
            return None
        self._back()
        return int(held)

    def _key(self, user_pk: Any) -> str:
        return f"{KEY_PREFIX}{self.namespace}:{user_pk}"

    def _redis(self) -> Any:
        if self._client is None:
            import redis

            # Short timeouts: a stream's opening must not wait long on a Redis that is away.
            self._client = redis.Redis.from_url(
                self.redis_url, socket_timeout=0.5, socket_connect_timeout=0.5
            )
        return self._client

    def _ensure_renewer(self) -> None:
        if self._renewer is not None and self._renewer.is_alive():
            return
        self._renewer = threading.Thread(
            target=self._renew_forever, name="open-streams-renewer", daemon=True
        )
        self._renewer.start()

    def _renew_forever(self) -> None:
        while not self._stopped.wait(LEASE_SECONDS / 3):
            self.renew()

    def stop_renewing(self) -> None:
        """Leave the leases to expire (this count is being replaced; a test's dying process)."""
        self._stopped.set()

    def _went_away(self, error: BaseException) -> None:
        self._retry_at = time.monotonic() + AWAY_RETRY_SECONDS
        if not self._away:  # once per outage
            self._away = True
            logger.warning(
                "live: could not count open streams in Redis (%s: %s); each process counts "
                "its own until it is back",
                type(error).__name__,
                error,
            )

    def _back(self) -> None:
        if self._away:
            self._away = False
            logger.info("live: open streams are counted in Redis again")

    @staticmethod
    def _refusal(held: int, cap: int) -> str:
        return f"{held} event streams are open; at most {cap} at a time."


_counts: OpenStreams | None = None
_counts_lock = threading.Lock()


def counts() -> OpenStreams:
    """This process's count, on the Redis that REDIS_URL names (made again if it changed)."""
    global _counts
    url = settings.REDIS_URL or ""
    with _counts_lock:
        if _counts is None or _counts.redis_url != url:
            if _counts is not None:
                _counts.stop_renewing()
            database = str(settings.DATABASES["default"].get("NAME") or "")
            namespace = hashlib.sha256(database.encode()).hexdigest()[:12]
            _counts = OpenStreams(url, namespace)
        return _counts


def take(user_pk: Any) -> None:
    """Count one more open stream of `user_pk`, or raise `TooManyStreams`."""
    counts().take(user_pk, settings.GLOVE_MAX_OPEN_STREAMS_PER_USER)


def give_back(user_pk: Any) -> None:
    counts().give_back(user_pk)


def held(user_pk: Any) -> int:
    return counts().held(user_pk)
