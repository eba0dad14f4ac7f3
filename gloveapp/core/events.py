"""Subscriber events: how a UI (a websocket, a log, a test) watches a request as it runs.

A subscriber is a callable `(event_type, payload)`, sync or async. Payloads are plain dicts in
Glove's JSON shape, so they can be sent to a browser as they are:

- `text_delta {text}`, `tool_use {id, name, input}`: streamed by adapters.
- `model_response {...}` / `model_response_complete {...}`: one per model call, from adapters.
- `token_consumption {consumption}`: after each loop model call (not the compaction call).
- `tool_use_result {tool_name, call_id, result, duration_ms, id, name}`.
- `compaction_start {current_token_consumption}`,
  `compaction_end {current_token_consumption, summary_message, consumption}`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

logger = logging.getLogger("gloveapp.core")

Subscriber = Callable[[str, dict[str, Any]], Awaitable[None] | None]

TEXT_DELTA = "text_delta"
TOOL_USE = "tool_use"
MODEL_RESPONSE = "model_response"
MODEL_RESPONSE_COMPLETE = "model_response_complete"
TOKEN_CONSUMPTION = "token_consumption"
TOOL_USE_RESULT = "tool_use_result"
COMPACTION_START = "compaction_start"
COMPACTION_END = "compaction_end"


class EventBus:
    """Delivers each event to every subscriber, in subscription order, awaiting each.

    Glove awaits subscribers with `Promise.all` and fires some `tool_use_result` events without
    awaiting them; here every event is awaited in order, so subscribers see events in the
    order of contract §2.5. A subscriber that raises stops the request, as in Glove, except
    through `emit_fire_and_forget`, used for the emissions Glove does not await.
    """

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def add(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def remove(self, subscriber: Subscriber) -> None:
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)

    async def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        for subscriber in list(self._subscribers):
            outcome = subscriber(event_type, payload)
            if inspect.isawaitable(outcome):
                await outcome

    async def emit_fire_and_forget(self, event_type: str, payload: dict[str, Any]) -> None:
        """Deliver like `emit`, but a subscriber that raises is logged and skipped.

        For the emissions Glove fires without awaiting (contract §2.5: the success/error/abort
        `tool_use_result` after a tool ran): a broken subscriber must not lose results that
        were already produced. Still awaited, in order, so the event order stays the same.
        """
        for subscriber in list(self._subscribers):
            try:
                outcome = subscriber(event_type, payload)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                logger.exception("subscriber %r failed on %s; ignored", subscriber, event_type)
