"""The channel layer's side of this process's open streams: one membership per group, however
many streams watch it.

Transient events (streamed text, tool progress, turn start/finish) and sign-out closes come
through the channel layer's groups. Each open stream (an SSE feed, a websocket) used to
join its groups with a channel of its own, so every open stream added two group members in
Redis, two commands on open and two on close, and one copy of every message per stream:
500 to 1,100 streams of one customer took the layer's Redis connections from every other
socket of the process (transient frames dropped for everyone, 5 to 14 s at a time).

Here a process joins each group once, with one channel of its own per event loop (`Hub`),
and hands what arrives to its local watchers of that group: Redis use grows with the groups
watched in a process, not with its open streams. Messages name their group (`"group"`, as
`live.transient` and `signout` send them), since a channel cannot tell which group a message
came through.

A membership is written again every GROUP_REFRESH_SECONDS while watched (channels_redis
forgets a member after its group expiry, a day by default), and left in the background when
the last watcher goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Protocol

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

DELIVERY_TIMEOUT_SECONDS = 2.0
GROUP_LEAVE_TIMEOUT_SECONDS = 2.0
GROUP_REFRESH_SECONDS = 3600.0


class Watcher(Protocol):
    async def layer_message(self, message: dict) -> None: ...


class Hub:
    """This event loop's memberships and the one channel they deliver to."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.loop = asyncio.get_running_loop()
        self.channel: str | None = None
        self.members: dict[str, set[Watcher]] = {}
        self._leaving: dict[str, asyncio.Task] = {}
        self._reader: asyncio.Task | None = None
        self._refreshed = time.monotonic()
        self._channel_lock = asyncio.Lock()

    def usable(self) -> bool:
        return not self.loop.is_closed() and self.loop.is_running()

    async def join(self, groups: list[str], watcher: Watcher) -> None:
        for group in groups:
            watchers = self.members.setdefault(group, set())
            first = not watchers
            watchers.add(watcher)
            if first:
                leaving = self._leaving.pop(group, None)
                if leaving is not None:  # its discard must not land after this add
                    with contextlib.suppress(BaseException):
                        await leaving
                await self._ensure_channel()
                assert self.channel is not None
                await self.layer.group_add(group, self.channel)

    def leave(self, groups: list[str], watcher: Watcher) -> None:
        for group in groups:
            watchers = self.members.get(group)
            if watchers is None:
                continue
            watchers.discard(watcher)
            if not watchers and self.channel is not None:
                del self.members[group]
                task = asyncio.ensure_future(self._discard(group, self.channel))
                self._leaving[group] = task
                task.add_done_callback(lambda _, g=group, t=task: self._forget_leave(g, t))

    def _forget_leave(self, group: str, task: asyncio.Task) -> None:
        if self._leaving.get(group) is task:
            del self._leaving[group]

    async def _discard(self, group: str, channel: str) -> None:
        # Bounded, in the background: a Redis that is away must not hold a stream's close.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(GROUP_LEAVE_TIMEOUT_SECONDS):
                await self.layer.group_discard(group, channel)

    async def _ensure_channel(self) -> None:
        async with self._channel_lock:
            if self.channel is None:
                # The layer's default prefix: channels_redis reads every process-local
                # channel through one list per process, named by that prefix.
                self.channel = await self.layer.new_channel()
            if self._reader is None or self._reader.done():
                self._reader = self.loop.create_task(self._read(), name="glove-live-hub")

    async def _read(self) -> None:
        assert self.channel is not None
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # Redis away: transient frames pause, stored ones flow
                logger.info("live: the hub's channel read failed (%s: %s)", type(error), error)
                await asyncio.sleep(1.0)
                continue
            await self._deliver(message)
            if time.monotonic() - self._refreshed > GROUP_REFRESH_SECONDS:
                self._refreshed = time.monotonic()
                # Awaited: a refresh is one command per group watched here, once an hour.
                await self._refresh()

    async def _deliver(self, message: dict) -> None:
        for watcher in list(self.members.get(str(message.get("group", "")), ())):
            try:
                async with asyncio.timeout(DELIVERY_TIMEOUT_SECONDS):
                    await watcher.layer_message(message)
            except Exception as error:
                logger.info("live: a stream missed a transient frame (%s)", type(error).__name__)

    async def _refresh(self) -> None:
        for group in list(self.members):
            with contextlib.suppress(Exception):
                await self.layer.group_add(group, self.channel)

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        for group in list(self.members):
            if self.channel is not None:
                await self._discard(group, self.channel)
        self.members.clear()


_hub: Hub | None = None


def hub() -> Hub | None:
    """This event loop's hub (made on first use), None without a channel layer."""
    global _hub
    layer = get_channel_layer()
    if layer is None:
        return None
    current = _hub
    if (
        current is None
        or current.layer is not layer
        or current.loop is not asyncio.get_running_loop()
        or not current.usable()
    ):
        current = _hub = Hub(layer)
    return current


async def stop_hub() -> None:
    """Stop this process's hub (tests; a server stops with its process)."""
    global _hub
    current, _hub = _hub, None
    if current is not None and current.usable():
        await current.stop()
