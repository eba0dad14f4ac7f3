"""The Redis channel layer, made to ride out Redis being away (killed, restarting, frozen).

Only transient events (text deltas, tool progress, turn start/finish) and sign-out closes go
through the channel layer; stored events reach sockets from the event log through each
process's relay, which needs no Redis. So when Redis is away the layer degrades instead of
failing the caller:

- `group_add` / `group_discard` never raise: memberships of this process's sockets are
  remembered here, written to Redis when it answers, and written again when it returns
  (a restarted Redis without persistence has forgotten every group). A websocket handshake
  therefore never fails, nor waits more than `COMMAND_TIMEOUT`, because of Redis.
- `send` / `group_send` give up after `COMMAND_TIMEOUT` and drop the message (it is
  transient by definition); `ChannelFull` still raises.
- `receive` waits Redis out (backoff up to `MAX_BACKOFF`) instead of raising, so a socket's
  consumer is not torn down.

One warning when Redis goes away and one when it is back; not a traceback per call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels_redis.core import RedisChannelLayer
from channels_redis.utils import create_pool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

COMMAND_TIMEOUT = 2.0
MAX_BACKOFF = 2.0
# What "Redis is away" looks like: refused or reset connections, timeouts (a frozen Redis),
# and error replies such as LOADING or READONLY while it restarts or fails over.
AWAY = (RedisError, OSError)


class ResilientRedisChannelLayer(RedisChannelLayer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # (group, channel) for this process's channels: what to write again when Redis returns.
        self._memberships: set[tuple[str, str]] = set()
        self._away_since: float | None = None
        self._receive_failures = 0
        self._restoring: asyncio.Task | None = None

    def create_pool(self, index: int) -> Any:
        # One immediate retry (a pooled connection from before a restart fails once), no
        # more: redis-py's default backoff would hold a command for seconds while Redis is
        # away; this layer does its own waiting.
        host = {"retry": Retry(NoBackoff(), 1), "socket_connect_timeout": COMMAND_TIMEOUT}
        return create_pool({**host, **self.hosts[index]})

    # -- health ---------------------------------------------------------------------------
    @property
    def redis_away(self) -> bool:
        return self._away_since is not None

    def _went_away(self, error: BaseException) -> None:
        if self._away_since is None:
            self._away_since = time.monotonic()
            logger.warning(
                "live: the channel layer's Redis is away (%s: %s); sockets get stored events "
                "from the event log, transient ones are dropped until it is back",
                type(error).__name__,
                error,
            )

    def _answered(self) -> None:
        if self._away_since is None:
            return
        away_for = time.monotonic() - self._away_since
        self._away_since = None
        logger.warning("live: the channel layer's Redis is back after %.1f s", away_for)
        if self._memberships and (self._restoring is None or self._restoring.done()):
            self._restoring = asyncio.ensure_future(self._restore_memberships())

    async def _restore_memberships(self) -> None:
        for group, channel in list(self._memberships):
            if (group, channel) not in self._memberships:
                continue  # discarded meanwhile
            try:
                async with asyncio.timeout(COMMAND_TIMEOUT):
                    await super().group_add(group, channel)
            except AWAY as error:
                self._went_away(error)  # the next answer restores again
                return

    # -- groups ---------------------------------------------------------------------------
    async def group_add(self, group: str, channel: str) -> None:
        self._memberships.add((group, channel))
        if self.redis_away:
            return  # written when Redis answers again (`_answered`)
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT):
                await super().group_add(group, channel)
        except AWAY as error:
            self._went_away(error)

    async def group_discard(self, group: str, channel: str) -> None:
        self._memberships.discard((group, channel))
        if self.redis_away:
            return  # a stale membership only costs a message that expires unread
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT):
                await super().group_discard(group, channel)
        except AWAY as error:
            self._went_away(error)

    # -- sending (transient: dropped while Redis is away) ----------------------------------
    async def send(self, channel: str, message: dict) -> None:
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT):
                await super().send(channel, message)
        except AWAY as error:
            self._went_away(error)
            return
        self._answered()

    async def group_send(self, group: str, message: dict) -> None:
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT):
                await super().group_send(group, message)
        except AWAY as error:
            self._went_away(error)
            return
        self._answered()

    # -- receiving ------------------------------------------------------------------------
    async def _brpop_with_clean(self, index: int, channel: str, timeout: int) -> Any:  # noqa: ASYNC109
        # `receive_single` calls this until it returns a message; None means "try again".
        try:
            member = await super()._brpop_with_clean(index, channel, timeout)
        except AWAY as error:
            self._went_away(error)
            self._receive_failures += 1
            await asyncio.sleep(min(MAX_BACKOFF, 0.1 * 2**self._receive_failures))
            return None
        self._receive_failures = 0
        self._answered()
        return member

    async def _clean_receive_backup(self, index: int, channel: str) -> None:
        try:
            await super()._clean_receive_backup(index, channel)
        except AWAY as error:  # a detached task: nobody would see it fail
            self._went_away(error)
