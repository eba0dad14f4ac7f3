"""What one turn reports while it runs: its model calls, tool calls and token usage.

A `TurnObserver` wraps the turn's model adapter (each call timed, its tokens counted, an error
typed) and listens to the turn's `tool_use_result` events; it feeds the Prometheus metrics
(`gloveapp.observe.metrics`) and keeps the turn's usage, which the worker stores on the turn
when it finishes it (cost is that usage priced by GLOVE_MODEL_PRICES).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from gloveapp.agents.config import model_prices
from gloveapp.core.events import TOOL_USE_RESULT
from gloveapp.observe import metrics
from gloveapp.observe.cost import Usage, cost_of, price_for
from gloveapp.turns.models import Turn


def call_cost(model: str, usage: Usage) -> float | None:
    price = price_for(model, model_prices())
    return None if price is None else float(cost_of(usage, price))


class TurnObserver:
    def __init__(self, turn: Turn, *, agent: str, provider: str) -> None:
        self.turn = turn
        self.agent = agent
        self.provider = provider
        self.model = ""
        self.usage = Usage()
        self.started = time.monotonic()

    def observe_model(self, adapter: Any) -> ObservedModel:
        self.model = getattr(adapter, "name", "") or self.provider
        return ObservedModel(adapter, self)

    async def on_event(self, event_type: str, payload: dict[str, Any]) -> None:
        if event_type != TOOL_USE_RESULT:
            return
        result = payload.get("result") or {}
        outcome = result.get("status") if isinstance(result, dict) else None
        metrics.tool_call(
            agent=self.agent,
            tool=str(payload.get("tool_name") or payload.get("name") or ""),
            outcome=str(outcome or "success"),
            duration=(payload.get("duration_ms") or 0) / 1000,
        )

    def model_answered(self, model: str, result: Any, duration: float) -> None:
        usage = Usage(
            tokens_in=result.tokens_in or 0,
            tokens_out=result.tokens_out or 0,
            cache_read=result.cache_read_input_tokens or 0,
            cache_write=result.cache_creation_input_tokens or 0,
        )
        self.usage = self.usage + usage
        metrics.model_call(
            agent=self.agent,
            provider=self.provider,
            model=model,
            duration=duration,
            tokens={
                "input": usage.tokens_in,
                "output": usage.tokens_out,
                "cache_read": usage.cache_read,
                "cache_write": usage.cache_write,
            },
            cost_usd=call_cost(model, usage),
        )

    def model_failed(self, model: str, error: BaseException, duration: float) -> None:
        metrics.model_call(
            agent=self.agent,
            provider=self.provider,
            model=model,
            duration=duration,
            error_type=type(error).__name__,
        )

    def finished(self, status: str) -> None:
        metrics.turn_finished(
            agent=self.agent, status=status, duration=time.monotonic() - self.started
        )


class ObservedModel:
    """The turn's model adapter, each `prompt` timed and counted; everything else passes."""

    def __init__(self, inner: Any, observer: TurnObserver) -> None:
        self._inner = inner
        self._observer = observer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def prompt(self, messages: Any, tools: Any, notify: Any, abort: Any = None) -> Any:
        model = getattr(self._inner, "name", "") or self._observer.model
        started = time.perf_counter()
        try:
            result = await self._inner.prompt(messages, tools, notify, abort)
        except BaseException as error:
            self._observer.model_failed(model, error, time.perf_counter() - started)
            raise
        self._observer.model_answered(model, result, time.perf_counter() - started)
        return result


def _aware(moment: Any) -> datetime | None:
    # The claim's raw SQL gives SQLite's timestamps back as text or naive datetimes (UTC).
    if isinstance(moment, str):
        moment = parse_datetime(moment)
    if isinstance(moment, datetime) and timezone.is_naive(moment):
        moment = timezone.make_aware(moment, UTC)
    return moment if isinstance(moment, datetime) else None


def turn_started(turn: Turn, *, agent: str) -> None:
    queue_wait = None
    started, created = _aware(turn.started_at), _aware(turn.created_at)
    if started is not None and created is not None:
        queue_wait = (started - created).total_seconds()
    metrics.turn_started(agent=agent, retried=turn.retried, queue_wait=queue_wait)
