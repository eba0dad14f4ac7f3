"""Cancellation for a running request, in the shape of the web's AbortController."""

from __future__ import annotations

import asyncio

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
