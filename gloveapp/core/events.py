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
from collections.abc import Awaitable, Callable
from typing import Any

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
    order of contract §2.5. A subscriber that raises stops the request, as in Glove.
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
