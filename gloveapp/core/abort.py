"""Cancellation for a running request, in the shape of the web's AbortController."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable

from gloveapp.core.types import AbortError


class AbortSignal:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason: str | None = None

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()

    def raise_if_aborted(self) -> None:
        if self.aborted:
            raise AbortError()

    def _fire(self, reason: str | None) -> None:
        self.reason = reason
        self._event.set()


class AbortController:
    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: str | None = None) -> None:
        if not self.signal.aborted:
            self.signal._fire(reason)


async def race_abort[T](awaitable: Awaitable[T], abort: AbortSignal | None) -> T:
    """Await `awaitable`, or raise `AbortError` (cancelling it) as soon as `abort` fires.

    The one home of abort racing: a model call (cancelling makes the SDK close the HTTP
    response, so an aborted stream stops consuming tokens), a tool run and a wait for the
    user all go through here. An abort ends the wait at once; the cancelled work is allowed
    to unwind (its finally blocks, a display slot it drops) before AbortError is raised. If
    the caller itself is cancelled, the work is cancelled with it.
    """
    if abort is None:
        return await awaitable
    if abort.aborted:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise AbortError()
    task = asyncio.ensure_future(awaitable)
    aborted = asyncio.ensure_future(abort.wait())
    try:
        await asyncio.wait({task, aborted}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
        if not task.done():
            task.cancel()
    if task.done() and not task.cancelled():
        return task.result()
    await asyncio.wait({task})
    raise AbortError()
