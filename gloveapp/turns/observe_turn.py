"""What one turn reports while it runs: its model calls, tool calls, waits and token usage.

A `TurnObserver` wraps the turn's model adapter (each call timed, its tokens counted, an error
typed), listens to the turn's `tool_use_result` events and is told of the prompts that wait on
a person; it feeds the Prometheus metrics (`gloveapp.observe.metrics`), stores each step of
the turn's timeline as it ends (`steps.steps_record`, inside the turn's fence: a worker
that lost the turn writes none) and keeps the turn's usage, which the worker stores on the
turn when it finishes it (cost is that usage priced by GLOVE_MODEL_PRICES).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from gloveapp.agents.config import model_prices
from gloveapp.approvals.models import ApprovalDecision
from gloveapp.core.approvals.policy import APPROVAL_RENDERER
from gloveapp.core.events import TOOL_USE_RESULT
from gloveapp.core.types import ToolStatus
from gloveapp.lib.db.outages import is_database_outage
from gloveapp.observe import metrics, tracing
from gloveapp.observe.cost import Usage, cost_of, price_for
from gloveapp.turns import steps
from gloveapp.turns.models import Turn, TurnSlot, TurnStep
from gloveapp.turns.spending import current_spending

logger = logging.getLogger(__name__)
# The `tool` label of a call to no tool the turn has (a name the model made up): the label
# values stay the agent's tools, never a customer's or a model's text.
UNKNOWN_TOOL = "(unknown)"
OUTCOMES = frozenset(get_args(ToolStatus))
# Kept steps are stored at the latest after this many (a long turn's timeline fills as it runs).
FLUSH_EVERY = 16


def _by_kind(usage: Usage) -> dict[str, int]:
    return {
        "input": usage.tokens_in,
        "output": usage.tokens_out,
        "cache_read": usage.cache_read,
        "cache_write": usage.cache_write,
    }


def _minus(left: Usage, right: Usage) -> Usage:
    return Usage(
        max(left.tokens_in - right.tokens_in, 0),
        max(left.tokens_out - right.tokens_out, 0),
        max(left.cache_read - right.cache_read, 0),
        max(left.cache_write - right.cache_write, 0),
    )


def call_cost(model: str, usage: Usage) -> float | None:
    price = price_for(model, model_prices())
    return None if price is None else float(cost_of(usage, price))


class TurnObserver:
    def __init__(self, turn: Turn, *, agent: str, provider: str) -> None:
        self.turn = turn
        self.agent = agent
        self.provider = provider
        self.model = ""
        # What the attempt's model calls used that no write stored yet (see `stored`).
        self.usage = Usage()
        # Set by the turn's store (`turn_store.TurnStore`), which counts the totals itself.
        self.counts_on_store = False
        self.started = time.monotonic()
        self.steps_left = settings.GLOVE_TIMELINE_MAX_STEPS
        self._waits: dict[str, tuple[datetime, int]] = {}
        self.pending: list[steps.StepData] = []
        self._span: Any = None
        self._token: object = None
        # The names of the turn's tools now (`Glove.tool_names`), set once its Glove is built.
        self.tool_names: Any = None

    # -- the trace ------------------------------------------------------------------------
    def begin_span(self, worker_id: str) -> None:
        """`invoke_agent <agent>`, current until `end_span`, a child of the request that
        posted the turn (its stored traceparent)."""
        if not tracing.wanted_here():
            return
        self._span = tracing.start(
            f"invoke_agent {self.agent}",
            parent=tracing.root_or_under(self.turn.trace_parent),
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.agent,
                "gen_ai.conversation.id": self.turn.session_id,
                "glove.turn.id": self.turn.pk,
                "glove.turn.attempt": self.turn.attempts,
                "glove.worker.id": worker_id,
            },
        )
        self._token = tracing.attach(self._span)

    def end_span(self, status: str, error: str = "") -> None:
        if self._span is None:
            return
        self._span.set_attribute("glove.turn.status", status)
        if status == Turn.Status.FAILED:
            self._span.set_status(tracing.error_status(error or "failed"))
        self._span.end()
        tracing.detach(self._token)
        self._span = None

    async def step(
        self,
        kind: str,
        name: str,
        *,
        started_at: datetime,
        duration: float | None = None,
        outcome: str = "",
        detail: dict[str, Any] | None = None,
        now: bool = False,
    ) -> None:
        """Keep one timeline step (bounded per attempt). Steps are stored together: with
        the turn's end, before a wait on a person (so the timeline shows the turn so far
        while it waits), every FLUSH_EVERY steps, and at once with `now`."""
        if self.steps_left <= 0:
            return
        self.steps_left -= 1
        self.pending.append(
            steps.StepData(
                kind=kind,
                name=name,
                started_at=started_at,
                duration_ms=None if duration is None else max(int(duration * 1000), 0),
                outcome=outcome,
                detail=detail,
            )
        )
        if now or len(self.pending) >= FLUSH_EVERY:
            await self.flush()

    async def flush(self) -> None:
        """Store the steps kept so far, inside the turn's fence. A database outage
        propagates (the turn is interrupted and runs again); any other failure loses only
        the steps."""
        kept, self.pending = self.pending, []
        if not kept:
            return
        try:
            await sync_to_async(steps.steps_record)(turn=self.turn, steps=kept)
        except Exception as error:
            if is_database_outage(error):
                raise
            logger.exception("could not store timeline steps of turn %s", self.turn.pk)

    def take_pending(self) -> list[steps.StepData]:
        """The steps not stored yet, for the turn's end to store."""
        kept, self.pending = self.pending, []
        return kept

    def attempt_started(self) -> None:
        """The attempt's timeline step is stored with the claim (`claim.turn_claim_next`):
        counted here; a retry is a `glove.retry` span naming the worker of the attempt
        before it."""
        if self.steps_left > 0:
            self.steps_left -= 1
        if self.turn.retried:
            now = time.time_ns()
            tracing.span_between(
                "glove.retry",
                start_ns=now,
                end_ns=now,
                attributes={
                    "glove.turn.attempt": self.turn.attempts,
                    "glove.retry.previous_worker": self.turn.previous_worker,
                },
            )

    async def wait_opened(self, slot_id: str) -> None:
        self._waits.setdefault(slot_id, (timezone.now(), time.time_ns()))
        # A person may take minutes: what the turn did so far is readable meanwhile.
        await self.flush()

    def wait_stored(self, slot_id: str, created_at: datetime, *, closed: bool) -> None:
        """The wait's row is stored, maybe by an earlier attempt (the turn parked, or its
        worker died, while it waited): the wait began when that row was written. `closed`:
        an earlier attempt saw it answered and closed it (this one re-runs the call that
        asked, which finds the answer): that wait is reported already."""
        if closed:
            self._waits.pop(slot_id, None)
        elif slot_id in self._waits:
            self._waits[slot_id] = (created_at, int(created_at.timestamp() * 1_000_000_000))

    async def wait_closed(self, slot: Any) -> None:
        """A prompt that waited on a person closed: its wait is a step and a span."""
        opened = self._waits.pop(slot.id, None)
        if opened is None:
            return
        opened_at, opened_ns = opened
        closed_ns = time.time_ns()
        waited = max(closed_ns - opened_ns, 0) / 1e9
        kind, outcome = str(slot.renderer or "prompt"), str(slot.status or "")
        decided = await sync_to_async(who_answered)(self.turn.pk, slot.id, slot.renderer)
        tracing.span_between(
            f"glove.wait {kind}",
            start_ns=opened_ns,
            end_ns=closed_ns,
            # Its own attempt's span, whichever task closed the slot (an answer is handed
            # over by the worker's watcher, outside the turn's context).
            parent=self._span,
            attributes={
                "glove.wait.kind": kind,
                "glove.wait.outcome": outcome,
                "glove.wait.seconds": waited,
                "gen_ai.tool.name": str(slot.tool_name or ""),
                **{f"glove.wait.{key}": value for key, value in decided.items()},
            },
        )
        await self.step(
            TurnStep.Kind.WAIT,
            kind,
            started_at=opened_at,
            duration=waited,
            outcome=outcome,
            detail={"slot_id": slot.id, "tool_name": slot.tool_name, **decided},
        )

    def tool_label(self, name: str) -> str:
        """`name` when the turn has a tool of that name, else `UNKNOWN_TOOL`."""
        names = self.tool_names() if self.tool_names is not None else ()
        if name in names:
            return name
        wanted = name.lower()  # the executor finds a tool whatever the case
        return next((known for known in names if known.lower() == wanted), UNKNOWN_TOOL)

    def observe_model(self, adapter: Any) -> ObservedModel:
        self.model = getattr(adapter, "name", "") or self.provider
        return ObservedModel(adapter, self)

    async def on_event(self, event_type: str, payload: dict[str, Any]) -> None:
        if event_type != TOOL_USE_RESULT:
            return
        result = payload.get("result") or {}
        outcome = str((result.get("status") if isinstance(result, dict) else None) or "success")
        outcome = outcome if outcome in OUTCOMES else "error"
        tool = self.tool_label(str(payload.get("tool_name") or payload.get("name") or ""))
        duration = (payload.get("duration_ms") or 0) / 1000
        metrics.tool_call(agent=self.agent, tool=tool, outcome=outcome, duration=duration)
        end_ns = time.time_ns()
        tracing.span_between(
            f"execute_tool {tool}",
            start_ns=end_ns - int(duration * 1e9),
            end_ns=end_ns,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": str(payload.get("call_id") or ""),
                "glove.tool.outcome": outcome,
                **({"error.type": "tool_error"} if outcome == "error" else {}),
            },
            error="tool_error" if outcome == "error" else "",
        )
        await self.step(
            TurnStep.Kind.TOOL,
            tool,
            started_at=timezone.now() - timedelta(seconds=duration),
            duration=duration,
            outcome=outcome,
            detail={"call_id": payload.get("call_id")},
        )

    async def model_step(
        self, model: str, started_at: datetime, duration: float, result: Any, error: Any
    ) -> None:
        if error is not None:
            await self.step(
                TurnStep.Kind.MODEL,
                model,
                started_at=started_at,
                duration=duration,
                outcome="error",
                detail={"error_type": type(error).__name__},
            )
            return
        await self.step(
            TurnStep.Kind.MODEL,
            model,
            started_at=started_at,
            duration=duration,
            outcome="success",
            detail={
                "input_tokens": result.tokens_in or 0,
                "output_tokens": result.tokens_out or 0,
                "cache_read_tokens": result.cache_read_input_tokens or 0,
                "cache_write_tokens": result.cache_creation_input_tokens or 0,
                "finish_reason": result.stop_reason or "",
            },
        )

    def model_answered(self, model: str, result: Any, duration: float) -> None:
        usage = Usage(
            tokens_in=result.tokens_in or 0,
            tokens_out=result.tokens_out or 0,
            cache_read=result.cache_read_input_tokens or 0,
            cache_write=result.cache_creation_input_tokens or 0,
        )
        # Not stored yet: the turn's store counts it with the reply (`stored`); what is left
        # when the attempt ends (a compaction's input) goes with the end (`settled`).
        self.usage = self.usage + usage
        metrics.model_call(
            agent=self.agent,
            provider=self.provider,
            model=model,
            duration=duration,
            tokens=_by_kind(usage),
            cost_usd=call_cost(model, usage),
            totals=not self.counts_on_store,
        )

    def stored(self, model: str, usage: Usage) -> None:
        """The turn's store committed `usage` of `model` (a reply's, a compaction's): no
        longer left for the attempt's end; counted in the metrics' totals now."""
        self.usage = _minus(self.usage, usage)
        metrics.model_usage(
            agent=self.agent, model=model, tokens=_by_kind(usage), cost_usd=call_cost(model, usage)
        )

    def settled(self) -> None:
        """The attempt's end (or park) stored what its store had not: in the totals too."""
        if self.counts_on_store and not self.usage.empty:
            self.stored(self.model, self.usage)

    def model_failed(self, model: str, error: BaseException, duration: float) -> None:
        metrics.model_call(
            agent=self.agent,
            provider=self.provider,
            model=model,
            duration=duration,
            error_type=type(error).__name__,
        )

    def finished(self, status: str) -> None:
        self.settled()
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
        # The call's worst case is reserved against the turn's budgets before it is made
        # (`turns.spending`); settled to its usage after, released if it failed.
        spending = current_spending()
        held = None
        if spending is not None:
            held = await spending.reserve(self._inner, messages, tools, agent=self._observer.agent)
        try:
            result = await self._timed(model, messages, tools, notify, abort)
        except BaseException:
            if held is not None and spending is not None:
                await spending.release(held)
            raise
        if held is not None and spending is not None:
            await spending.settle(held, model, result)
        return result

    async def _timed(self, model: str, messages: Any, tools: Any, notify: Any, abort: Any) -> Any:
        span = token = None
        if tracing.recording():
            span = tracing.start(
                f"chat {model}",
                kind=tracing.CLIENT,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": self._observer.provider,
                    "gen_ai.request.model": model,
                },
            )
            token = tracing.attach(span)
        started, started_at = time.perf_counter(), timezone.now()
        try:
            result = await self._inner.prompt(messages, tools, notify, abort)
        except Exception as error:
            duration = time.perf_counter() - started
            if span is not None:
                span.set_attribute("error.type", type(error).__name__)
                span.set_status(tracing.error_status(type(error).__name__))
                span.end()
                tracing.detach(token)
            self._observer.model_failed(model, error, duration)
            await self._observer.model_step(model, started_at, duration, None, error)
            raise
        duration = time.perf_counter() - started
        if span is not None:
            span.set_attributes(
                {
                    "gen_ai.usage.input_tokens": result.tokens_in or 0,
                    "gen_ai.usage.output_tokens": result.tokens_out or 0,
                    "gen_ai.usage.cache_read.input_tokens": result.cache_read_input_tokens or 0,
                    "gen_ai.usage.cache_creation.input_tokens": (
                        result.cache_creation_input_tokens or 0
                    ),
                    "gen_ai.response.finish_reasons": [result.stop_reason or ""],
                }
            )
            span.end()
            tracing.detach(token)
        self._observer.model_answered(model, result, duration)
        await self._observer.model_step(model, started_at, duration, result, None)
        return result


def who_answered(turn_id: int, slot_id: str, renderer: str) -> dict[str, str]:
    """Who answered the prompt a turn's slot waited on, and through which channel: an
    approval's decider (and decision), or the person who answered the slot itself."""
    if renderer == APPROVAL_RENDERER:
        found = (
            ApprovalDecision.objects.filter(request__turn_id=turn_id, request__slot_id=slot_id)
            .values("username", "channel", "kind")
            .first()
        )
        if found is None:
            return {}
        return {
            "decider": found["username"],
            "channel": found["channel"],
            "decision": found["kind"],
        }
    answered = (
        TurnSlot.objects.filter(turn_id=turn_id, slot_id=slot_id)
        .values_list("answered_by", "answered_via")
        .first()
    )
    if answered is None or not answered[1]:
        return {}
    return {"decider": answered[0], "channel": answered[1]}


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
