"""Plumbing shared by the SDK-backed adapters: abortable calls, per-loop clients, event payloads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from gloveapp.core.abort import AbortSignal, race_abort
from gloveapp.core.types import ModelResult


async def run_abortable[T](coro: Coroutine[Any, Any, T], abort: AbortSignal | None) -> T:
    """Await the SDK call `coro`, stopping it as soon as `abort` fires (`abort.race_abort`)."""
    return await race_abort(coro, abort)


def sdk_client_options(
    *, api_key: str | None, base_url: str | None, timeout: float | None, max_retries: int | None
) -> dict[str, Any]:
    """Constructor options for an official SDK client; unset ones keep the SDK's defaults."""
    options = {
        "api_key": api_key,
        "base_url": base_url,
        "timeout": timeout,
        "max_retries": max_retries,
    }
    return {key: value for key, value in options.items() if value is not None}


class LoopBoundClient[C]:
    """One SDK client per event loop.

    SDK clients pool connections on the loop that opened them; Django runs async code on
    several loops (one per `async_to_sync` call, one per test), so a single shared client would
    hand a connection to the wrong loop. An injected client is used as-is.
    """

    def __init__(self, factory: Callable[[], C], client: C | None = None) -> None:
        self._factory = factory
        self._fixed = client
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: C | None = None

    def get(self) -> C:
        if self._fixed is not None:
            return self._fixed
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._factory()
            self._loop = loop
        return self._client


def response_payload(result: ModelResult) -> dict[str, Any]:
    """The `model_response` / `model_response_complete` event payload (§2.5).

    Keys that JS would leave `undefined` are left out, as in glove-core's events.
    """
    message = result.messages[0]
    payload: dict[str, Any] = {"text": message.text}
    if message.tool_calls:
        payload["tool_calls"] = [call.to_dict() for call in message.tool_calls]
    if result.stop_reason is not None:
        payload["stop_reason"] = result.stop_reason
    payload["tokens_in"] = result.tokens_in
    payload["tokens_out"] = result.tokens_out
    if result.cache_creation_input_tokens is not None:
        payload["cache_creation_input_tokens"] = result.cache_creation_input_tokens
    if result.cache_read_input_tokens is not None:
        payload["cache_read_input_tokens"] = result.cache_read_input_tokens
    return payload
